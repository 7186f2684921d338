"""Real tokens: image patches of scikit-learn's bundled data (docs/science.md §9).

Two generators build datasets from data that ships inside scikit-learn (nothing is downloaded
at run time):

- ``digits``: the 8x8 handwritten digits of :func:`sklearn.datasets.load_digits`; a binary
  task, digit ``digit_pos`` (label +1) against digit ``digit_neg`` (label -1).
- ``photos``: the two photographs of :func:`sklearn.datasets.load_sample_images` (needs
  Pillow), each reduced 4x by block means; an example is an 8x8-pixel RGB window of one
  photograph (china: +1, flower: -1).

An 8x8 image is cut into non-overlapping ``patch`` x ``patch`` patches, the tokens, in
row-major order: ``T = (8 / patch)^2`` tokens of ``patch^2`` (digits) or ``3 patch^2``
(photos) pixels. Pixels are scaled to [0, 1] and centred by the mean pixel of the whole pool
(so that a blank patch is not the zero vector), then every token is scaled to unit norm, as
the synthetic tokens are, so that the SVM margins are on the same scale. With ``positional``
the unit-norm pixel token ``u_t`` becomes ``(u_t, e_t) / sqrt(2)``, ``e_t`` the one-hot
position of the patch: ``T`` more dimensions, still unit norm, and no two tokens of an
example equal (without it, identical patches, e.g. two blank corners of a digit, are identical
tokens, and no SVM can separate one from the other).

The seed picks which images (digits) or windows (photos) form the ``n`` examples: a seeded
sample without replacement, ``ceil(n/2)`` of label +1 and ``floor(n/2)`` of label -1, in a
seeded order. The query ``z_i`` is the example's mean token scaled to unit norm (a global
average of the image; self-attention uses the first token instead, as for every generator).
The fixed linear head ``v`` is a logistic regression without intercept (scikit-learn, L2
penalty, C = 10^4: nearly unpenalized) of the labels on the examples' mean tokens, fitted on
the ``n`` training examples themselves, scaled to unit norm like the gaussian generator's
``v``.
"""

from __future__ import annotations

import numpy as np

from attnsvm.images import (  # noqa: F401 - the image facts, re-exported for callers
    IMAGE_SIDE,
    PATCHES,
    REAL_GENERATORS,
    channels,
    pools,
    token_count,
    token_dim,
)

#: inverse L2 penalty of the head's logistic regression: large, so that v is close to the
#: max-margin direction when the mean tokens are separable, yet finite
HEAD_C = 1e4


def patches(images: np.ndarray, patch: int) -> np.ndarray:
    """Cut (N, 8, 8, c) images into row-major patches: (N, T, c patch^2)."""
    N, s, _, c = images.shape
    k = s // patch
    cut = images.reshape(N, k, patch, k, patch, c).transpose(0, 1, 3, 2, 4, 5)
    return cut.reshape(N, k * k, patch * patch * c)


def tokens(images: np.ndarray, patch: int, positional: bool, centre: float) -> np.ndarray:
    """Unit-norm tokens of images (docs/science.md §9): patches minus
    ``centre``, scaled to unit norm, with the one-hot position appended when ``positional``
    (then divided by sqrt(2)). A patch equal to ``centre`` everywhere stays zero."""
    raw = patches(images, patch) - centre
    norm = np.linalg.norm(raw, axis=-1, keepdims=True)
    unit = np.divide(raw, norm, out=np.zeros_like(raw), where=norm > 0)
    if not positional:
        return unit
    N, T, _ = unit.shape
    onehot = np.broadcast_to(np.eye(T), (N, T, T))
    return np.concatenate([unit, onehot], axis=-1) / np.sqrt(2.0)


def fit_head(means: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Unit-norm ``v`` of a logistic regression (no intercept, L2, C = 10^4) of ``Y`` on the mean
    tokens ``means`` (n, d): the fixed linear head of the real-token generators."""
    from sklearn.linear_model import LogisticRegression  # scikit-learn: real tokens only

    clf = LogisticRegression(fit_intercept=False, C=HEAD_C, max_iter=10_000, tol=1e-10)
    clf.fit(means, Y)
    v = clf.coef_[0].astype(np.float64)
    norm = np.linalg.norm(v)
    if not norm > 0:
        raise ValueError("the logistic regression of the labels on the mean tokens is zero")
    return v / norm


def real_dataset(
    generator: str,
    n: int,
    patch: int,
    positional: bool,
    rng: np.random.Generator,
    digit_pos: int = 3,
    digit_neg: int = 8,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X, Y, Z, v)`` of a real-token dataset: ``n`` seeded examples (module docstring).

    X (n, T, d) unit-norm tokens, Y (n,) labels, Z (n, d) unit-norm mean-token queries, v (d,)
    the fitted unit-norm head.
    """
    pos, neg = pools(generator, digit_pos, digit_neg)
    n_pos, n_neg = (n + 1) // 2, n // 2
    if n_pos > len(pos) or n_neg > len(neg):
        raise ValueError(
            f"generator {generator!r} has {len(pos)} examples of label +1 and {len(neg)} of "
            f"label -1, too few for n={n} (ceil(n/2) and floor(n/2) of them)"
        )
    centre = float(np.concatenate([pos.ravel(), neg.ravel()]).mean())
    pick_pos = rng.choice(len(pos), size=n_pos, replace=False)
    pick_neg = rng.choice(len(neg), size=n_neg, replace=False)
    images = np.concatenate([pos[pick_pos], neg[pick_neg]])
    Y = np.concatenate([np.ones(n_pos), -np.ones(n_neg)])
    order = rng.permutation(n)
    X = tokens(images[order], patch, positional, centre)
    Y = Y[order]
    means = X.mean(axis=1)
    Z = means / np.linalg.norm(means, axis=-1, keepdims=True)
    return X, Y, Z, fit_head(means, Y)
