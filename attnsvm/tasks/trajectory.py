"""One shape group of cells trained together: data, one run of the descent loop, results.

Every task trains a group through :func:`train_group`: the group's model (its ``kind``,
:data:`attnsvm.gd.train.KINDS`) from the stacked data, in one batched run of the one descent
loop (:mod:`attnsvm.gd.train`). The tasks that train one attention head on the paper's data
(the paper's training, the trained head, the regularization path) share the rest too
(:func:`run_group`): the data stage (docs/science.md §1; the (example, query) pairs of sequence
and causal attention, §4) and the SVMs and metrics (:mod:`attnsvm.tasks.measure`). A failed
training run fails the group's cells with its traceback; it never stops the job.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import (
    Dataset,
    make_dataset,
    make_init,
    make_test_dataset,
    path_radii,
    stack_batch,
)
from attnsvm.logs import progress_bar
from attnsvm.svm import sequence as SEQ
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.measure import optimal_selection, solve_group
from attnsvm.tasks.result import CellResult

log = logging.getLogger(__name__)


def train_group(
    kind: str, cells: list[Cell], arrays: dict[str, Any], init: dict[str, np.ndarray],
    device: str, progress: bool,
) -> tuple[Any, str]:  # fmt: skip
    """One batched training run of a shape group (docs/science.md §3): the model ``kind`` of
    the cells' ``train`` settings through the descent loop, from the stacked ``arrays`` and
    ``init`` (:func:`attnsvm.gd.train.train_arrays`). Returns ``(TrainResult, "")``, or
    ``(None, traceback)``: a failed run fails the group's cells, it never stops the job."""
    c0, S = cells[0], len(cells)
    t0 = time.perf_counter()
    label = f"train {c0.param} (S={S})"
    steps = progress_bar(progress and kind != "path", c0.iterations, label, "step")
    tr, error = None, ""
    try:
        from attnsvm.gd.train import train_arrays  # torch: only where a group trains

        tr = train_arrays(kind, arrays, init, c0.settings("train"), device=device,
                          progress=None if steps is None else steps.update,
                          seeds=[c.seed for c in cells])  # fmt: skip
    except Exception:  # recorded per cell (result), never swallowed
        error = traceback.format_exc(limit=3)
    finally:
        if steps is not None:
            steps.close()
    log.info(
        "stage train: %d seed(s) x %d step(s) of %s on %s in %.3f s (%d non-finite)%s",
        S, c0.iterations, kind, "-" if tr is None else tr.device, time.perf_counter() - t0,
        0 if tr is None else int((~tr.finite).sum()), " FAILED" if error else "",
    )  # fmt: skip
    return tr, error


def run_group(
    cells: list[Cell], device: str, cache: SolveCache, progress: bool, kind: str
) -> list[CellResult]:
    """One shape group of a task that trains one attention head on the paper's data (the
    model ``kind``: ``single_head``, ``trained_head`` or the regularization ``path``): its
    data, one batched training run, then SVMs and metrics per cell."""
    c0 = cells[0]
    t_data = time.perf_counter()
    datasets = [make_dataset(c) for c in cells]
    masks: list[np.ndarray | None] = [None] * len(cells)
    if c0.attention in SEQ.SEQUENCE_ATTENTIONS:  # n T (example, query) pairs, docs/science.md §4
        pairs = [SEQ.expand(ds, c0.attention == "causal") for ds in datasets]
        datasets, masks = [p[0] for p in pairs], [p[1] for p in pairs]
    log.info("stage data: %d dataset(s) in %.3f s", len(cells), time.perf_counter() - t_data)
    radii = path_radii(c0.settings("train")) if kind == "path" and c0.train else None
    run = GroupRun.untrained(cells, datasets, radii)
    if c0.train:
        b = stack_batch(datasets, [make_init(c) for c in cells])
        arrays = {k: b[k] for k in ("X", "Y", "Z", "v", "V")}
        arrays["mask"] = None if masks[0] is None else np.stack(masks)
        run.trained(*train_group(kind, cells, arrays, b["init"], device, progress), len(cells))
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
        if radii is not None:  # one "checkpoint" per radius (attnsvm.gd.train.train_path)
            C, iters = len(radii), np.arange(1, len(radii) + 1, dtype=np.int64)
        zeros = np.zeros((S, C))
        return cls(iters, np.zeros((S, C, d, d)), np.zeros((S, C, n, T)), zeros, zeros.copy(),
                   np.ones(S, bool), -np.ones(S, np.int64), radii)  # fmt: skip

    def trained(self, tr: Any, error: str, S: int) -> None:
        """The group's training run (:func:`train_group`), or its failure (``error``)."""
        self.error = error
        if tr is not None:
            self.W, self.softmax, self.loss, self.wnorm = tr.W, tr.softmax, tr.loss, tr.wnorm
            self.finite, self.nonfinite_iteration = tr.finite, tr.nonfinite_iteration
            self.device, self.seconds, self.head = tr.device, tr.seconds / S, tr.v

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
            cell=cell, status="ok", message="", data=ds, iterations=self.iterations,
            W=self.W[s], softmax=self.softmax[s], loss=self.loss[s], wnorm=self.wnorm[s],
            alpha=opt.copy(), opt=opt, device=self.device, mask=mask,
            head=None if head_init is None else self.head[s], head_init=head_init,
        )  # fmt: skip
        res.timings["train"] = self.seconds
        if self.error:
            res.status, res.message = "failed", f"training failed: {self.error}"
        elif not self.finite[s]:
            res.status, res.message = "nonfinite", nonfinite_message(self.nonfinite_iteration[s])
        return res


def nonfinite_message(iteration: int) -> str:
    """The message of a cell whose training went non-finite at ``iteration``."""
    return f"training went non-finite at iteration {int(iteration)}"
