"""The per-cell pipeline: what a cell runs (data, training, SVMs, metrics), one module per task.

Every module of this package that declares ``TASK`` (a :class:`Task`) is one task: the
paper's single-head training (``single_head``), the trained head (``trained_head``), the
regularization path (``regularization_path``), multi-head attention (``multi_head``) and
next-token prediction (``next_token``). A cell runs the one task whose ``selects(cell)`` holds
(a test checks that exactly one does for every cell of the shipped configs). Adding a
mechanism is adding a module here (docs/extending.md); the other modules of the package are
what the tasks share (:mod:`~attnsvm.tasks.result`, :mod:`~attnsvm.tasks.cache`,
:mod:`~attnsvm.tasks.trajectory`, :mod:`~attnsvm.tasks.measure`,
:mod:`~attnsvm.tasks.metrics`).

:func:`run_cells` groups cells by :meth:`~attnsvm.config.cell.Cell.shape_key` and hands each
group to its task, which trains the group's seeds as one batch and measures every cell. A
failure inside one cell is recorded in that cell's result (status and message); it never
stops the other cells.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attnsvm.config.cell import Cell
from attnsvm.gd.threads import limited
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.result import CellResult, left_fused_loop

log = logging.getLogger(__name__)

#: ``run_group(cells, device, cache, progress) -> results``: a shape group's cells end to end
GroupRunner = Callable[[list[Cell], str, SolveCache, bool], list[CellResult]]


@dataclass(frozen=True)
class Task:
    """One task (declared as ``TASK`` by its module): which cells it runs and how.

    ``selects(cell)``: whether a cell is this task's; ``run_group``: a :data:`GroupRunner`;
    ``svms(cell)``: the names of the SVMs its cells store on the ``svm`` axis
    (``docs/store.md``); ``doc``: one line for the docs (docs/science.md section);
    ``scalars(cell)``: the per-cell scalars an ok cell stores, the variables a claim may name
    (docs/claims.md; ``tests/test_claims.py`` checks them against what a cell stores).
    """

    name: str
    selects: Callable[[Cell], bool]
    run_group: GroupRunner
    svms: Callable[[Cell], tuple[str, ...]]
    doc: str
    scalars: Callable[[Cell], tuple[str, ...]]


@functools.cache
def tasks() -> tuple[Task, ...]:
    """Every task of the package, in module name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        task = getattr(module, "TASK", None)
        if isinstance(task, Task):
            found.append(task)
    return tuple(found)


def task_for(cell: Cell) -> Task:
    """The task that runs ``cell`` (exactly one selects it)."""
    chosen = [t for t in tasks() if t.selects(cell)]
    if len(chosen) != 1:
        names = ", ".join(t.name for t in chosen) or "none"
        raise ValueError(f"cell {cell.to_dict()} is selected by {names}; exactly one task must")
    return chosen[0]


def group_by_shape(cells: Sequence[Cell]) -> list[list[int]]:
    """Indices of cells grouped by shape key (first-seen order): each group trains as a batch."""
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault(c.shape_key(), []).append(i)
    return list(groups.values())


def run_cells(
    cells: Sequence[Cell],
    device: str = "auto",
    progress: bool = False,
    threads: int | None = None,
) -> list[CellResult]:
    """Train every cell (batched by shape on ``device``), solve its SVMs, compute its metrics.

    Returns one :class:`CellResult` per input cell, in input order. An SVM is solved once per
    distinct constraint set among the cells (:class:`~attnsvm.tasks.cache.SolveCache`): the W
    and KQ runs of one seed share their data, and often their selected tokens. Each shape
    group logs its sizes and the wall time of its stages; ``progress`` shows bars on stderr
    (training steps, then cells solved). ``threads``: the cores every thread pool (BLAS,
    OpenMP, torch) may use, by default those the process was given
    (:func:`attnsvm.gd.threads.limited`).
    """
    if any(c.train for c in cells):
        import torch  # noqa: F401 - loaded before its thread pools are limited

    with limited(threads):
        return _run_cells(cells, device, progress)


def _run_cells(cells: Sequence[Cell], device: str, progress: bool) -> list[CellResult]:
    out: list[CellResult | None] = [None] * len(cells)
    cache = SolveCache()
    groups = group_by_shape(cells)
    for g, idx in enumerate(groups, 1):
        group = [cells[i] for i in idx]
        c0 = group[0]
        task = task_for(c0)
        log.info(
            "group %d/%d (%s): %d cell(s) seeds %s, n=%d T=%d d=%d param=%s head=%s "
            "attention=%s iterations=%d train=%s",
            *(g, len(groups), task.name, len(group), _seed_range(group), c0.n, c0.T, c0.d),
            *(c0.param, c0.head, c0.attention, c0.iterations if c0.train else 0, c0.train),
        )
        for i, res in zip(idx, task.run_group(group, device, cache, progress), strict=True):
            out[i] = res
    if cells:
        log.info("SVM cache: %d of the solves reused an identical constraint set", cache.hits)
    left = Counter(r.device for r in out if r is not None and left_fused_loop(r.device))
    if left:  # once per block: these cells train several times slower than they could
        log.warning(
            "%d of %d cell(s) trained in the torch loop, outside the fused loop: %s "
            "(a model's FUSED_FIELDS, docs/extending.md \"The fused loop\")",
            sum(left.values()), len(cells), "; ".join(f"{k}: {v}" for k, v in left.items()),
        )  # fmt: skip
    return out  # type: ignore[return-value]


def _seed_range(cells: Sequence[Cell]) -> str:
    seeds = [c.seed for c in cells]
    return str(seeds[0]) if len(seeds) == 1 else f"{min(seeds)}-{max(seeds)}"


__all__ = ["CellResult", "SolveCache", "Task", "group_by_shape", "run_cells", "task_for", "tasks"]
