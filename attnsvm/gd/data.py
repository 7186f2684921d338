"""Seeded data generators of docs/science.md §1 and seeded initializations of §3.

Everything is drawn on the CPU in float64 from a per-seed NumPy generator, so a seed fixes
data and initialization bit for bit, whatever the device and whatever other seeds share a
batch. Data and initialization use two independent streams of the same seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.config.rules import TEST_GENERATORS
from attnsvm.gd import magen, signal_noise, weakly_relevant
from attnsvm.gd.real_tokens import real_dataset
from attnsvm.images import REAL_GENERATORS

_DATA_STREAM = 0
_INIT_STREAM = 1
#: the held-out test sample (docs/science.md §15): a stream of its own, so its examples are
#: independent of the training ones drawn from the same seed
_TEST_STREAM = 2
#: the mini-batch draws of training (docs/science.md §10, "Mini-batches"; attnsvm.gd.minibatch)
MINIBATCH_STREAM = 4
#: stream of the initializations of heads 2..H (head 1 is make_init's, so H = 1 is unchanged)
HEAD_INIT_STREAM = 0x4D48


@dataclass(frozen=True)
class Dataset:
    """One dataset (docs/science.md §1).

    X: tokens (n, T, d); Y: labels (n,) in {-1, +1}; Z: queries (n, d) (the first token for
    self-attention); v: linear head (d,); V: value matrix (d, d) of the relu head, else None;
    flipped: (n,) bool, the labels the generator flipped (signal_noise, §15), else None.
    """

    X: np.ndarray
    Y: np.ndarray
    Z: np.ndarray
    v: np.ndarray
    V: np.ndarray | None = None
    flipped: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def T(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[2]


def seeded_rng(seed: int, stream: int) -> np.random.Generator:
    """The generator of one ``stream`` of a ``seed`` (streams of one seed are independent)."""
    return np.random.default_rng(np.random.SeedSequence([seed, stream]))


def unit_rows(a: np.ndarray) -> np.ndarray:
    """``a`` with every row (last axis) scaled to unit norm."""
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def make_dataset(cell: Cell) -> Dataset:
    """Draw the dataset of a cell (docs/science.md §1: gaussian, relu, orthonormal, toy2d, and
    the real tokens digits and photos of :mod:`attnsvm.gd.real_tokens`; §15: the signal-noise
    token model of :mod:`attnsvm.gd.signal_noise`, and Magen et al.'s of
    :mod:`attnsvm.gd.magen`)."""
    rng = seeded_rng(cell.seed, _DATA_STREAM)
    n, T, d = cell.n, cell.T, cell.d
    V = None
    if cell.generator == "signal_noise":
        X, Y, Z, v, flipped = signal_noise.draw(n, T, d, cell.snr, cell.label_flip, rng)
        return Dataset(X=X, Y=Y, Z=Z, v=v, flipped=flipped)
    if cell.generator == "weakly_relevant":
        X, Y, Z, v, flipped = weakly_relevant.draw(
            n, T, d, cell.signal_norm, cell.rho, cell.label_flip, rng
        )
        return Dataset(X=X, Y=Y, Z=Z, v=v, flipped=flipped)
    if cell.generator == "magen":
        X, Y, Z, v, flipped = magen.draw(n, d, cell.snr, cell.label_flip, rng)
        return Dataset(X=X, Y=Y, Z=Z, v=v, flipped=flipped)
    if cell.generator == "toy2d":
        X, Y, Z, v = _toy2d()
    elif cell.generator in REAL_GENERATORS:
        X, Y, Z, v = real_dataset(
            cell.generator, n, cell.patch, cell.positional, rng, cell.digit_pos, cell.digit_neg
        )
    else:
        v = unit_rows(rng.standard_normal(d))
        Y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
        if cell.generator == "orthonormal":
            g = rng.standard_normal((n, d, T))
            X = np.linalg.qr(g)[0].transpose(0, 2, 1).copy()  # (n, T, d), orthonormal rows
            Y = np.ones(n)
        else:
            X = unit_rows(rng.standard_normal((n, T, d)))
        Z = unit_rows(rng.standard_normal((n, d)))
        if cell.generator == "relu":
            V = rng.standard_normal((d, d))
            V = V / np.linalg.norm(V)
            v = np.ones(d)
    if cell.attention == "self":
        Z = X[:, 0, :].copy()
    return Dataset(X=X, Y=Y, Z=Z, v=v, V=V)


def make_test_dataset(cell: Cell, train: Dataset) -> Dataset:
    """The held-out sample of ``cell.n_test`` examples (docs/science.md §15).

    Drawn from the training data's distribution, from the seed's own test stream (disjoint
    from the training data's and the initialization's), sharing what the distribution fixes:
    the head v (gaussian: drawn with the training data), the signals and the query
    (signal_noise, magen; a trained head: the training data's v, its final one). gaussian:
    unit tokens and queries, labels +-1 at random; self attention: the query is the first
    token. signal_noise, magen: labels flipped at the same rate. weakly_relevant: clean
    labels, as Sakamoto & Sato's code draws its test sample (but from the test stream, not
    from the training seed).
    """
    if cell.generator not in TEST_GENERATORS:
        raise ValueError(f"no test sample for generator {cell.generator!r} (docs/science.md 15)")
    rng = seeded_rng(cell.seed, _TEST_STREAM)
    m, T, d = cell.n_test, cell.T, cell.d
    if cell.generator == "signal_noise":
        X, Y, Z, v, flipped = signal_noise.draw(m, T, d, cell.snr, cell.label_flip, rng)
        return Dataset(X=X, Y=Y, Z=Z, v=train.v.copy(), flipped=flipped)
    if cell.generator == "weakly_relevant":
        X, Y, Z, _, flipped = weakly_relevant.draw(m, T, d, cell.signal_norm, cell.rho, 0.0, rng)
        return Dataset(X=X, Y=Y, Z=Z, v=train.v.copy(), flipped=flipped)
    if cell.generator == "magen":
        X, Y, Z, _, flipped = magen.draw(m, d, cell.snr, cell.label_flip, rng)
        return Dataset(X=X, Y=Y, Z=Z, v=train.v.copy(), flipped=flipped)
    Y = np.where(rng.standard_normal(m) > 0, 1.0, -1.0)
    X = unit_rows(rng.standard_normal((m, T, d)))
    Z = X[:, 0, :].copy() if cell.attention == "self" else unit_rows(rng.standard_normal((m, d)))
    return Dataset(X=X, Y=Y, Z=Z, v=train.v.copy())


def _toy2d() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hand-placed n=2, T=3, d=2 example for the trajectory picture (E1).

    Labels +1, -1 and head v = e_1 make token 1 optimal in both examples. The points were
    picked so that the Frobenius and nuclear SVM solutions differ visibly (the rays
    W_mm z_i and W_mm_* z_i are about 50 degrees apart) and GD from the zero init reaches
    its SVM direction within 2000 iterations for W and for KQ (corr > 0.999).
    """
    X = np.array(
        [
            [[0.61, -0.79], [0.21, -0.98], [-0.99, -0.15]],
            [[0.17, 0.99], [0.83, 0.55], [0.74, 0.68]],
        ]
    )
    Y = np.array([1.0, -1.0])
    Z = np.array([[1.00, -0.02], [0.57, 0.82]])
    v = np.array([1.0, 0.0])
    return X, Y, Z, v


def make_init(cell: Cell) -> dict[str, np.ndarray]:
    """Seeded initialization (docs/science.md §3).

    Returns ``{"W": (d, d)}`` for ``param="W"`` or ``{"K": (d, m), "Q": (d, m)}`` for KQ.
    uniform: entries ``U(-1/sqrt(d), 1/sqrt(d))``; zero: W = 0, or Q = 0 and K = 0.1 N(0, 1);
    kaiming_q0 (KQ, §15): K of entries ``U(-1/sqrt(d), 1/sqrt(d))`` (PyTorch's
    ``kaiming_uniform_(W, a=sqrt(5))`` of a d x d matrix: gain ``sqrt(2 / (1 + 5))`` times
    ``sqrt(3 / fan_in)``, fan_in = d) and Q = 0: Sakamoto & Sato's W and p = 0.
    """
    rng = seeded_rng(cell.seed, _INIT_STREAM)
    d, m = cell.d, cell.inner_dim
    b = 1.0 / np.sqrt(d)
    if cell.param == "W":
        W = np.zeros((d, d)) if cell.init == "zero" else rng.uniform(-b, b, (d, d))
        return {"W": W}
    if cell.init == "zero":
        return {"K": 0.1 * rng.standard_normal((d, m)), "Q": np.zeros((d, m))}
    if cell.init == "kaiming_q0":
        return {"K": rng.uniform(-b, b, (d, m)), "Q": np.zeros((d, m))}
    return {"K": rng.uniform(-b, b, (d, m)), "Q": rng.uniform(-b, b, (d, m))}


def head_inits(init: dict[str, np.ndarray], seed: int, heads: int, scheme: str) -> dict:
    """Initializations of H attention heads from head 1's ``init`` (docs/science.md §12).

    Head 1 is ``init`` itself; heads 2..H are drawn like it (same scheme and scale, §3) from a
    generator seeded by ``(seed, HEAD_INIT_STREAM, h)``. Returns the same keys with a head
    axis in front of the matrices' axes: ``W (H, d, d)`` or ``K, Q (H, d, m)``.
    """
    out = {k: [np.asarray(v, dtype=np.float64)] for k, v in init.items()}
    for h in range(1, heads):
        rng = np.random.default_rng([seed, HEAD_INIT_STREAM, h])
        for k, v in init.items():
            b = 1.0 / np.sqrt(v.shape[0])
            if scheme == "zero":
                new = 0.1 * rng.standard_normal(v.shape) if k == "K" else np.zeros(v.shape)
            else:
                new = rng.uniform(-b, b, v.shape)
            out[k].append(new)
    return {k: np.stack(v) for k, v in out.items()}


def path_radii(settings: Any) -> np.ndarray:
    """The radii of a regularization path (docs/science.md §4), one "checkpoint" each:
    ``checkpoint_count`` of them, geometric from ``radius_min`` to ``radius_max`` (the cell's
    ``train`` settings)."""
    count = max(int(settings.checkpoint_count), 1)
    return np.geomspace(settings.radius_min, settings.radius_max, count)


def token_scores(ds: Dataset) -> np.ndarray:
    """``gamma_it = Y_i v^T x_it`` (docs/science.md §4), shape (n, T)."""
    return ds.Y[:, None] * (ds.X @ ds.v)


def optimal_tokens(ds: Dataset) -> np.ndarray:
    """``opt_i = argmax_t gamma_it`` (docs/science.md §4), shape (n,)."""
    return np.argmax(token_scores(ds), axis=1)


def stack_cells(cells: Sequence[Cell]) -> dict:
    """Data and initialization of cells sharing a shape key, stacked on a leading seed axis."""
    if not cells:
        raise ValueError("stack_cells needs at least one cell")
    key = cells[0].shape_key()
    for c in cells[1:]:
        if c.shape_key() != key:
            raise ValueError(
                f"cells must share Cell.shape_key() to train as one batch; seed {c.seed} differs"
            )
    return stack_batch([make_dataset(c) for c in cells], [make_init(c) for c in cells])


def stack_seeds(items: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of every seed's ``items`` (the same names), stacked on a leading seed axis."""
    return {k: np.stack([item[k] for item in items]) for k in items[0]}


def stack_batch(datasets: Sequence, inits: Sequence[dict[str, np.ndarray]]) -> dict:
    """Datasets and initializations stacked on a leading seed axis (keys of train_batch)."""
    out = stack_seeds([{k: getattr(ds, k) for k in ("X", "Y", "Z", "v")} for ds in datasets])
    out["V"] = None if datasets[0].V is None else np.stack([ds.V for ds in datasets])
    return {**out, "init": stack_seeds(inits)}
