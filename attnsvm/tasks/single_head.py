"""The paper's task: one attention head trained by GD with a fixed head (docs/science.md §1-6).

Normalized (or plain, or another optimizer's, §10) gradient descent on W or (K, Q) for the
fixed linear, relu or lambda head, then the Att-SVMs of GD's selection and of the optimal
tokens and every metric of §5 (:mod:`attnsvm.tasks.measure`); with ``train: false`` only the
SVMs of the optimal tokens (E3). Experiments E1-E6 are this task.
"""

from __future__ import annotations

from attnsvm.tasks.trajectory import head_task

TASK = head_task(
    "single_head",
    lambda cell: cell.task == "train" and cell.heads == 1 and not cell.train_head,
    "one attention head, fixed head, GD or SVMs only (docs/science.md 1-6, 10)",
)
