"""The regularization path: norm-constrained minimizers along a grid of radii (docs/science.md
§4, "Regularization path").

Instead of GD, :func:`attnsvm.gd.regpath.regpath_batch` follows ``W_R = argmin_{||W|| <= R}
L(W)`` (or the (K, Q) ball) over ``checkpoint_count`` radii from ``radius_min`` to
``radius_max``; each radius is one "checkpoint" of the stored trajectory (``curve_radius``),
and the SVMs and metrics are the paper's task's (:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.config.settings import Settings
from attnsvm.tasks import Task
from attnsvm.tasks.measure import stored_scalars, stored_svms
from attnsvm.tasks.trajectory import Trainer, run_group


def _radii(settings: Settings) -> np.ndarray:
    from attnsvm.gd.regpath import path_radii  # torch: only where a group trains

    return path_radii(settings)


def _train(batch: dict, settings: Any, device: str, **extra: Any) -> tuple[Any, None]:
    """The path of the group's seeds (no progress bar: one per radius would be noise)."""
    from attnsvm.gd.regpath import regpath_batch  # torch: only where a group trains

    extra.pop("progress", None)
    data = (batch["X"], batch["Y"], batch["Z"], batch["v"], batch["init"])
    tr, _ = regpath_batch(*data, settings, device=device, **extra)
    return tr, None


TRAINER = Trainer(_train, progress=False, radii=_radii)


def _selects(cell: Cell) -> bool:
    return cell.task == "regpath"


TASK = Task(
    name="regularization_path",
    selects=_selects,
    run_group=lambda cells, device, cache, progress: run_group(
        cells, device, cache, progress, TRAINER
    ),
    svms=stored_svms,
    doc="norm-constrained minimizers along a radius grid (docs/science.md 4)",
    scalars=stored_scalars,
)
