"""The regularization path: norm-constrained minimizers along a grid of radii (docs/science.md
§4, "Regularization path").

Instead of GD, :func:`attnsvm.gd.train.train_path` follows ``W_R = argmin_{||W|| <= R}
L(W)`` (or the (K, Q) ball) over ``checkpoint_count`` radii from ``radius_min`` to
``radius_max``; each radius is one "checkpoint" of the stored trajectory (``curve_radius``),
and the SVMs and metrics are the paper's task's (:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from attnsvm.tasks.trajectory import head_task

TASK = head_task(
    "regularization_path",
    lambda cell: cell.task == "regpath",
    "norm-constrained minimizers along a radius grid (docs/science.md 4)",
    kind="path",
)
