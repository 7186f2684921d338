"""The trained head: the linear head v trained jointly with W or (K, Q) (docs/science.md §11).

Training is :func:`attnsvm.gd.train.train_joint_batch` (per-block normalized GD on the
attention weights and v); the SVMs and metrics are the paper's task's, with the final v in
the token scores, plus the max-margin head of the attended tokens
(:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.tasks import Task
from attnsvm.tasks.measure import stored_scalars, stored_svms
from attnsvm.tasks.trajectory import Trainer, run_group


def _train(batch: dict, settings: Any, device: str, **extra: Any) -> tuple[Any, np.ndarray]:
    """(W or KQ, v) jointly on the group's seeds, docs/science.md §11."""
    from attnsvm.gd.train import train_joint_batch  # torch: only where a group trains

    data = (batch["X"], batch["Y"], batch["Z"], batch["v"], batch["init"])
    res = train_joint_batch(*data, settings, device=device, **extra)
    return res, res.v


TRAINER = Trainer(_train)


def _selects(cell: Cell) -> bool:
    return cell.task == "train" and cell.train_head


TASK = Task(
    name="trained_head",
    selects=_selects,
    run_group=lambda cells, device, cache, progress: run_group(
        cells, device, cache, progress, TRAINER
    ),
    svms=stored_svms,
    doc="the linear head v trained jointly with the attention (docs/science.md 11)",
    scalars=stored_scalars,
)
