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
import functools
import logging
import time
import traceback
from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import (
    make_dataset,
    make_init,
    make_test_dataset,
    path_radii,
    stack_batch,
)
from attnsvm.logs import progress_bar
from attnsvm.svm import sequence as SEQ
from attnsvm.tasks import Task
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.measure import optimal_selection, solve_group, stored_scalars, stored_svms
from attnsvm.tasks.result import CellResult, blank_result

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
    data, one batched training run, then SVMs and metrics per cell.

    A trained head (docs/science.md §11) replaces the data's v by its final v, so token
    scores, opt and the convergence type are those of the head GD ends with.
    """
    c0 = cells[0]
    t_data = time.perf_counter()
    datasets = [make_dataset(c) for c in cells]
    masks: list[np.ndarray | None] = [None] * len(cells)
    if c0.attention in SEQ.SEQUENCE_ATTENTIONS:  # n T (example, query) pairs, docs/science.md §4
        pairs = [SEQ.expand(ds, c0.attention == "causal") for ds in datasets]
        datasets, masks = [p[0] for p in pairs], [p[1] for p in pairs]
    log.info("stage data: %d dataset(s) in %.3f s", len(cells), time.perf_counter() - t_data)
    radii = path_radii(c0.settings("train")) if kind == "path" and c0.train else None
    tr, error = None, ""
    if c0.train:
        b = stack_batch(datasets, [make_init(c) for c in cells])
        arrays = {k: b[k] for k in ("X", "Y", "Z", "v", "V")}
        arrays["mask"] = None if masks[0] is None else np.stack(masks)
        tr, error = train_group(kind, cells, arrays, b["init"], device, progress)
    its = c0.checkpoints() if c0.train else []
    its = its if radii is None else np.arange(1, len(radii) + 1)  # one "checkpoint" per radius
    results = []
    for s, (cell, ds, mask) in enumerate(zip(cells, datasets, masks, strict=True)):
        head = None if tr is None or tr.v is None or not len(tr.v[s]) else tr.v[s]
        if head is not None:
            ds = dataclasses.replace(ds, v=head[-1].copy())
        res = blank_result(cell, ds, its, optimal_selection(ds, mask))
        res.mask, res.head = mask, head
        res.head_init = None if head is None else datasets[s].v
        record_training(res, tr, s, error)
        results.append(res)
    if c0.n_test > 0:  # the held-out sample, docs/science.md §15 (not for sequence attention)
        for res in results:
            res.test_data = make_test_dataset(res.cell, res.data)
    solve_group(results, c0, cache, device, progress, radii)
    return results


def record_training(res: CellResult, tr: Any, s: int, error: str = "") -> None:
    """Seed ``s`` of a group's training run (:func:`train_group`, None when it failed with
    ``error`` or did not run) into its result: the trajectory, the device, the training time
    per cell and the status of a seed that went non-finite (docs/science.md §3)."""
    res.timings["train"] = 0.0 if tr is None else tr.seconds / len(tr.finite)
    if error:
        res.status, res.message = "failed", f"training failed: {error}"
    if tr is None:
        return
    res.W, res.softmax, res.loss, res.wnorm = tr.W[s], tr.softmax[s], tr.loss[s], tr.wnorm[s]
    res.device = tr.device
    if not tr.finite[s]:
        res.status = "nonfinite"
        res.message = f"training went non-finite at iteration {int(tr.nonfinite_iteration[s])}"


def head_task(name: str, selects: Any, doc: str, kind: str | None = None) -> Task:
    """The :class:`~attnsvm.tasks.Task` of a model ``kind`` (default ``name``) trained by
    :func:`run_group` on the paper's data, with the SVMs and scalars of
    :mod:`attnsvm.tasks.measure`."""
    run = functools.partial(run_group, kind=name if kind is None else kind)
    return Task(name, selects, run, stored_svms, doc, stored_scalars)
