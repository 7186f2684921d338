"""The trained head: the linear head v trained jointly with W or (K, Q) (docs/science.md §11).

Training is the descent loop on :class:`attnsvm.gd.model.TrainedHead` (per-block normalized
GD on the attention weights and v); the SVMs and metrics are the paper's task's, with the final v in
the token scores, plus the max-margin head of the attended tokens
(:mod:`attnsvm.tasks.measure`).
"""

from __future__ import annotations

from attnsvm.tasks.trajectory import head_task

TASK = head_task(
    "trained_head",
    lambda cell: cell.task == "train" and cell.train_head,
    "the linear head v trained jointly with the attention (docs/science.md 11)",
)
