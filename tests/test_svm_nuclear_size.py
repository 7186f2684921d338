"""The nuclear Att-SVM at size: the working set around the primal-dual method
(attnsvm/svm/nuclear_ws.py; docs/science.md §4, "The SVMs at size"; issue 28) against the
routes of smaller systems, its fallback, and the certificate at (256, 32, 64)."""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.nuclear as svm_nuclear
import attnsvm.svm.nuclear_ws as svm_ws
import attnsvm.svm.routes as routes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.frobenius import VERIFY_TOL
from attnsvm.tasks.metrics import corr, rank
from tests.test_svm_size import planted

#: both answers certify a relative gap <= GAP_TOL to the optimum, so their objectives agree
#: to twice that; directions to 1e-6 (generic instances: a unique optimum, well conditioned)
OBJ_RTOL = 2 * svm_nuclear.GAP_TOL
CORR_TOL = 1e-6


def _force_working_set(monkeypatch):
    """Every system through the working set, starting small and growing over rounds."""
    monkeypatch.setattr(routes, "PD_MAX_ROWS", 0)
    monkeypatch.setattr(svm_ws, "WS_START_ROWS", 10)
    monkeypatch.setattr(svm_ws, "WS_MIN_ADD", 10)


def _rounds(res) -> int:
    return int(res.message.split("working set: ")[1].split(" rounds")[0])


def test_working_set_gives_the_small_routes_answer(monkeypatch):
    """Systems the primal-dual route solves: the working set (several rounds)
    reaches the same certified optimum (objective, direction, rank)."""
    cases = [
        planted(n, T, d, s) for n, T, d in [(6, 8, 10), (20, 10, 8), (40, 12, 10)] for s in (0, 1)
    ]
    ds = make_dataset(Cell(n=15, T=15, d=10, seed=0))
    cases.append(att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds)))
    ref = [solve_nuclear(c) for c in cases]
    assert {r.solver for r in ref} == {"direct-primal-dual"}
    _force_working_set(monkeypatch)
    rounds = []
    for cons, r in zip(cases, ref, strict=True):
        res = solve_nuclear(cons)
        assert r.solved and res.solved and res.solver == "direct-ws-primal-dual", res.message
        rounds.append(_rounds(res))
        assert res.objective == pytest.approx(r.objective, rel=OBJ_RTOL)
        assert corr(res.W, r.W) >= 1 - CORR_TOL
        assert rank(res.W) == rank(r.W)
        assert cons.values(res.W).min() >= 1 - VERIFY_TOL
    assert max(rounds) > 2


def test_working_set_above_the_row_limit_agrees_with_the_conic_route(monkeypatch):
    """1,216 rows (above PD_MAX_ROWS, reduced size 16): the working set's answer is the one
    Clarabel gives there without it."""
    cons = planted(64, 20, 8, seed=2)
    assert cons.n_rows > routes.PD_MAX_ROWS
    res = solve_nuclear(cons)
    assert res.solved and res.solver == "direct-ws-primal-dual", res.message
    monkeypatch.setattr(routes, "WS_MAX_SIZE", 0)
    ref = solve_nuclear(cons)
    assert ref.solved and ref.solver == "direct-clarabel", ref.message
    assert res.objective == pytest.approx(ref.objective, rel=OBJ_RTOL)
    assert corr(res.W, ref.W) >= 1 - CORR_TOL
    assert rank(res.W) == rank(ref.W)


def test_working_set_past_its_memory_bound_falls_back(monkeypatch):
    """A working set that would outgrow WS_MAX_ROWS gives no answer; the conic solvers take
    over and the answer is certified as before."""
    cons = planted(20, 10, 8, seed=0)
    ref = solve_nuclear(cons)
    _force_working_set(monkeypatch)
    monkeypatch.setattr(svm_ws, "WS_MAX_ROWS", 12)
    A = cons.left
    assert svm_ws.solve_working_set(A, cons.right, cons.rhs) is None
    res = solve_nuclear(cons)
    assert res.solved and res.solver == "direct-clarabel", res.message
    assert "working set: no answer" in res.message
    assert res.objective == pytest.approx(ref.objective, rel=OBJ_RTOL)


@pytest.mark.slow  # 20-30 s of one idle core, minutes on a loaded one
def test_issue_size_is_certified_with_every_row_checked(monkeypatch):
    """(n, T, d) = (256, 32, 64), 7,936 rows: certified by the working set; every row holds
    and the multipliers' weak-duality bound meets ||W||_* (the certificate, recomputed here
    from the route's multipliers)."""
    cons = planted(256, 32, 64, seed=0)
    seen = {}
    inner = svm_nuclear._solve_working_set

    def spy(prob, frobenius):
        out = inner(prob, frobenius)
        seen["lam"] = out[2]
        return out

    monkeypatch.setattr(svm_nuclear, "_solve_working_set", spy)
    res = solve_nuclear(cons)
    assert res.solved and res.solver == "direct-ws-primal-dual", res.message
    W, lam = res.W, seen["lam"]
    margins = np.einsum("kd,de,ke->k", cons.left, W, cons.right)
    assert margins.min() >= 1 - VERIFY_TOL
    assert lam.min() >= 0 and lam.size == cons.n_rows
    G = np.einsum("k,kd,ke->de", lam, cons.left, cons.right)
    lower = float(cons.rhs @ lam) / np.linalg.svd(G, compute_uv=False)[0]
    upper = np.linalg.svd(W, compute_uv=False).sum()
    assert upper == pytest.approx(res.objective, rel=1e-12)
    assert lower <= upper and (upper - lower) / upper <= svm_nuclear.GAP_TOL
