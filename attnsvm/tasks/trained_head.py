"""The trained head: the linear head v trained jointly with W or (K, Q) (docs/science.md §11).

Training is the descent loop on :class:`attnsvm.gd.model.TrainedHead` (per-block normalized
GD on the attention weights and v); the SVMs and metrics are the paper's task's, with the final v in
the token scores, plus the max-margin head of the attended tokens
(:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from attnsvm.config.cell import Cell
from attnsvm.tasks import Task
from attnsvm.tasks.measure import stored_scalars, stored_svms
from attnsvm.tasks.trajectory import run_group


def _selects(cell: Cell) -> bool:
    return cell.task == "train" and cell.train_head


TASK = Task(
    name="trained_head",
    selects=_selects,
    run_group=lambda cells, device, cache, progress: run_group(
        cells, device, cache, progress, "trained_head"
    ),
    svms=stored_svms,
    doc="the linear head v trained jointly with the attention (docs/science.md 11)",
    scalars=stored_scalars,
)
