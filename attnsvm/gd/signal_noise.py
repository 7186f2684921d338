"""The signal-plus-noise token model of docs/science.md §15 and its held-out test sample.

One relevant token carries the class signal, the other T - 1 tokens are pure noise, and each
label is flipped with probability ``label_flip`` (Sakamoto & Sato, arXiv 2409.17625, §2 and
their code keitaroskmt/benign-attention; Magen et al., arXiv 2410.07746, §2). With
``sigma = 1 / sqrt(d)`` and ``||mu_+|| = ||mu_-|| = snr`` the signal-to-noise ratio
``||mu|| / (sigma sqrt(d))`` of the papers is the cell's ``snr``.
"""

from __future__ import annotations

import numpy as np

#: position of the signal token in every example (the papers' first token)
SIGNAL_TOKEN = 0


def signal_vectors(d: int, snr: float) -> tuple[np.ndarray, np.ndarray]:
    """``mu_+ = snr e_1`` and ``mu_- = snr e_2``: orthogonal class signals of norm ``snr``
    (the papers' orthogonal signal vectors; docs/science.md §15)."""
    mu_pos, mu_neg = np.zeros(d), np.zeros(d)
    mu_pos[0], mu_neg[1] = snr, snr
    return mu_pos, mu_neg


def head_and_query(d: int, snr: float) -> tuple[np.ndarray, np.ndarray]:
    """The fixed head ``v = (mu_+ - mu_-) / (||mu_+ - mu_-|| ||mu||)`` (the papers' nu, of
    norm 1 / ||mu||) and the shared query ``z = e_1``: ``W z`` is the papers' trained
    attention vector p, so GD on W is GD on p (docs/science.md §15)."""
    mu_pos, mu_neg = signal_vectors(d, snr)
    v = (mu_pos - mu_neg) / (np.linalg.norm(mu_pos - mu_neg) * snr)
    z = np.zeros(d)
    z[0] = 1.0
    return v, z


def draw(
    n: int, T: int, d: int, snr: float, label_flip: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` examples of the token model (docs/science.md §15, eq. (15.1)-(15.2)).

    Clean labels ``y_i`` are +-1 with probability 1/2; tokens ``x_it = xi_it ~ N(0, I / d)``
    and ``x_i0 = mu_{y_i} + xi_i0``; the stored label is ``-y_i`` with probability
    ``label_flip``. Returns ``X (n, T, d)``, the stored labels ``Y``, the queries ``Z`` (every
    row z), the head ``v`` and ``flipped`` (n,) bool.
    """
    mu_pos, mu_neg = signal_vectors(d, snr)
    v, z = head_and_query(d, snr)
    clean = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = rng.standard_normal((n, T, d)) / np.sqrt(d)
    X[:, SIGNAL_TOKEN, :] += np.where(clean[:, None] > 0, mu_pos, mu_neg)
    flipped = rng.random(n) < label_flip
    Y = np.where(flipped, -clean, clean)
    return X, Y, np.tile(z, (n, 1)), v, flipped
