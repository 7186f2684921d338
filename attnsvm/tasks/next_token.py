"""Next-token prediction (docs/science.md §8): one shape group of ``task: ntp`` cells end to end.

Data, priority graphs and their SCCs, the NTP-SVM, W_fin, batched training (the model
:class:`attnsvm.gd.model.NextToken` through the descent loop) and the metrics, as the sweep's
CellResults.
"""

from __future__ import annotations

import logging
import time
import traceback

import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import Dataset, make_init, stack_seeds
from attnsvm.ntp.data import NTPData, make_ntp_data
from attnsvm.ntp.graph import PriorityGraphs, priority_graphs
from attnsvm.ntp.svm import fin_basis, ntp_constraints, project, solve_ntp_svm
from attnsvm.ntp.wfin import solve_wfin
from attnsvm.tasks import Task
from attnsvm.tasks import metrics as M
from attnsvm.tasks.cache import SolveCache
from attnsvm.tasks.measure import feasible_flag, trajectory_scalars
from attnsvm.tasks.result import CellResult, blank_result
from attnsvm.tasks.trajectory import record_training, train_group

log = logging.getLogger(__name__)

#: the SVM-like answers of an NTP cell (stored on the ``svm`` axis)
NTP_SVMS = ("ntp_svm", "ntp_fin")


def _as_dataset(data: NTPData) -> Dataset:
    """The tokens as the sweep stores them: X the embedded sequences, Z the queries (last
    tokens); Y = +1 and v = 0 (no linear head; the labels are the tokens at ``opt``)."""
    n, d = data.tokens.shape[0], data.E.shape[1]
    return Dataset(data.X, np.ones(n), data.Z, np.zeros(d))


def graph_scalars(graphs: PriorityGraphs, cons) -> dict[str, float]:
    """How many graphs, SCCs with more than one token and their largest size, rows."""
    cyc = graphs.cyclic_components()
    return {
        "ntp_graphs": float(len(graphs.queries)),
        "ntp_edges": float(len(graphs.edges)),
        "ntp_cyclic_sccs": float(len(cyc)),
        "ntp_largest_scc": float(max(cyc, default=1)),
        "ntp_cyclic_tokens": float(sum(cyc)),
        "ntp_eq_rows": float(cons.equality.sum()),
        "ntp_ineq_rows": float((~cons.equality).sum()),
        "ntp_acyclic": float(not cyc),
    }


def trajectory_curves(W: np.ndarray, svm, fin, basis: np.ndarray) -> dict[str, np.ndarray]:
    """Per checkpoint: corr(W(k), W_svm), ||Pi_S W(k) - W_fin|| (and relative; NaN when
    S_fin = {0}), corr with
    W_pred(k) = W_fin + R(k) W_svm / ||W_svm|| (docs/science.md §8)."""
    nan = np.full(len(W), np.nan)
    out = {"corr_ntp_svm": nan, "corr_ntp_pred": nan, "fin_dist": nan, "fin_dist_rel": nan}
    out["corr_ntp_svm"] = M.corr_curve(W, svm.W if svm.solved else None)
    if fin.solved and basis.shape[0]:  # NaN without a cyclic subspace (acyclic graphs)
        out["fin_dist"] = np.linalg.norm(project(basis, W) - fin.W, axis=(-2, -1))
        wn = np.linalg.norm(fin.W)
        out["fin_dist_rel"] = out["fin_dist"] / wn if wn > 0 else nan
    if svm.solved and fin.solved and np.linalg.norm(svm.W) > 0:
        u = svm.W / np.linalg.norm(svm.W)
        R = np.einsum("cij,ij->c", W, u)
        out["corr_ntp_pred"] = np.einsum("cij,cij->c", W, fin.W + R[:, None, None] * u) / (
            np.linalg.norm(W, axis=(-2, -1)) * np.linalg.norm(fin.W + R[:, None, None] * u,
                                                              axis=(-2, -1))
        )  # fmt: skip
    return out


def scc_mass(softmax: np.ndarray, data: NTPData, graphs: PriorityGraphs) -> np.ndarray:
    """Mean softmax mass on the tokens of the label's SCC, per checkpoint (C,)."""
    k = data.tokens[:, -1]
    same = graphs.scc[k[:, None], data.tokens] == graphs.scc[k, data.labels][:, None]
    return (softmax * same).sum(-1).mean(-1)


class _Prepared:
    """Data, graphs, SVMs and W_fin of one cell (before training)."""

    def __init__(self, cell: Cell):
        t0 = time.perf_counter()
        self.data = make_ntp_data(cell.generator, cell.n, cell.T, cell.K, cell.d, cell.seed)
        self.graphs = priority_graphs(self.data.tokens, self.data.labels, cell.K)
        self.cons = ntp_constraints(self.data.E, self.graphs)
        self.svm = solve_ntp_svm(self.cons, "fro" if cell.param == "W" else "nuc", cell.svm_route)
        self.basis = fin_basis(self.cons)
        self.fin = solve_wfin(self.data, self.graphs, self.basis)
        self.seconds = time.perf_counter() - t0


def run_ntp_group(
    cells: list[Cell], device: str = "auto", cache: SolveCache | None = None, progress=False
) -> list[CellResult]:
    """CellResults of a shape group of ``task: ntp`` cells (docs/science.md §8); a failure
    in one cell is that cell's status and message, a failed training fails the group's cells.
    (The NTP-SVMs are solved per cell: ``cache`` is not used.)"""
    prepared, errors = [], []
    for cell in cells:
        try:
            prepared.append(_Prepared(cell))
            errors.append("")
        except Exception:  # recorded per cell, never swallowed
            prepared.append(None)
            errors.append(traceback.format_exc(limit=3))
    good = [i for i, p in enumerate(prepared) if p is not None]
    tr, train_error = None, ""
    if good:
        ready = [prepared[i] for i in good]
        arrays = stack_seeds([{"X": p.data.X, "Z": p.data.Z, "label": p.data.label_mask}
                              for p in ready])  # fmt: skip
        inits = [make_init(cells[i]) for i in good]
        tr, train_error = train_group("next_token", [cells[i] for i in good], arrays,
                                      stack_seeds(inits), device, progress)  # fmt: skip
    results = []
    for i, (cell, p) in enumerate(zip(cells, prepared, strict=True)):
        data = _as_dataset(p.data) if p else Dataset(*_nan_data(cell.n, cell.T, cell.d))
        res = blank_result(cell, data, cell.checkpoints())
        if p is None:
            res.status, res.message = "failed", errors[i]
        else:
            record_training(res, tr, good.index(i), train_error)
            if tr is not None:
                _measure(res, p)
        results.append(res)
    return results


def _nan_data(n: int, T: int, d: int):
    return np.full((n, T, d), np.nan), np.ones(n), np.full((n, d), np.nan), np.zeros(d)


#: the per-cell scalars of a next-token cell (:func:`graph_scalars`, :func:`_measure`)
SCALARS = (
    "ntp_graphs", "ntp_edges", "ntp_cyclic_sccs", "ntp_largest_scc", "ntp_cyclic_tokens",
    "ntp_eq_rows", "ntp_ineq_rows", "ntp_acyclic", "corr_ntp_svm", "corr_ntp_pred", "fin_dist",
    "fin_dist_rel", "scc_mass", *(f"{p}_{k}" for k in NTP_SVMS for p in ("objective", "feasible")),
    "loss", "wnorm", "softmax_mass",
)  # fmt: skip


def _measure(res, p: _Prepared) -> None:
    """SVMs, curves and scalars of a trained cell (its trajectory recorded)."""
    t0 = time.perf_counter()
    res.timings["solve"] = p.seconds
    res.opt = p.data.label_position
    res.alpha = M.selected_tokens(res.softmax[-1])
    res.svms = {"ntp_svm": p.svm, "ntp_fin": p.fin}
    curves = trajectory_curves(res.W, p.svm, p.fin, p.basis)
    curves["scc_mass"] = scc_mass(res.softmax, p.data, p.graphs)
    res.curves.update(curves)
    trajectory_scalars(res)
    sc = res.scalars
    sc.update(graph_scalars(p.graphs, p.cons))
    for key in ("corr_ntp_svm", "corr_ntp_pred", "fin_dist", "fin_dist_rel", "scc_mass"):
        sc[key] = float(curves[key][-1])
    for key, r in res.svms.items():
        sc[f"objective_{key}"] = r.objective if r.solved else np.nan
        sc[f"feasible_{key}"] = feasible_flag(r)
    res.timings["metrics"] = time.perf_counter() - t0


TASK = Task(
    name="next_token",
    selects=lambda cell: cell.task == "ntp",
    run_group=run_ntp_group,
    svms=lambda cell: NTP_SVMS,
    doc="next-token prediction with self-attention (docs/science.md 8)",
    scalars=lambda cell: SCALARS,
)
