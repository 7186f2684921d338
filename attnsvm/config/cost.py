"""Predicted memory and CPU time of a cell, from its sizes alone (planning estimates).

The workflow refuses a block predicted not to fit in ``mem_mb``, packs cheap grid points into
one job (``block_seconds``) and requests job runtimes from these predictions; ``attnsvm
run-cell`` refuses a cell predicted not to fit in the machine's memory. They are models, not
measurements: ``bench/fit_cost_model.py`` refits the constants to measured block timings.
"""

from __future__ import annotations

import os

from attnsvm.config.cell import Cell
from attnsvm.config.errors import CellError


def _constraint_rows(c: Cell) -> int:
    """Rows of the largest SVM constraint system of a cell (docs/science.md §4)."""
    if c.attention in ("sequence", "causal"):
        return c.n * c.T * (c.T - 1)  # one query per token
    return c.n * (c.T - 1)


def predicted_bytes(c: Cell, batch: int = 1) -> int:
    """Predicted peak memory (bytes) of training ``batch`` seeds of ``c`` and solving its SVMs.

    An order-of-magnitude model from the sizes alone (docs/science.md §1-4), used to refuse
    absurd cells before anything is allocated: training holds per seed the data ``(n, T, d)``,
    a few copies of the parameters (``d x d`` for W, ``2 d x m`` for KQ) and the checkpointed
    trajectory ``(C, d, d)`` plus softmax ``(C, n, T)``; the SVM solvers build dense constraint
    matrices of ``rows x d^2`` (rows = n (T - 1), or n T (T - 1) for sequence attention).
    """
    d, n, T = c.d, c.n, c.T
    floats = 4 * n * T * d * batch  # data, labels, scores, softmax of the current step
    if c.train:
        params = (d * d if c.param == "W" else 2 * d * c.inner_dim + d * d) * c.heads
        n_ckpt = min(c.checkpoint_count, c.iterations) + 1
        if c.task == "regpath":
            n_ckpt = c.checkpoint_count + 1
        floats += batch * (6 * params + n_ckpt * (d * d + n * T))
    floats += 3 * _constraint_rows(c) * d * d + 10 * d * d
    return 8 * floats


#: Constants of the cost model (seconds on one CPU core), least-squares fitted to the per-stage
#: timings that block stores record (``bench/fit_cost_model.py`` refits them from any runs and
#: prints how far each experiment's prediction is from its measured time).
STEP_SECONDS = 6.2e-4
"""One GD step of one grid point (Python and kernel overhead, shared by its batched seeds)."""
PATH_STEP_SECONDS = 4.1e-3
"""One projected step of a regularization path (docs/science.md §3), per grid point."""
FLOP_SECONDS = 7.4e-10
"""One multiply-add of a step: ``n T d x inner`` of them per seed and step."""
CELL_SECONDS = 1.1e-2
"""Per cell, whatever its size: SVM set-up, metrics, bookkeeping."""
SOLVE_SECONDS = 1.0e-6
"""Per unit of :func:`svm_size`: the convex SVM solves of one cell."""
LOWRANK_SECONDS = 2.5e-3
"""Per unit of :func:`svm_size`: the rank-constrained SVM of a KQ cell with m < d (restarts)."""


def train_steps(c: Cell) -> int:
    """GD steps of a cell: ``iterations``, per radius for a regularization path."""
    if not c.train:
        return 0
    return c.iterations * (c.checkpoint_count if c.task == "regpath" else 1)


def svm_size(c: Cell) -> float:
    """``(n T)^1.5 d``: how the cost of a cell's SVM solves grows with its sizes."""
    return (c.n * c.T) ** 1.5 * c.d


def solves_low_rank(c: Cell) -> bool:
    """Whether the cell solves the rank-constrained SVM (KQ with m < d; docs/science.md §4)."""
    return c.param == "KQ" and c.inner_dim < c.d


def predicted_seconds(c: Cell, batch: int = 1) -> float:
    """Predicted CPU seconds per cell when ``batch`` seeds train together (a planning estimate).

    Training costs a per-step overhead shared by the batch plus ``n T d x inner`` multiply-adds
    per seed and step (inner = d for W, m for KQ); the SVM solves grow with :func:`svm_size`.
    The constants above are fitted to measured block timings; the estimate sizes block packing
    (``block_seconds``), job runtimes and ``attnsvm status``'s remaining time.
    """
    steps = train_steps(c)
    inner = c.d if c.param == "W" else c.inner_dim
    step = PATH_STEP_SECONDS if c.task == "regpath" else STEP_SECONDS
    flops = c.n * c.T * c.d * inner * c.heads
    train = steps * (step / max(batch, 1) + FLOP_SECONDS * flops)
    solve = SOLVE_SECONDS + LOWRANK_SECONDS * solves_low_rank(c)
    return train + CELL_SECONDS + solve * svm_size(c)


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


#: ``attnsvm run-cell`` warns above this predicted run time (seconds)
RUN_CELL_WARN_SECONDS = 600.0


def check_run_cost(c: Cell, memory_bytes: int | None = None) -> str | None:
    """Refuse a cell predicted not to fit in memory; a warning if it is predicted to be slow.

    ``memory_bytes``: the memory available (default: this machine's physical memory). Raises
    :class:`CellError` naming the sizes; returns a warning text above RUN_CELL_WARN_SECONDS.
    """
    need = predicted_bytes(c)
    have = machine_memory_bytes() if memory_bytes is None else memory_bytes
    if have is not None and need > have:
        raise CellError(
            f"d={c.d}, n={c.n}, T={c.T} (checkpoint_count={c.checkpoint_count}) is predicted to "
            f"need {format_bytes(need)} of memory, more than this machine's {format_bytes(have)}"
        )
    secs = predicted_seconds(c)
    if secs > RUN_CELL_WARN_SECONDS:
        return (
            f"iterations={c.iterations}, d={c.d}, n={c.n}, T={c.T}: predicted to take about "
            f"{secs / 60:.0f} minutes (Ctrl-C stops it)"
        )
    return None


def format_cpu_time(seconds: float) -> str:
    """``2.6 CPU-s``, ``4.1 CPU-min``, ``3.2 CPU-h``: a predicted CPU time in a unit that
    reads (not ``~0.0007 CPU-hours``)."""
    if seconds < 60:
        return f"{seconds:.2g} CPU-s"
    if seconds < 3600:
        return f"{seconds / 60:.2g} CPU-min"
    return f"{seconds / 3600:.3g} CPU-h"


def format_bytes(n: float) -> str:
    """``745.1 GiB``: a byte count for messages."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
