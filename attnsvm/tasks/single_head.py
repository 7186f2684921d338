"""The paper's task: one attention head trained by GD with a fixed head (docs/science.md §1-6).

Normalized (or plain, or another optimizer's, §10) gradient descent on W or (K, Q) for the
fixed linear, relu or lambda head, then the Att-SVMs of GD's selection and of the optimal
tokens and every metric of §5 (:mod:`attnsvm.tasks.measure`); with ``train: false`` only the
SVMs of the optimal tokens (E3). Experiments E1-E6 are this task.
"""

from __future__ import annotations

from attnsvm.config.cell import Cell
from attnsvm.tasks import Task
from attnsvm.tasks.measure import stored_scalars, stored_svms
from attnsvm.tasks.trajectory import run_group


def _selects(cell: Cell) -> bool:
    return cell.task == "train" and cell.heads == 1 and not cell.train_head


TASK = Task(
    name="single_head",
    selects=_selects,
    run_group=lambda cells, device, cache, progress: run_group(
        cells, device, cache, progress, "single_head"
    ),
    svms=stored_svms,
    doc="one attention head, fixed head, GD or SVMs only (docs/science.md 1-6, 10)",
    scalars=stored_scalars,
)
