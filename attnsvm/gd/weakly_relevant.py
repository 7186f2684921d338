"""Sakamoto & Sato's own token model, in their units (docs/science.md §15, "Sakamoto & Sato's
own setting", eq. (15.4)-(15.7)).

Their code (github.com/keitaroskmt/benign-attention, ``main.py``, ``CustomDataset``): tokens
``N(0, I_d)``; the first token carries the class signal ``mu_y``, the second ``rho mu_y`` and
the third ``rho mu_{-y}`` (weakly relevant), the other ``T - 3`` are pure noise; the first
``floor(n / 2)`` labels are +1, the rest -1; ``k = ceil(n label_flip)`` noisy labels, the
first ``floor(k / 2)`` of each class flipped. ``mu_+ = ||mu|| e_1``, ``mu_- = ||mu|| e_2``,
the fixed head ``nu = (mu_+ - mu_-) / ||mu_+ - mu_-|| / ||mu||`` and every query ``z = e_1``
(so that the score ``x^T K Q^T z`` of ``param: KQ`` is their ``x^T W p`` with ``K = W`` and
``p`` the first row of Q). Unlike :mod:`attnsvm.gd.signal_noise`, nothing is rescaled by
``1 / sqrt(d)``: the signal-to-noise ratio is ``||mu|| / sqrt(d)``.
"""

from __future__ import annotations

import math

import numpy as np

#: positions of the relevant token and of the two weakly relevant ones (their tokens 1, 2, 3)
RELEVANT, WEAK_SAME, WEAK_OPPOSITE = 0, 1, 2
#: the fewest tokens the model has: the relevant and the two weakly relevant ones
MIN_TOKENS = 3


def signal_vectors(d: int, signal_norm: float) -> tuple[np.ndarray, np.ndarray]:
    """``mu_+ = ||mu|| e_1`` and ``mu_- = ||mu|| e_2`` (docs/science.md §15, eq. (15.4))."""
    mu_pos, mu_neg = np.zeros(d), np.zeros(d)
    mu_pos[0], mu_neg[1] = signal_norm, signal_norm
    return mu_pos, mu_neg


def head_and_query(d: int, signal_norm: float) -> tuple[np.ndarray, np.ndarray]:
    """Their fixed head ``nu = (mu_+ - mu_-) / ||mu_+ - mu_-|| / ||mu||`` and the query
    ``z = e_1`` shared by every example (docs/science.md §15, eq. (15.7))."""
    mu_pos, mu_neg = signal_vectors(d, signal_norm)
    nu = (mu_pos - mu_neg) / np.linalg.norm(mu_pos - mu_neg) / signal_norm
    z = np.zeros(d)
    z[0] = 1.0
    return nu, z


def clean_labels(n: int) -> np.ndarray:
    """The first ``floor(n / 2)`` labels +1, the others -1 (their code's fixed order)."""
    return np.concatenate([np.ones(n // 2), -np.ones(n - n // 2)])


def flip_mask(n: int, label_flip: float) -> np.ndarray:
    """Their noisy examples (docs/science.md §15, eq. (15.6)): ``k = ceil(n label_flip)``,
    the first ``floor(k / 2)`` examples of each class (so ``2 floor(k / 2)`` in all)."""
    k = math.ceil(n * label_flip)
    half = k // 2
    mask = np.zeros(n, bool)
    mask[:half] = True
    mask[n // 2 : n // 2 + half] = True
    return mask


def draw(
    n: int, T: int, d: int, signal_norm: float, rho: float, label_flip: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``n`` examples of Sakamoto & Sato's token model (docs/science.md §15, eq. (15.4)-(15.7)).

    ``X = xi + (mu_y on token 1, rho mu_y on token 2, rho mu_{-y} on token 3)`` with ``xi``
    (n, T, d) standard normal, drawn at once from ``rng``; ``y`` of :func:`clean_labels`; the
    stored label is ``-y`` on :func:`flip_mask` (``label_flip = 0``: none, their test sample).
    Returns ``X (n, T, d)``, the stored labels ``Y``, the queries ``Z`` (every row ``e_1``),
    the head ``nu`` and ``flipped`` (n,) bool.
    """
    if T < MIN_TOKENS:
        raise ValueError(f"the weakly relevant token model needs T >= {MIN_TOKENS}, got T={T}")
    mu_pos, mu_neg = signal_vectors(d, signal_norm)
    nu, z = head_and_query(d, signal_norm)
    y = clean_labels(n)
    same = np.where(y[:, None] > 0, mu_pos, mu_neg)  # mu_y
    opposite = np.where(y[:, None] > 0, mu_neg, mu_pos)  # mu_{-y}
    X = rng.standard_normal((n, T, d))
    X[:, RELEVANT, :] += same
    X[:, WEAK_SAME, :] += rho * same
    X[:, WEAK_OPPOSITE, :] += rho * opposite
    flipped = flip_mask(n, label_flip)
    Y = np.where(flipped, -y, y)
    return X, Y, np.tile(z, (n, 1)), nu, flipped


def bayes_statistic(X: np.ndarray, rho: float) -> np.ndarray:
    """``<x_1 + rho x_2 - rho x_3, e_1 - e_2>`` (n,): the log-likelihood ratio of ``y = +1``
    against ``y = -1`` up to the positive factor ``||mu||`` (docs/science.md §15, eq. (15.9));
    its sign is the Bayes-optimal label for equal class priors."""
    r = X[:, RELEVANT, :] + rho * (X[:, WEAK_SAME, :] - X[:, WEAK_OPPOSITE, :])
    return r[:, 0] - r[:, 1]


def bayes_error(signal_norm: float, rho: float) -> float:
    """The Bayes error on clean labels with equal priors (docs/science.md §15, eq. (15.9)):
    ``Phi(-||mu|| sqrt((1 + 2 rho^2) / 2))``. Given y the statistic of
    :func:`bayes_statistic` is ``N(y (1 + 2 rho^2) ||mu||, 2 (1 + 2 rho^2))``."""
    from scipy.stats import norm  # this function only

    return float(norm.cdf(-signal_norm * math.sqrt((1 + 2 * rho**2) / 2)))
