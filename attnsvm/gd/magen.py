"""Magen et al.'s own token model and its Bayes classifier (docs/science.md §15, "Magen et
al.'s own setting", eq. (15.10)-(15.12); their min-norm interpolator is
:mod:`attnsvm.svm.minnorm`).

Two tokens per example: the signal token ``mu_y`` alone (no noise on it) and a noise token
``xi ~ N(0, (I - e_1 e_1^T - e_2 e_2^T) / d)``, orthogonal to the signals
``mu_+ = snr e_1``, ``mu_- = snr e_2``; labels flipped with probability ``label_flip``. The
model ``f(X) = v^T X^T softmax(X p)`` trains v and p jointly from zero: the cell's head starts
at v = 0 and, with ``param: W``, ``init: zero`` and the query ``z = e_1``, ``p = W z``.
Sources (Magen, Shang, Xu, Frei, Hu, Vardi, arXiv 2410.07746): the ICLR 2025 reviews
(OpenReview uVDwunWsLz) for the model, the noise covariance and the zero initialization; a
third-party reproduction (github.com/Albeenee/benign_overfitting_in_single_head_attention,
``utils/generate_data.py``, not the paper) for the noise-free signal token.
"""

from __future__ import annotations

import numpy as np

from attnsvm.gd.signal_noise import SIGNAL_TOKEN, signal_vectors

#: tokens per example: the signal and one noise token (Magen et al.: two tokens)
TOKENS = 2
#: position of the noise token (the signal is :data:`SIGNAL_TOKEN`)
NOISE_TOKEN = 1


def draw(
    n: int, d: int, snr: float, label_flip: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` examples of Magen et al.'s token model (docs/science.md §15, eq. (15.10)-(15.11)).

    Clean labels ``y_i`` are +-1 with probability 1/2 (one uniform draw each, ``< 1/2``: +1);
    then the noise ``g_i ~ N(0, I_d / d)`` (one ``(n, d)`` standard normal draw over ``sqrt(d)``)
    with its first two coordinates set to zero, which is ``N(0, (I - e_1 e_1^T - e_2 e_2^T) /
    d)``; ``x_i0 = mu_{y_i}``, ``x_i1 = g_i``; the stored label is ``-y_i`` where a uniform draw
    is below ``label_flip``. Returns ``X (n, 2, d)``, the stored labels ``Y``, the queries
    ``Z`` (every row ``e_1``), the initial head ``v = 0`` and ``flipped`` (n,) bool.
    """
    if d < 3:
        raise ValueError(f"Magen et al.'s token model needs d >= 3 (noise off e_1, e_2), got {d}")
    mu_pos, mu_neg = signal_vectors(d, snr)
    clean = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    noise = rng.standard_normal((n, d)) / np.sqrt(d)
    noise[:, :2] = 0.0
    X = np.empty((n, TOKENS, d))
    X[:, SIGNAL_TOKEN, :] = np.where(clean[:, None] > 0, mu_pos, mu_neg)
    X[:, NOISE_TOKEN, :] = noise
    flipped = rng.random(n) < label_flip
    Y = np.where(flipped, -clean, clean)
    Z = np.zeros((n, d))
    Z[:, 0] = 1.0
    return X, Y, Z, np.zeros(d), flipped


def bayes_error(label_flip: float) -> float:
    """The Bayes error of the token model (docs/science.md §15, eq. (15.12)): the flip rate.
    The signal token is noise free and the noise token has no component along ``e_1, e_2``,
    so ``X`` determines the clean label exactly; a flip rate below 1/2 makes the clean label
    the best guess of the stored one, wrong with probability ``label_flip``."""
    return float(label_flip)


def bayes_labels(X: np.ndarray) -> np.ndarray:
    """The Bayes-optimal classifier (n,): the clean label, ``sign(sum_t <x_it, e_1 - e_2>)``
    (only the signal token has a component there; docs/science.md §15, eq. (15.12))."""
    s = X[..., 0].sum(-1) - X[..., 1].sum(-1)
    return np.where(s >= 0, 1.0, -1.0)
