"""Run cells end to end: data -> batched training -> SVMs -> metrics (docs/science.md §1-5).

:func:`run_cells` groups cells by :meth:`Cell.shape_key`, trains each group as one batch of
seeds, solves a trained group's Frobenius SVMs together (batched from
:data:`attnsvm.svm.frobenius_batched.BATCH_MIN` distinct instances), then solves the other
SVMs and computes the metrics cell by cell. A failure inside one cell
is recorded in that cell's result (status and message); it never stops the other cells.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import Dataset, make_dataset, make_init, optimal_tokens, token_scores
from attnsvm.logs import progress_bar
from attnsvm.svm import (
    GenSVMResult,
    SVMResult,
    gen_svm,
    is_locally_optimal,
    solve_frobenius,
    solve_nuclear,
    support_tokens,
)
from attnsvm.svm import sequence as SEQ
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.sweep import metrics as M

log = logging.getLogger(__name__)

LINEAR_SVMS = ("fro_alpha", "nuc_alpha", "fro_opt", "nuc_opt")
GEN_CURVES = ("corr_svmeq", "corr_mm_gen", "corr_single")


@dataclass(repr=False)
class CellResult:
    """Everything one cell produced: data, trajectory, SVM solutions, scalars, curves, timings.

    ``repr`` is one line (cell, status, selection, headline numbers); :meth:`to_xarray` gives
    the same self-describing Dataset as one cell of a block store (``docs/store.md``).
    """

    cell: Cell
    status: str
    message: str
    data: Dataset
    iterations: np.ndarray  # (C,)
    W: np.ndarray  # (C, d, d) checkpointed W(k) (K Q^T for KQ)
    softmax: np.ndarray  # (C, n, T)
    loss: np.ndarray  # (C,)
    wnorm: np.ndarray  # (C,)
    alpha: np.ndarray  # (n,) GD's selection at the last checkpoint (opt when untrained)
    opt: np.ndarray  # (n,)
    svms: dict[str, SVMResult] = field(default_factory=dict)
    gen: GenSVMResult | None = None
    scalars: dict[str, float] = field(default_factory=dict)
    convergence: str = ""  # codes.CONVERGENCE (by selection), "" when not applicable
    convergence_strict: str = ""  # codes.CONVERGENCE_STRICT, "" when not applicable
    curves: dict[str, np.ndarray] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    device: str = "cpu"
    mask: np.ndarray | None = None  # (n, T) attention mask of causal attention, else None
    heads: dict[str, np.ndarray] = field(default_factory=dict)  # heads > 1: per-head values
    head: np.ndarray | None = None  # (C, d) v(k) of a trained head (train_head), else None
    head_init: np.ndarray | None = None  # (d,) the initial v of a trained head, else None

    def __repr__(self) -> str:
        c, sc = self.cell, self.scalars
        shape = f"n={c.n} T={c.T} d={c.d} {c.head} {c.param} {c.attention} seed={c.seed}"
        parts = [shape, f"status={self.status!r}"]
        if self.convergence:
            parts.append(f"convergence={self.convergence!r}")
        for key in ("corr_matching", "corr_svmeq", "alpha_is_opt"):
            if key in sc and np.isfinite(sc[key]):
                parts.append(f"{key}={sc[key]:.4g}")
        parts.append(f"svms={len(self.svms)}, checkpoints={len(self.iterations)}")
        return f"CellResult({', '.join(parts)})"

    def to_xarray(self):
        """This cell as an :class:`xarray.Dataset` with CF attributes (no ``cell`` dim)."""
        from attnsvm.sweep.store import results_to_dataset

        return results_to_dataset([self], {}).isel(cell=0)


def group_by_shape(cells: Sequence[Cell]) -> list[list[int]]:
    """Indices of cells grouped by shape key (first-seen order): each group trains as a batch."""
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault(c.shape_key(), []).append(i)
    return list(groups.values())


def run_cells(
    cells: Sequence[Cell], device: str = "auto", progress: bool = False
) -> list[CellResult]:
    """Train every cell (batched by shape on ``device``), solve its SVMs, compute its metrics.

    Returns one :class:`CellResult` per input cell, in input order. An SVM is solved once per
    distinct constraint set among the cells (:class:`SolveCache`): the W and KQ runs of one
    seed share their data, and often their selected tokens. Each shape group logs its sizes
    and the wall time of its stages (``attnsvm.sweep.compute`` logger); ``progress`` shows bars
    on stderr (training steps, then cells solved).
    """
    out: list[CellResult | None] = [None] * len(cells)
    cache = SolveCache()
    groups = group_by_shape(cells)
    for g, idx in enumerate(groups, 1):
        group = [cells[i] for i in idx]
        c0 = group[0]
        log.info(
            "group %d/%d: %d cell(s) seeds %s, n=%d T=%d d=%d param=%s head=%s attention=%s "
            "iterations=%d train=%s",
            *(g, len(groups), len(group), _seed_range(group), c0.n, c0.T, c0.d, c0.param),
            *(c0.head, c0.attention, c0.iterations if c0.train else 0, c0.train),
        )
        for i, res in zip(idx, _run_group(group, device, cache, progress), strict=True):
            out[i] = res
    if cells:
        log.info("SVM cache: %d of the solves reused an identical constraint set", cache.hits)
    return out  # type: ignore[return-value]


def _seed_range(cells: Sequence[Cell]) -> str:
    seeds = [c.seed for c in cells]
    return str(seeds[0]) if len(seeds) == 1 else f"{min(seeds)}-{max(seeds)}"


class SolveCache:
    """SVM solutions keyed by solver and the exact bytes of the constraint rows.

    Two cells with equal rows get the same :class:`SVMResult` object (solutions are never
    modified after solving), so the second costs a dictionary lookup.
    """

    def __init__(self) -> None:
        self._store: dict[tuple, SVMResult] = {}
        self.hits = 0

    @staticmethod
    def _key(solver, cons) -> tuple:
        h = hashlib.sha256()
        for a in (cons.left, cons.right, cons.rhs, cons.equality):
            h.update(np.ascontiguousarray(a).tobytes())
            h.update(str(a.shape).encode())
        return (solver.__module__, solver.__qualname__, h.hexdigest())

    def solve(self, solver, cons, **hints: Any) -> SVMResult:
        """``solver(cons, **hints)``, or the stored answer for identical rows.

        ``hints`` must not change the answer (e.g. the Frobenius answer that
        :func:`solve_nuclear` reads feasibility from): they are not part of the key.
        """
        key = self._key(solver, cons)
        if key in self._store:
            self.hits += 1
            return self._store[key]
        res = self._store[key] = solver(cons, **hints)
        return res

    def solve_frobenius_many(self, conss, device: str = "cpu") -> None:
        """Store :func:`solve_frobenius` answers for the distinct, new constraint sets among
        ``conss``, solved together (:func:`attnsvm.svm.frobenius_batched.solve_many`: batched
        from ``BATCH_MIN`` instances, the same answers as one by one otherwise)."""
        from attnsvm.svm import (
            frobenius_batched as svm_frobenius_batched,  # torch: only where a group trains
        )

        solver, todo = svm_frobenius_batched.solve_frobenius, {}  # the answers' own route
        for cons in conss:
            key = self._key(solver, cons)
            if key not in self._store:
                todo.setdefault(key, cons)
        answers = svm_frobenius_batched.solve_many(list(todo.values()), device)
        for key, res in zip(todo, answers, strict=True):
            self._store[key] = res


def _run_group(
    cells: list[Cell], device: str, cache: SolveCache, progress: bool = False
) -> list[CellResult]:
    """One shape group: its data, one batched training run, then SVMs and metrics per cell."""
    c0 = cells[0]
    if c0.task == "ntp":  # next-token prediction (docs/science.md §8): its own pipeline
        from attnsvm.ntp.run import run_ntp_group

        return run_ntp_group(cells, device)
    if c0.heads > 1:  # multi-head attention (docs/science.md §12): its own pipeline
        from attnsvm.sweep.multihead import run_multihead_group

        return run_multihead_group(cells, device, cache)
    t_data = time.perf_counter()
    datasets = [make_dataset(c) for c in cells]
    masks: list[np.ndarray | None] = [None] * len(cells)
    if c0.attention in SEQ.SEQUENCE_ATTENTIONS:  # n T (example, query) pairs, docs/science.md §4
        pairs = [SEQ.expand(ds, c0.attention == "causal") for ds in datasets]
        datasets, masks = [p[0] for p in pairs], [p[1] for p in pairs]
    log.info("stage data: %d dataset(s) in %.3f s", len(cells), time.perf_counter() - t_data)
    run = _GroupRun.untrained(cells, datasets)
    if c0.train:
        run.train(cells, datasets, masks, device, progress)
    results = [
        run.result(s, cell, ds, masks[s])
        for s, (cell, ds) in enumerate(zip(cells, datasets, strict=True))
    ]
    _solve_group(results, c0, cache, device, progress, run.radii)
    return results


@dataclass
class _GroupRun:
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
    def untrained(cls, cells: list[Cell], datasets: list[Dataset]) -> _GroupRun:
        c0 = cells[0]
        S, C = len(cells), len(c0.checkpoints()) if c0.train else 0
        n, T, d = datasets[0].n, c0.T, c0.d
        iters = np.asarray(c0.checkpoints() if c0.train else [], dtype=np.int64)
        radii = None
        if c0.task == "regpath":  # one "checkpoint" per radius (attnsvm.gd.regpath)
            from attnsvm.gd.regpath import radii as make_radii

            radii = make_radii(c0.radius_min, c0.radius_max, c0.checkpoint_count)
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

    def train(self, cells, datasets, masks, device: str, progress: bool) -> None:
        """Train the group as one batch of seeds (docs/science.md §3); a failure is kept in
        :attr:`error` and recorded per cell, never raised."""
        c0, S = cells[0], len(cells)
        mask_kw = {} if masks[0] is None else {"mask": np.stack(masks)}
        t_train = time.perf_counter()
        bar = progress_bar(
            progress and c0.task != "regpath", c0.iterations, f"train {c0.param} (S={S})", "step"
        )
        try:
            from attnsvm.gd.train import stack_batch, train_stacked

            b = stack_batch(datasets, [make_init(c) for c in cells])
            if c0.task == "regpath":
                from attnsvm.gd.regpath import regpath_batch

                tr, _ = regpath_batch(
                    *(b["X"], b["Y"], b["Z"], b["v"], b["init"]),
                    param=c0.param,
                    radii=self.radii,
                    steps=c0.iterations,
                    lr=c0.lr,
                    dtype=c0.dtype,
                    device=device,
                    **mask_kw,
                )
            elif c0.train_head:  # (W or KQ, v) jointly, docs/science.md §11
                from attnsvm.gd.joint import train_joint_stacked

                extra = dict(mask_kw, progress=None if bar is None else bar.update)
                joint = train_joint_stacked(b, c0, device=device, **extra)
                tr, self.head = joint.train, joint.v
            else:
                extra = dict(mask_kw, progress=None if bar is None else bar.update)
                tr = train_stacked(b, c0, device=device, **extra)
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
        opt = _optimal(ds, mask)
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


def _solve_group(
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
    # Batched Frobenius solves need torch: only trained groups (torch already loaded) use them,
    # so SVM-only blocks (E3) keep their torch-free start-up.
    presolve = _presolve_frobenius(results, c0.train, cache, device) if c0.train else 0.0
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
        ", ".join(f"{k} {v}" for k, v in _counts(r.status for r in results).items()),
    )


def _counts(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _presolve_frobenius(
    results: list[CellResult], train: bool, cache: SolveCache, device: str
) -> float:
    """Solve the Frobenius Att-SVMs of a whole group at once (docs/science.md §4).

    Fills ``cache`` with the answers :func:`_solve_and_measure` then looks up, batched on the
    group's device when there are enough of them (:mod:`attnsvm.svm.frobenius_batched`). A
    cell whose constraints cannot be built here is left to :func:`_solve_and_measure`, which
    records its error; if the batched solve itself fails, every SVM is solved per cell as
    before (a warning says so), so nothing is lost. Returns the seconds per cell.
    """
    t0 = time.perf_counter()
    conss = []
    for res in results:
        try:
            conss.extend(_svm_constraints(res, train and res.status == "ok").values())
        except Exception:  # noqa: BLE001 - recorded per cell by _solve_and_measure
            continue
    try:
        from attnsvm.gd.device import resolve_device

        dev = resolve_device(device)
        cache.solve_frobenius_many(conss, "cpu" if dev.type != "cuda" else dev)
    except Exception as exc:  # noqa: BLE001 - the per-cell solves below still run
        log.warning("batched SVM solve failed (%r); solving per cell", exc)
    return (time.perf_counter() - t0) / max(1, len(results))


def _svm_constraints(res: CellResult, trained: bool) -> dict:
    """Att-SVM constraints of GD's selection alpha (set on ``res`` when trained) and of opt."""
    if trained:
        res.alpha = M.selected_tokens(res.softmax[-1])
    cons = {"alpha": _constraints(res.data, res.alpha, res.mask)}
    same = np.array_equal(res.alpha, res.opt)
    cons["opt"] = cons["alpha"] if same else _constraints(res.data, res.opt, res.mask)
    return cons


def _optimal(ds: Dataset, mask: np.ndarray | None) -> np.ndarray:
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
                else cache.solve(solve, con, **hints)
            )
    res.timings["solve"] = time.perf_counter() - t0

    sc = res.scalars
    sc["alpha_is_opt"] = float(alpha_is_opt)
    for key, r in res.svms.items():
        # an answer without a certificate (optimal_inaccurate, solver_error) is not solved:
        # no rank, no objective, and feasible_* NaN (neither feasible nor infeasible; issue 12)
        W = r.W if r.solved else None
        sc[f"rank_{key}"] = M.rank(W, cell.rank_tol)
        sc[f"erank_{key}"] = M.effective_rank(W)
        sc[f"objective_{key}"] = r.objective if r.solved else np.nan
        sc[f"feasible_{key}"] = _feasible_flag(r)
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
    res.curves["softmax_mass"] = M.softmax_mass(res.softmax)
    res.curves["loss"] = res.loss
    res.curves["wnorm"] = res.wnorm
    for key, r in res.svms.items():
        res.curves[f"corr_{key}"] = (
            M.corr_batch(Wk, r.W[None]) if r.solved else np.full(len(Wk), np.nan)
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = cons["alpha"].values(Wk) if len(Wk) else None  # (checkpoints, rows)
        res.curves["gd_margin"] = vals.min(axis=1) / res.wnorm
    W_gd = Wk[-1]
    sc["rank_gd"] = M.rank(W_gd, cell.rank_tol)
    sc["erank_gd"] = M.effective_rank(W_gd)
    sc["softmax_mass"] = float(res.curves["softmax_mass"][-1])
    sc["wnorm"] = float(res.wnorm[-1])
    sc["loss"] = float(res.loss[-1])
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
        sc["locally_optimal"] = float(local)
        sc["corr_matching"] = sc[f"corr_{norm}_alpha"]
        sc["corr_converged"] = float(M.corr_converged(sc["corr_matching"], cell.corr_threshold))
        res.convergence = M.selection_type(alpha_is_opt=alpha_is_opt, locally_optimal=local)
        res.convergence_strict = M.convergence_type(
            saturated=saturated,
            alpha_is_opt=alpha_is_opt,
            locally_optimal=local,
            correlation=sc["corr_matching"],
            threshold=cell.corr_threshold,
        )
        if cell.param == "KQ" and cell.m is not None and cell.m < cell.d:
            _low_rank(res, cons["alpha"])
        if res.head is not None:
            _trained_head(res)
    else:
        _general_head(res, W_gd)
    res.timings["metrics"] = time.perf_counter() - t1


def _norm_svms(res: CellResult, cons, cache: SolveCache) -> None:
    """The max-entry, spectral and l_p Att-SVMs of alpha (docs/science.md §10): for each norm
    the usual SVM scalars and corr curve, and ``mratio_<norm>_alpha``, the margin of W_GD's
    direction in that norm relative to the SVM's (1: a max-margin direction, whichever of
    several solutions; the Frobenius and nuclear SVMs get theirs too)."""
    from attnsvm.svm import norms as N

    cell, sc = res.cell, res.scalars
    t0 = time.perf_counter()
    for norm in N.NORMS:
        r = res.svms[f"{norm}_alpha"] = cache.solve(N.svm_solver(norm), cons)
        W = r.W if r.solved else None
        sc[f"rank_{norm}_alpha"] = M.rank(W, cell.rank_tol)
        sc[f"erank_{norm}_alpha"] = M.effective_rank(W)
        sc[f"objective_{norm}_alpha"] = r.objective if r.solved else np.nan
        sc[f"feasible_{norm}_alpha"] = _feasible_flag(r)
        curve = M.corr_batch(res.W, r.W[None]) if r.solved else np.full(len(res.W), np.nan)
        res.curves[f"corr_{norm}_alpha"] = curve
        sc[f"corr_{norm}_alpha"] = float(curve[-1])
    res.timings["solve_norms"] = time.perf_counter() - t0
    for key, norm in (("fro", "fro"), ("nuc", "nuc"), *((k, k) for k in N.NORMS)):
        r = res.svms[f"{key}_alpha"]
        opt = r.objective if r.solved else np.nan
        sc[f"mratio_{key}_alpha"] = N.margin_ratio(cons, res.W[-1], norm, opt)


def _feasible_flag(r: SVMResult) -> float:
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
    nan_curve = np.full(len(res.W), np.nan)
    res.curves["corr_svmeq"] = nan_curve if g.svmeq is None else M.corr_batch(res.W, g.svmeq[None])
    res.curves["corr_mm_gen"] = (
        M.corr_batch(res.W, g.mm_gen.W[None]) if g.mm_gen.solved else nan_curve
    )
    res.curves["corr_single"] = res.curves["corr_fro_alpha"]
    for key in GEN_CURVES:
        sc[key] = float(res.curves[key][-1])
    masked = np.where(g.relevant, 0.0, s_final)
    sc["max_masked_prob"] = float(masked.max())
    sc["n_relevant"] = float(g.relevant.sum(axis=1).mean())
    sc["ambiguous"] = float(np.any((s_final > 1e-6) & (s_final < cell.relevant_tol)))
    sc["status_mm_gen_feasible"] = _feasible_flag(g.mm_gen)


def _low_rank(res: CellResult, cons) -> None:
    """Rank-constrained Att-SVM_* for KQ with m < d (attnsvm.svm.lowrank; docs/science.md §4).

    Scalars ``objective_lowrank_alpha`` (its nuclear norm), ``lowrank_gap`` (relative excess
    over the convex bound ``||W_mm_*||_*``), ``lowrank_certified`` (1: reaches the bound),
    ``lowrank_agree`` (restarts within 1e-4 of the best), ``rank_lowrank_alpha``,
    ``corr_lowrank_alpha`` and the curve ``corr_lowrank_alpha``.
    """
    from attnsvm.svm.lowrank import solve_rank_constrained

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
    curve = M.corr_batch(res.W, lr.W[None]) if lr.W is not None else np.full(len(res.W), np.nan)
    res.curves["corr_lowrank_alpha"] = curve
    sc["corr_lowrank_alpha"] = float(curve[-1])


def _trained_head(res: CellResult) -> None:
    """Metrics of a trained head (docs/science.md §11): corr of v(k) with the max-margin head
    ``v_mm`` of the finally attended tokens ``x_{i,alpha_i}`` (:func:`attnsvm.svm.head.head_svm`),
    its feasibility and margin, ``||v(k)||``, GD's head margin, and whether alpha is the
    optimal selection of the initial head.

    Scalars ``corr_v``, ``vmm_feasible``, ``vmm_margin``, ``v_margin``,
    ``vnorm``, ``alpha_is_opt_init``; curves ``corr_v`` and ``vnorm``.
    """
    from attnsvm.gd.data import Dataset
    from attnsvm.svm.head import head_svm

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
    sc["vmm_feasible"] = _feasible_flag(svm)
    sc["vmm_margin"] = 1.0 / svm.objective if svm.solved else np.nan
    sc["vnorm"] = float(vnorm[-1])
    init = Dataset(ds.X, ds.Y, ds.Z, res.head_init)
    sc["alpha_is_opt_init"] = float(np.array_equal(res.alpha, _optimal(init, res.mask)))
