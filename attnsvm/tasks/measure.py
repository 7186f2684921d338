"""The SVMs and metrics of a single-head trajectory (docs/science.md §4-5, §10-11).

Given a shape group's results with their trajectories (:mod:`attnsvm.tasks.trajectory`),
:func:`solve_group` solves, per cell, the Att-SVMs of GD's selection alpha and of the optimal
tokens (Frobenius and nuclear for the linear head, the Gen-SVM for the others), batched where
the group trains, and computes the metrics: correlations along the trajectory, ranks, margins,
support tokens, local optimality and the convergence types, the rank-m SVM (KQ with m < d),
the norm SVMs (``norm_svms``) and the trained head's (``train_head``). A failure inside one
cell is that cell's status and message; it never stops the other cells.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import Counter

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd import weight_decay as WD
from attnsvm.gd.data import Dataset, optimal_tokens, token_scores
from attnsvm.logs import progress_bar
from attnsvm.svm import (
    SVMResult,
    gen_svm,
    is_locally_optimal,
    solve_frobenius,
    solve_nuclear,
    support_tokens,
)
from attnsvm.svm import norms as N
from attnsvm.svm import sequence as SEQ
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.head import head_svm
from attnsvm.svm.lowrank import solve_rank_constrained
from attnsvm.tasks import generalization as G
from attnsvm.tasks import metrics as M
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.result import CellResult

log = logging.getLogger(__name__)

#: the SVMs of a linear-head cell, on the store's ``svm`` axis (docs/store.md)
LINEAR_SVMS = ("fro_alpha", "nuc_alpha", "fro_opt", "nuc_opt")
#: the SVMs of a cell with a nonlinear head (the Gen-SVM parts are stored apart)
GENERAL_SVMS = ("fro_alpha", "fro_opt")
GEN_CURVES = ("corr_svmeq", "corr_mm_gen", "corr_single")


def stored_svms(cell: Cell) -> tuple[str, ...]:
    """The SVMs a single-head cell stores on the ``svm`` axis."""
    return LINEAR_SVMS if cell.head == "linear" else GENERAL_SVMS


_SVM_SCALARS = ("rank", "erank", "objective", "feasible")
_TRAINED = ("rank_gd", "erank_gd", "softmax_mass", "wnorm", "loss", "saturated")
_LINEAR = ("locally_optimal", "corr_matching", "corr_converged")
_LOW_RANK = (
    "objective_lowrank_alpha", "lowrank_gap", "lowrank_certified", "lowrank_agree",
    "rank_lowrank_alpha", "corr_lowrank_alpha",
)  # fmt: skip
_HEAD = ("v_margin", "corr_v", "vmm_feasible", "vmm_margin", "vnorm", "alpha_is_opt_init")
_GENERAL = (
    "corr_svmeq", "corr_mm_gen", "corr_single", "max_masked_prob", "n_relevant", "ambiguous",
    "status_mm_gen_feasible",
)  # fmt: skip


def stored_scalars(cell: Cell) -> tuple[str, ...]:
    """The per-cell scalars an ok single-head cell stores (:func:`solve_group`): what a claim
    may name (docs/claims.md). ``tests/test_claims.py`` runs a cell of every branch and
    checks that this is exactly what it stores."""
    svms = stored_svms(cell)
    out = ["alpha_is_opt", *(f"{p}_{k}" for k in svms for p in _SVM_SCALARS)]
    out += ["svm_margin", "support_share", "all_support"]
    if not cell.train:
        return tuple(out)
    out += [*_TRAINED, *(f"corr_{k}" for k in svms)]
    if cell.head != "linear":
        return (*out, *_GENERAL)
    out += _LINEAR
    if cell.param == "KQ" and cell.m is not None and cell.m < cell.d:
        out += _LOW_RANK
    if cell.train_head:
        out += _HEAD
    if cell.task == "train":
        out += M.rate_scalars()
    if WD.measured(cell):
        out += WD.SCALARS
    if cell.n_test > 0:
        out += (*G.SCALARS, *G.BASELINE_SCALARS)
        if cell.generator == "weakly_relevant":
            out += G.OVERFIT_SCALARS
        if cell.generator == "magen":
            out += G.MINNORM_SCALARS
    if cell.norm_svms:
        out += [f"{p}_{k}_alpha" for k in N.NORMS for p in _SVM_SCALARS]
        out += [f"corr_{k}_alpha" for k in N.NORMS if k not in N.WIDE_FACE]
        out += [f"mratio_{k}_alpha" for k in ("fro", "nuc", *N.NORMS)]
    return tuple(out)


def solve_group(
    results: list[CellResult],
    c0: Cell,
    cache: SolveCache,
    device: str,
    progress: bool,
    radii: np.ndarray | None,
) -> None:
    """SVMs and metrics of every cell of a group (docs/science.md §4-5); a failure is that
    cell's status and message."""
    t_solve = time.perf_counter()
    presolve = _presolve(results, c0, cache, device)
    bar = progress_bar(progress, len(results), "SVMs + metrics", "cell")
    for res in results:
        try:
            _solve_and_measure(res, trained=c0.train and res.status == "ok", cache=cache)
            res.timings["solve"] += presolve
            if radii is not None:
                res.curves["radius"] = radii.copy()
        except Exception:
            res.status = "failed"
            res.message = (res.message + "\n" if res.message else "") + traceback.format_exc(
                limit=5
            )
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    log.info(
        "stage solve+metrics: %d cell(s) in %.3f s (SVMs %.3f s, metrics %.3f s); status %s",
        *(len(results), time.perf_counter() - t_solve),
        sum(r.timings.get("solve", 0.0) for r in results),
        sum(r.timings.get("metrics", 0.0) for r in results),
        ", ".join(f"{k} {v}" for k, v in Counter(r.status for r in results).items()),
    )


def _presolve(results: list[CellResult], c0: Cell, cache: SolveCache, device: str) -> float:
    """Solve the Att-SVMs of a whole group before the per-cell loop (docs/science.md §4): the
    Frobenius ones, of a trained group together on its device where the route table says
    (:func:`attnsvm.svm.frobenius_batched.solve_many`; torch is loaded there already, so
    SVM-only groups such as E3 keep their torch-free start-up), then the nuclear ones of the
    linear-head cells together (:meth:`SolveCache.solve_nuclear_many`: the same answers, bit
    for bit, with the interior-point methods run in batches). Fills ``cache`` for
    :func:`_solve_and_measure`, which records the error of a cell whose rows or SVMs fail
    here; a batched solve that fails leaves its SVMs to the per-cell loop (a warning says
    so). Returns the seconds per cell."""
    t0, route = time.perf_counter(), c0.svm_route
    conss, linear = [], []  # distinct rows, and whether the nuclear SVM of each is solved too
    for res in results:
        try:
            cons = _svm_constraints(res, c0.train and res.status == "ok")
        except Exception:  # noqa: BLE001 - recorded per cell by _solve_and_measure
            continue
        distinct = list({id(c): c for c in cons.values()}.values())
        conss += distinct
        linear += [res.cell.head == "linear"] * len(distinct)
    if c0.train:
        try:
            from attnsvm.gd.device import resolve_device  # torch: trained groups only

            dev = resolve_device(device)
            cache.solve_frobenius_many(conss, "cpu" if dev.type != "cuda" else dev, route)
        except Exception as exc:  # noqa: BLE001 - the per-cell solves below still run
            log.warning("batched SVM solve failed (%r); solving per cell", exc)
    todo, hints = [], []
    for con, nuclear in zip(conss, linear, strict=True):
        try:
            hint = cache.solve(solve_frobenius, con, route)
        except Exception:  # noqa: BLE001 - recorded per cell by _solve_and_measure
            continue
        if nuclear:
            todo.append(con)
            hints.append(hint)
    try:
        cache.solve_nuclear_many(solve_nuclear, todo, hints, route)
    except Exception as exc:  # noqa: BLE001 - the per-cell solves still run
        log.warning("batched nuclear SVM solve failed (%r); solving per cell", exc)
    return (time.perf_counter() - t0) / max(1, len(results))


def _svm_constraints(res: CellResult, trained: bool) -> dict:
    """Att-SVM constraints of GD's selection alpha (set on ``res`` when trained) and of opt."""
    if trained:
        res.alpha = M.selected_tokens(res.softmax[-1])
    cons = {"alpha": _constraints(res.data, res.alpha, res.mask)}
    same = np.array_equal(res.alpha, res.opt)
    cons["opt"] = cons["alpha"] if same else _constraints(res.data, res.opt, res.mask)
    return cons


def optimal_selection(ds: Dataset, mask: np.ndarray | None) -> np.ndarray:
    """``opt_i = argmax_t gamma_it`` over the tokens an example (query) attends to."""
    if mask is None:
        return optimal_tokens(ds)
    return np.argmax(SEQ.masked_scores(token_scores(ds), mask), axis=1)


def _constraints(ds: Dataset, alpha: np.ndarray, mask: np.ndarray | None):
    if mask is None:
        return att_svm_constraints(ds.X, ds.Z, alpha)
    return SEQ.constraints(ds.X, ds.Z, alpha, mask)  # causal: masked tokens give no rows


def _solve_and_measure(res: CellResult, trained: bool, cache: SolveCache | None = None) -> None:
    """Fill ``res.svms``, ``res.gen``, scalars and curves (docs/science.md §4-5)."""
    cell, ds = res.cell, res.data
    cache = SolveCache() if cache is None else cache
    t0 = time.perf_counter()
    gamma = SEQ.masked_scores(token_scores(ds), res.mask)
    cons = _svm_constraints(res, trained)
    alpha_is_opt = bool(np.array_equal(res.alpha, res.opt))
    solvers = {"fro": solve_frobenius, "nuc": solve_nuclear}
    if cell.head != "linear":
        solvers = {"fro": solve_frobenius}  # single-token SVM; Gen-SVM below
    for sel, con in cons.items():
        for norm, solve in solvers.items():
            key = f"{norm}_{sel}"
            other = f"{norm}_alpha"
            # the nuclear SVM reads feasibility from the Frobenius answer of the same rows
            hints = {"frobenius": res.svms[f"fro_{sel}"]} if norm == "nuc" else {}
            res.svms[key] = (
                res.svms[other]
                if sel == "opt" and alpha_is_opt
                else cache.solve(solve, con, cell.svm_route, **hints)
            )
    res.timings["solve"] = time.perf_counter() - t0

    sc = res.scalars
    sc["alpha_is_opt"] = float(alpha_is_opt)
    measured: dict[int, dict] = {}  # one answer under two keys (opt = alpha): measured once
    for key, r in res.svms.items():
        vals = measured.setdefault(id(r), _svm_scalars(r, cell.rank_tol))
        sc.update({f"{prefix}_{key}": v for prefix, v in vals.items()})
    fro = res.svms["fro_alpha"]
    sc["svm_margin"] = 1.0 / fro.objective if fro.solved else np.nan
    if fro.solved:
        sv = support_tokens(cons["alpha"], fro.W, cell.support_tol)
        sc["support_share"] = float(sv.mean())
        sc["all_support"] = float(sv.all())
    else:
        sc["support_share"] = sc["all_support"] = np.nan
    if trained:
        _measure_trajectory(res, cons, gamma, alpha_is_opt)
        if cell.norm_svms:
            _norm_svms(res, cons["alpha"], cache)


def _measure_trajectory(res: CellResult, cons: dict, gamma: np.ndarray, alpha_is_opt: bool) -> None:
    """Curves and final scalars of a trained cell: correlations with every SVM, margins,
    rank, softmax mass and the convergence types (docs/science.md §5)."""
    cell, sc = res.cell, res.scalars
    t1 = time.perf_counter()
    Wk = res.W
    trajectory_scalars(res)
    for key, r in res.svms.items():
        res.curves[f"corr_{key}"] = M.corr_curve(Wk, _solution(r))
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = cons["alpha"].values(Wk) if len(Wk) else None  # (checkpoints, rows)
        res.curves["gd_margin"] = vals.min(axis=1) / res.wnorm
    W_gd = Wk[-1]
    sc["rank_gd"] = M.rank(W_gd, cell.rank_tol)
    sc["erank_gd"] = M.effective_rank(W_gd)
    saturated = M.is_saturated(res.softmax[-1], cell.saturation_tol)
    sc["saturated"] = float(saturated)
    for key in res.svms:
        sc[f"corr_{key}"] = float(res.curves[f"corr_{key}"][-1])

    if cell.head == "linear":
        norm = "fro" if cell.param == "W" else "nuc"
        matching = res.svms[f"{norm}_alpha"]
        local = matching.solved and is_locally_optimal(
            cons["alpha"], matching.W, gamma, res.alpha, cell.support_tol
        )
        record_convergence(res, alpha_is_opt, local, saturated, sc[f"corr_{norm}_alpha"])
        if cell.param == "KQ" and cell.m is not None and cell.m < cell.d:
            _low_rank(res, cons["alpha"])
        if res.head is not None:
            _trained_head(res)
        if cell.task == "train":  # a trajectory in k (a regularization path's is in R)
            _rates(res)
        if WD.measured(cell):  # the regularized optimum (docs/science.md §4, weight decay)
            res.scalars.update(WD.regularized_residuals(res.data, W_gd, cell.settings("train")))
        if res.test_data is not None:
            _generalization(res)
    else:
        _general_head(res, W_gd)
    res.timings["metrics"] = time.perf_counter() - t1


def trajectory_scalars(res: CellResult, mass: np.ndarray | None = None) -> None:
    """The curves softmax_mass (``mass``, default :func:`M.softmax_mass` of the softmax), loss
    and wnorm of a trained cell and their last values (docs/science.md §5)."""
    mass = M.softmax_mass(res.softmax) if mass is None else mass
    res.curves.update(softmax_mass=mass, loss=res.loss, wnorm=res.wnorm)
    res.scalars.update({k: float(res.curves[k][-1]) for k in ("softmax_mass", "wnorm", "loss")})


def record_convergence(
    res: CellResult, alpha_is_opt: bool, local: bool, saturated: bool, correlation: float
) -> None:
    """The convergence types of a trained cell (docs/science.md §5) from whether GD's
    selection is opt, is locally optimal (``local``), the softmax saturated, and the
    ``correlation`` of W with the SVM of its selection; with the scalars locally_optimal,
    corr_matching and corr_converged."""
    cell, sc = res.cell, res.scalars
    sc["locally_optimal"], sc["corr_matching"] = float(local), correlation
    sc["corr_converged"] = float(M.corr_converged(correlation, cell.corr_threshold))
    res.convergence = M.selection_type(alpha_is_opt=alpha_is_opt, locally_optimal=local)
    res.convergence_strict = M.convergence_type(
        saturated=saturated, alpha_is_opt=alpha_is_opt, locally_optimal=local,
        correlation=correlation, threshold=cell.corr_threshold,
    )  # fmt: skip


def _rates(res: CellResult) -> None:
    """Convergence rates over the tail of the trajectory (docs/science.md §14): the fitted
    exponents of 1 - corr(W(k), matching SVM(alpha)) and of the softmax mass outside alpha
    (the curve ``offmass``), with their intervals and the checkpoints used."""
    offmass = res.curves["offmass"] = M.offselection_mass(res.softmax, res.alpha)
    corr = res.curves["corr_fro_alpha" if res.cell.param == "W" else "corr_nuc_alpha"]
    res.scalars.update(M.trajectory_rates(res.iterations, corr, offmass))


def _generalization(res: CellResult) -> None:
    """Test loss and error along the trajectory, label noise fit, and the test errors of the
    SVM directions (docs/science.md §15; :mod:`attnsvm.tasks.generalization`)."""
    t0 = time.perf_counter()
    cell, fro, mm = res.cell, _solution(res.svms["fro_alpha"]), _solution(res.svms["fro_opt"])
    heads = res.head if cell.generator == "magen" else None  # v trained with W (§15)
    sc, curves = G.measure(res.W, res.data, res.test_data, fro, mm, res.iterations,
                           cell.settings("train"), overfit=cell.generator == "weakly_relevant",
                           heads=heads)  # fmt: skip
    res.scalars.update(sc)
    res.curves.update(curves)
    res.scalars.update(G.baselines(cell, res.data, res.test_data, mm))
    if cell.generator == "magen":
        res.scalars.update(G.minnorm(res.data, res.test_data, cell.settings("train")))
    res.timings["test"] = time.perf_counter() - t0


def _norm_svms(res: CellResult, cons, cache: SolveCache) -> None:
    """The max-entry, spectral and l_p Att-SVMs of alpha (docs/science.md §10): for each norm
    the usual SVM scalars and corr curve (not for the norms of ``N.WIDE_FACE``, whose
    correlation depends on which optimal solution the solver returns), and
    ``mratio_<norm>_alpha``, the margin of W_GD's direction in that norm relative to the
    SVM's (1: a max-margin direction, whichever of several solutions; the Frobenius and
    nuclear SVMs get theirs too)."""
    cell, sc = res.cell, res.scalars
    t0 = time.perf_counter()
    for norm in N.NORMS:
        r = res.svms[f"{norm}_alpha"] = cache.solve(N.svm_solver(norm), cons)
        sc.update({f"{p}_{norm}_alpha": v for p, v in _svm_scalars(r, cell.rank_tol).items()})
        if norm not in N.WIDE_FACE:
            curve = res.curves[f"corr_{norm}_alpha"] = M.corr_curve(res.W, _solution(r))
            sc[f"corr_{norm}_alpha"] = float(curve[-1])
    res.timings["solve_norms"] = time.perf_counter() - t0
    for key, norm in (("fro", "fro"), ("nuc", "nuc"), *((k, k) for k in N.NORMS)):
        opt = _objective(res.svms[f"{key}_alpha"])
        sc[f"mratio_{key}_alpha"] = N.margin_ratio(cons, res.W[-1], norm, opt)


def _svm_scalars(r: SVMResult, rank_tol: float) -> dict[str, float]:
    """:data:`_SVM_SCALARS` of one SVM answer. One without a certificate (optimal_inaccurate,
    solver_error) is not solved: no rank, no objective, and feasible NaN (issue 12)."""
    W = _solution(r)
    s = M.singular_values(W) if W is not None and np.all(np.isfinite(W)) else None
    vals = (M.rank(W, rank_tol, s), M.effective_rank(W, s), _objective(r), feasible_flag(r))
    return dict(zip(_SVM_SCALARS, vals, strict=True))


def _solution(r: SVMResult) -> np.ndarray | None:
    """W of a certified answer, else None."""
    return r.W if r.solved else None


def _objective(r: SVMResult) -> float:
    """The objective of a certified answer, else NaN."""
    return r.objective if r.solved else np.nan


def feasible_flag(r: SVMResult) -> float:
    """1 for a certified solution, 0 for a proven infeasible SVM, NaN when not solved."""
    if r.solved:
        return 1.0
    return 0.0 if r.status == "infeasible" else float("nan")


def _general_head(res: CellResult, W_gd: np.ndarray) -> None:
    """Gen-SVM metrics for nonlinear heads (docs/science.md §4 Gen-SVM, experiments E4/E5)."""
    cell, ds, sc = res.cell, res.data, res.scalars
    s_final = res.softmax[-1]
    t0 = time.perf_counter()
    g = gen_svm(ds.X, ds.Z, s_final, W_gd, cell.relevant_tol)
    res.timings["solve"] += time.perf_counter() - t0
    res.gen = g
    res.curves["corr_svmeq"] = M.corr_curve(res.W, g.svmeq)
    res.curves["corr_mm_gen"] = M.corr_curve(res.W, _solution(g.mm_gen))
    res.curves["corr_single"] = res.curves["corr_fro_alpha"]
    for key in GEN_CURVES:
        sc[key] = float(res.curves[key][-1])
    masked = np.where(g.relevant, 0.0, s_final)
    sc["max_masked_prob"] = float(masked.max())
    sc["n_relevant"] = float(g.relevant.sum(axis=1).mean())
    sc["ambiguous"] = float(np.any((s_final > 1e-6) & (s_final < cell.relevant_tol)))
    sc["status_mm_gen_feasible"] = feasible_flag(g.mm_gen)


def _low_rank(res: CellResult, cons) -> None:
    """Rank-constrained Att-SVM_* for KQ with m < d (attnsvm.svm.lowrank; docs/science.md §4).

    Scalars ``objective_lowrank_alpha`` (its nuclear norm), ``lowrank_gap`` (relative excess
    over the convex bound ``||W_mm_*||_*``), ``lowrank_certified`` (1: reaches the bound),
    ``lowrank_agree`` (restarts within 1e-4 of the best), ``rank_lowrank_alpha``,
    ``corr_lowrank_alpha`` and the curve ``corr_lowrank_alpha``.
    """
    cell, sc = res.cell, res.scalars
    t0 = time.perf_counter()
    nuc, fro = res.svms["nuc_alpha"], res.svms["fro_alpha"]
    lr = solve_rank_constrained(cons, cell.inner_dim, convex=nuc.W, frobenius=fro.W, seed=cell.seed)
    res.timings["solve_lowrank"] = time.perf_counter() - t0
    sc["objective_lowrank_alpha"] = lr.objective
    sc["lowrank_gap"] = lr.gap
    sc["lowrank_certified"] = float(lr.status == "certified") if lr.W is not None else np.nan
    sc["lowrank_agree"] = float(lr.agreeing)
    sc["rank_lowrank_alpha"] = M.rank(lr.W, cell.rank_tol)
    curve = res.curves["corr_lowrank_alpha"] = M.corr_curve(res.W, lr.W)
    sc["corr_lowrank_alpha"] = float(curve[-1])


def _trained_head(res: CellResult) -> None:
    """Metrics of a trained head (docs/science.md §11): corr of v(k) with the max-margin head
    ``v_mm`` of the finally attended tokens ``x_{i,alpha_i}`` (:func:`attnsvm.svm.head.head_svm`),
    its feasibility and margin, ``||v(k)||``, GD's head margin, and whether alpha is the
    optimal selection of the initial head.

    Scalars ``corr_v``, ``vmm_feasible``, ``vmm_margin``, ``v_margin``,
    ``vnorm``, ``alpha_is_opt_init``; curves ``corr_v`` and ``vnorm``.
    """
    ds, sc, V = res.data, res.scalars, res.head
    t0 = time.perf_counter()
    v_mm, svm = head_svm(ds.X, ds.Y, res.alpha)
    res.timings["solve_head"] = time.perf_counter() - t0
    vnorm = np.linalg.norm(V, axis=-1)
    res.curves["vnorm"] = vnorm
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = V @ v_mm / (vnorm * np.linalg.norm(v_mm)) if v_mm is not None else np.nan * vnorm
        attended = ds.X[np.arange(ds.n), res.alpha]
        sc["v_margin"] = float(np.min(ds.Y * (attended @ V[-1])) / vnorm[-1])
    res.curves["corr_v"] = corr
    sc["corr_v"] = float(corr[-1])
    sc["vmm_feasible"] = feasible_flag(svm)
    sc["vmm_margin"] = 1.0 / _objective(svm)
    sc["vnorm"] = float(vnorm[-1])
    init = Dataset(ds.X, ds.Y, ds.Z, res.head_init)
    sc["alpha_is_opt_init"] = float(np.array_equal(res.alpha, optimal_selection(init, res.mask)))
