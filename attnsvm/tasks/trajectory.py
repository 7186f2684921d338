"""One shape group of single-head cells end to end: data, batched training, SVMs and metrics.

The tasks that train one attention head on the paper's data (the paper's training, the
trained head, the regularization path; :mod:`attnsvm.tasks`) differ only in how they train:
each gives :func:`run_group` a :class:`Trainer`. The data stage (docs/science.md §1; the
(example, query) pairs of sequence and causal attention, §4) and the SVMs and metrics
(:mod:`attnsvm.tasks.measure`) are the same. A failed training run fails the group's cells with
its traceback; it never stops the job.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.config.settings import Settings
from attnsvm.gd.data import Dataset, make_dataset, make_init, make_test_dataset
from attnsvm.logs import progress_bar
from attnsvm.svm import sequence as SEQ
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.measure import optimal_selection, solve_group
from attnsvm.tasks.result import CellResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trainer:
    """How a task trains a shape group (docs/science.md §3, §4 regularization path, §11).

    ``train(batch, settings, device, mask=..., progress=...)`` gets the group's stacked data
    and initializations (:func:`attnsvm.gd.train.stack_batch`) and the cells' ``train``
    settings, whole, and returns ``(TrainResult, v(k) (S, C, d) of a trained head or None)``.
    ``progress``: whether it reports its steps (a progress bar); ``radii(settings)``: a
    regularization path's radii, one "checkpoint" each.
    """

    train: Callable[..., tuple[Any, np.ndarray | None]]
    progress: bool = True
    radii: Callable[[Settings], np.ndarray] | None = None


def run_group(
    cells: list[Cell],
    device: str,
    cache: SolveCache,
    progress: bool,
    trainer: Trainer,
) -> list[CellResult]:
    """One shape group: its data, one batched training run, then SVMs and metrics per cell."""
    c0 = cells[0]
    t_data = time.perf_counter()
    datasets = [make_dataset(c) for c in cells]
    masks: list[np.ndarray | None] = [None] * len(cells)
    if c0.attention in SEQ.SEQUENCE_ATTENTIONS:  # n T (example, query) pairs, docs/science.md §4
        pairs = [SEQ.expand(ds, c0.attention == "causal") for ds in datasets]
        datasets, masks = [p[0] for p in pairs], [p[1] for p in pairs]
    log.info("stage data: %d dataset(s) in %.3f s", len(cells), time.perf_counter() - t_data)
    settings = c0.settings("train")
    radii = trainer.radii(settings) if trainer.radii is not None and c0.train else None
    run = GroupRun.untrained(cells, datasets, radii)
    if c0.train:
        run.train(cells, datasets, masks, device, progress, trainer)
    results = [
        run.result(s, cell, ds, masks[s])
        for s, (cell, ds) in enumerate(zip(cells, datasets, strict=True))
    ]
    if c0.n_test > 0:  # the held-out sample, docs/science.md §15 (not for sequence attention)
        for res in results:
            res.test_data = make_test_dataset(res.cell, res.data)
    solve_group(results, c0, cache, device, progress, run.radii)
    return results


@dataclass
class GroupRun:
    """The trajectories of a shape group (docs/science.md §3): zeros until trained."""

    iterations: np.ndarray  # (C,)
    W: np.ndarray  # (S, C, d, d)
    softmax: np.ndarray  # (S, C, n, T)
    loss: np.ndarray  # (S, C)
    wnorm: np.ndarray  # (S, C)
    finite: np.ndarray  # (S,)
    nonfinite_iteration: np.ndarray  # (S,)
    radii: np.ndarray | None = None  # regularization path: one "checkpoint" per radius
    device: str = "cpu"
    seconds: float = 0.0  # training seconds per cell
    error: str = ""  # traceback of a failed training run
    head: np.ndarray | None = None  # (S, C, d) v(k) of a trained head (train_head)

    @classmethod
    def untrained(
        cls, cells: list[Cell], datasets: list[Dataset], radii: np.ndarray | None = None
    ) -> GroupRun:
        c0 = cells[0]
        S, C = len(cells), len(c0.checkpoints()) if c0.train else 0
        n, T, d = datasets[0].n, c0.T, c0.d
        iters = np.asarray(c0.checkpoints() if c0.train else [], dtype=np.int64)
        if radii is not None:  # one "checkpoint" per radius (attnsvm.gd.regpath)
            C, iters = len(radii), np.arange(1, len(radii) + 1, dtype=np.int64)
        return cls(
            iters,
            np.zeros((S, C, d, d)),
            np.zeros((S, C, n, T)),
            np.zeros((S, C)),
            np.zeros((S, C)),
            np.ones(S, bool),
            -np.ones(S, np.int64),
            radii,
        )

    def train(self, cells, datasets, masks, device: str, progress: bool, trainer: Trainer) -> None:
        """Train the group as one batch of seeds (docs/science.md §3); a failure is kept in
        :attr:`error` and recorded per cell, never raised."""
        c0, S = cells[0], len(cells)
        mask = None if masks[0] is None else np.stack(masks)
        t_train = time.perf_counter()
        bar = progress_bar(
            progress and trainer.progress, c0.iterations, f"train {c0.param} (S={S})", "step"
        )
        try:
            from attnsvm.gd.train import stack_batch  # torch: only where a group trains

            b = stack_batch(datasets, [make_init(c) for c in cells])
            tr, self.head = trainer.train(
                b, c0.settings("train"), device, mask=mask,
                progress=None if bar is None else bar.update,
            )  # fmt: skip
            self.W, self.softmax, self.loss, self.wnorm = tr.W, tr.softmax, tr.loss, tr.wnorm
            self.finite, self.nonfinite_iteration = tr.finite, tr.nonfinite_iteration
            self.device, self.seconds = tr.device, tr.seconds / S
        except Exception:  # recorded per cell (result), never swallowed
            self.error = traceback.format_exc(limit=3)
        finally:
            if bar is not None:
                bar.close()
        log.info(
            "stage train: %d seed(s) x %d step(s) on %s in %.3f s (%d non-finite)%s",
            *(S, c0.iterations, self.device, time.perf_counter() - t_train),
            int((~self.finite).sum()),
            " FAILED" if self.error else "",
        )

    def result(self, s: int, cell: Cell, ds: Dataset, mask: np.ndarray | None) -> CellResult:
        """The result of seed ``s`` before its SVMs: trajectory, status, alpha = opt.

        A trained head (docs/science.md §11) replaces the data's v by its final v, so token
        scores, opt and the convergence type are those of the head GD ends with.
        """
        head_init = None
        if self.head is not None and len(self.head[s]):
            head_init, ds = ds.v, dataclasses.replace(ds, v=self.head[s, -1].copy())
        opt = optimal_selection(ds, mask)
        res = CellResult(
            cell=cell,
            status="ok",
            message="",
            data=ds,
            iterations=self.iterations,
            W=self.W[s],
            softmax=self.softmax[s],
            loss=self.loss[s],
            wnorm=self.wnorm[s],
            alpha=opt.copy(),
            opt=opt,
            device=self.device,
            mask=mask,
            head=None if head_init is None else self.head[s],
            head_init=head_init,
        )
        res.timings["train"] = self.seconds
        if self.error:
            res.status, res.message = "failed", f"training failed: {self.error}"
        elif not self.finite[s]:
            res.status = "nonfinite"
            res.message = (
                f"training went non-finite at iteration {int(self.nonfinite_iteration[s])}"
            )
        return res
