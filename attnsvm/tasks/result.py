"""What one cell produced: its data, trajectory, SVM solutions, scalars, curves and timings.

A :class:`CellResult` is what every task returns per cell (:mod:`attnsvm.tasks`), and what the
block store records (:func:`attnsvm.sweep.store.results_to_dataset`; ``docs/store.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import Dataset
from attnsvm.svm import GenSVMResult, SVMResult


@dataclass(repr=False)
class CellResult:
    """Everything one cell produced: data, trajectory, SVM solutions, scalars, curves, timings.

    ``repr`` is one line (cell, status, selection, headline numbers);
    :func:`attnsvm.sweep.store.cell_dataset` gives the same self-describing Dataset as one
    cell of a block store (``docs/store.md``).
    """

    cell: Cell
    status: str
    message: str
    data: Dataset
    iterations: np.ndarray  # (C,)
    W: np.ndarray  # (C, d, d) checkpointed W(k) (K Q^T for KQ)
    softmax: np.ndarray  # (C, n, T)
    loss: np.ndarray  # (C,)
    wnorm: np.ndarray  # (C,)
    alpha: np.ndarray  # (n,) GD's selection at the last checkpoint (opt when untrained)
    opt: np.ndarray  # (n,)
    svms: dict[str, SVMResult] = field(default_factory=dict)
    gen: GenSVMResult | None = None
    scalars: dict[str, float] = field(default_factory=dict)
    convergence: str = ""  # codes.CONVERGENCE (by selection), "" when not applicable
    convergence_strict: str = ""  # codes.CONVERGENCE_STRICT, "" when not applicable
    curves: dict[str, np.ndarray] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"
    mask: np.ndarray | None = None  # (n, T) attention mask of causal attention, else None
    heads: dict[str, np.ndarray] = field(default_factory=dict)  # heads > 1: per-head values
    head: np.ndarray | None = None  # (C, d) v(k) of a trained head (train_head), else None
    head_init: np.ndarray | None = None  # (d,) the initial v of a trained head, else None
    test_data: Dataset | None = None  # the held-out sample (n_test > 0, docs/science.md 15)

    def __repr__(self) -> str:
        c, sc = self.cell, self.scalars
        shape = f"n={c.n} T={c.T} d={c.d} {c.head} {c.param} {c.attention} seed={c.seed}"
        parts = [shape, f"status={self.status!r}"]
        if self.convergence:
            parts.append(f"convergence={self.convergence!r}")
        for key in ("corr_matching", "corr_svmeq", "alpha_is_opt"):
            if key in sc and np.isfinite(sc[key]):
                parts.append(f"{key}={sc[key]:.4g}")
        parts.append(f"svms={len(self.svms)}, checkpoints={len(self.iterations)}")
        return f"CellResult({', '.join(parts)})"


#: what a cell's ``device`` says when fields outside its model's ``FUSED_FIELDS`` kept it in
#: the torch loop (attnsvm.gd.fused.describe_left_out)
LEFT_FUSED_LOOP = "not in the fused loop"


def left_fused_loop(device: str) -> bool:
    """Whether a cell of this ``device`` trained in the torch loop only because its model does
    not declare some of its fields for the fused loop (docs/extending.md)."""
    return LEFT_FUSED_LOOP in device


def blank_result(
    cell: Cell, data: Dataset, iterations: Sequence[int], opt: np.ndarray | None = None
) -> CellResult:
    """A result of ``cell`` on ``data`` before training: NaN trajectory at ``iterations``,
    ``alpha = opt`` (default 0), status ok (a task fills in what it computes)."""
    C, (n, T, d) = len(iterations), data.X.shape
    opt = np.zeros(n, np.int64) if opt is None else opt
    return CellResult(
        cell=cell, status="ok", message="", data=data,
        iterations=np.asarray(iterations, np.int64),
        W=np.full((C, d, d), np.nan), softmax=np.full((C, n, T), np.nan),
        loss=np.full(C, np.nan), wnorm=np.full(C, np.nan), alpha=opt.copy(), opt=opt,
    )  # fmt: skip
