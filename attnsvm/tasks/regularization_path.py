"""The regularization path: norm-constrained minimizers along a grid of radii (docs/science.md
§4, "Regularization path").

Instead of GD, :func:`attnsvm.gd.train.train_path` follows ``W_R = argmin_{||W|| <= R}
L(W)`` (or the (K, Q) ball) over ``checkpoint_count`` radii from ``radius_min`` to
``radius_max``; each radius is one "checkpoint" of the stored trajectory (``curve_radius``),
and the SVMs and metrics are the paper's task's (:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from attnsvm.config.cell import Cell
from attnsvm.tasks import Task
from attnsvm.tasks.measure import stored_scalars, stored_svms
from attnsvm.tasks.trajectory import run_group


def _selects(cell: Cell) -> bool:
    return cell.task == "regpath"


TASK = Task(
    name="regularization_path",
    selects=_selects,
    run_group=lambda cells, device, cache, progress: run_group(
        cells, device, cache, progress, "path"
    ),
    svms=stored_svms,
    doc="norm-constrained minimizers along a radius grid (docs/science.md 4)",
    scalars=stored_scalars,
)
