"""One shape group of multi-head cells (``heads > 1``) end to end (docs/science.md §12): data,
per-head initializations, batched stacked-GD training, each head's Att-SVM of its own selection,
the stacked SVM and the convergence type of the combined model, as the sweep's CellResults.

Cells with ``heads = 1`` are the single-head cells of :mod:`attnsvm.tasks.single_head` (same
digest, same values) and never come here.
"""

from __future__ import annotations

import logging
import time
import traceback

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import (
    head_inits,
    make_dataset,
    make_init,
    optimal_tokens,
    stack_batch,
    token_scores,
)
from attnsvm.svm import is_locally_optimal, solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.tasks import Task
from attnsvm.tasks import metrics as M
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.measure import LINEAR_SVMS, record_convergence, trajectory_scalars
from attnsvm.tasks.result import CellResult, blank_result
from attnsvm.tasks.trajectory import record_training, train_group

log = logging.getLogger(__name__)

#: per-head variables of a multi-head cell and their dimensions after ``cell``
HEAD_DIMS: dict[str, tuple[str, ...]] = {
    "head_alpha": ("attention_head", "example"),
    "head_alpha_is_opt": ("attention_head",),
    "head_locally_optimal": ("attention_head",),
    "head_corr": ("attention_head",),
    "head_wnorm": ("attention_head",),
    "head_svm_objective": ("attention_head",),
    "head_W": ("attention_head", "row", "col"),
    "head_svm_W": ("attention_head", "row", "col"),
    "head_curve_corr": ("attention_head", "checkpoint"),
}


def stacked_corr(Wk: np.ndarray, svms: list[np.ndarray | None]) -> np.ndarray:
    """corr of the stacked heads ``(W_1(k), ..., W_H(k))`` with the stacked SVM
    ``(W_mm(alpha_1), ..., W_mm(alpha_H))`` per checkpoint (docs/science.md §12); NaN if a
    head's SVM is not solved. ``Wk`` (C, H, d, d)."""
    if any(s is None for s in svms):
        return np.full(len(Wk), np.nan)
    S = np.stack(svms)  # (H, d, d)
    num = np.einsum("chij,hij->c", Wk, S)
    den = np.linalg.norm(Wk.reshape(len(Wk), -1), axis=1) * np.linalg.norm(S)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def agreement(alphas: np.ndarray) -> float:
    """Share of examples on which every head selects the same token (``alphas`` (H, n))."""
    return float((alphas == alphas[:1]).all(axis=0).mean())


def run_multihead_group(
    cells: list[Cell], device: str = "auto", cache: SolveCache | None = None, progress=False
) -> list[CellResult]:
    """CellResults of a shape group of ``heads > 1`` cells (docs/science.md §12); a failed
    training fails the group's cells, a failure in one cell's metrics that cell only."""
    cache = SolveCache() if cache is None else cache
    c0 = cells[0]
    datasets = [make_dataset(c) for c in cells]
    inits = [head_inits(make_init(c), c.seed, c.heads, c.init) for c in cells]
    b = stack_batch(datasets, inits)
    arrays = {k: b[k] for k in ("X", "Y", "Z", "v")}
    tr, error = train_group("multi_head", cells, arrays, b["init"], device, progress)
    results = []
    for s, (cell, ds) in enumerate(zip(cells, datasets, strict=True)):
        res = blank_result(cell, ds, c0.checkpoints(), optimal_tokens(ds))
        record_training(res, tr, s, error)
        if tr is not None:
            try:
                _measure(res, tr, s, cache)
            except Exception:
                res.status = "failed"
                res.message = (res.message + "\n" + traceback.format_exc(limit=5)).strip()
        results.append(res)
    return results


def _per_head(res, Wk: np.ndarray, sk: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Each head's selection, its matching Att-SVM (Frobenius for W, nuclear for KQ) and
    corr(W_h(k), SVM(alpha_h)), and whether alpha_h is opt / locally optimal."""
    cell, ds = res.cell, res.data
    solve = solve_frobenius if cell.param == "W" else solve_nuclear
    gamma = token_scores(ds)
    out = {k: [] for k in HEAD_DIMS}
    for h in range(Wk.shape[1]):
        alpha = M.selected_tokens(sk[-1, h])
        cons = att_svm_constraints(ds.X, ds.Z, alpha)
        svm = cache.solve(solve, cons, cell.svm_route)
        W = svm.W if svm.solved else None
        curve = M.corr_curve(Wk[:, h], W)
        local = W is not None and is_locally_optimal(cons, W, gamma, alpha, cell.support_tol)
        out["head_alpha"].append(alpha)
        out["head_alpha_is_opt"].append(float(np.array_equal(alpha, res.opt)))
        out["head_locally_optimal"].append(float(local))
        out["head_corr"].append(curve[-1])
        out["head_wnorm"].append(np.linalg.norm(Wk[-1, h]))
        out["head_svm_objective"].append(np.nan if W is None else svm.objective)
        out["head_W"].append(Wk[-1, h])
        out["head_svm_W"].append(np.full((cell.d, cell.d), np.nan) if W is None else W)
        out["head_curve_corr"].append(curve)
    return {k: np.asarray(v) for k, v in out.items()}


#: the per-cell scalars of a multi-head cell (:func:`_measure`)
SCALARS = (
    "alpha_is_opt", "locally_optimal", "saturated", "corr_matching", "corr_converged",
    "softmax_mass", "loss", "wnorm", "head_corr_min", "head_corr_mean", "head_agreement",
    "head_global_share",
)  # fmt: skip


def _measure(res, tr, s: int, cache) -> None:
    """Trajectory, per-head SVMs and the combined model's metrics of seed ``s``."""
    cell, sc = res.cell, res.scalars
    t0 = time.perf_counter()
    Wk, sk = tr.W[s], tr.softmax[s]  # (C, H, d, d), (C, H, n, T)
    H = Wk.shape[1]
    res.W, res.softmax = Wk.sum(1) / H, sk.sum(1) / H  # mean head; the output's token weights
    res.alpha = M.selected_tokens(res.softmax[-1])
    heads = res.heads = _per_head(res, Wk, sk, cache)
    res.timings["solve"] = time.perf_counter() - t0
    solved = [w if np.isfinite(w).all() else None for w in heads["head_svm_W"]]
    res.curves["corr_matching"] = stacked_corr(Wk, solved)
    trajectory_scalars(res, np.stack([M.softmax_mass(sk[:, h]) for h in range(H)]).mean(0))
    all_opt = bool(heads["head_alpha_is_opt"].all())
    all_local = bool(heads["head_locally_optimal"].all())
    saturated = all(M.is_saturated(sk[-1, h], cell.saturation_tol) for h in range(H))
    sc.update(alpha_is_opt=float(all_opt), saturated=float(saturated))
    corr = float(res.curves["corr_matching"][-1])
    record_convergence(res, all_opt, all_local, saturated, corr)
    sc["head_corr_min"] = float(np.min(heads["head_corr"]))
    sc["head_corr_mean"] = float(np.mean(heads["head_corr"]))
    sc["head_agreement"] = agreement(heads["head_alpha"])
    sc["head_global_share"] = float(heads["head_alpha_is_opt"].mean())
    res.timings["metrics"] = time.perf_counter() - t0 - res.timings["solve"]


TASK = Task(
    name="multi_head",
    selects=lambda cell: cell.task == "train" and cell.heads > 1,
    run_group=run_multihead_group,
    svms=lambda cell: LINEAR_SVMS,
    doc="H attention heads averaged through the linear head (docs/science.md 12)",
    scalars=lambda cell: SCALARS,
)
