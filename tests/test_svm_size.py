"""The Frobenius Att-SVM at size: the working-set route (docs/science.md §4, "The SVMs at
size"; issue 28) against the routes of smaller systems, its fallbacks and its memory bound."""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.frobenius as svm_frobenius
import attnsvm.svm.frobenius_batched as svm_batched
import attnsvm.svm.routes as routes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_frobenius
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.tasks.metrics import corr


def planted(n: int, T: int, d: int, seed: int):
    """Att-SVM rows of the selection of a random W* (feasible by construction)."""
    ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed, train=False))
    W = np.random.default_rng(seed).standard_normal((d, d))
    alpha = np.argmax(np.einsum("ntd,de,ne->nt", ds.X, W, ds.Z), axis=1)
    return att_svm_constraints(ds.X, ds.Z, alpha)


def _support(res, cons):
    return cons.values(res.W) <= 1 + 1e-9


def _force_working_set(monkeypatch):
    """Every system through the working set, in many small rounds."""
    monkeypatch.setattr(routes, "WORKING_SET_MIN_ROWS", 0)
    monkeypatch.setattr(svm_frobenius, "WS_MIN_ADD", 3)
    monkeypatch.setattr(svm_frobenius, "WS_GROW", 0.2)
    monkeypatch.setattr(svm_frobenius, "WS_START_SHARE", 10**6)


def test_working_set_gives_the_small_routes_answer(monkeypatch):
    """Same status, support and (after the canonical re-solve on the support) W as the routes
    of smaller systems, reached in several rounds; certified like every optimal answer."""
    cases = [
        planted(n, T, d, s) for n, T, d in [(6, 8, 10), (12, 10, 8), (20, 6, 12)] for s in (0, 1)
    ]
    cases += [
        att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
        for ds in (
            make_dataset(Cell(n=n, T=T, d=d, seed=s))
            for n, T, d, s in [(6, 8, 10, 2), (15, 15, 10, 0)]
        )
    ]
    ref = [solve_frobenius(c) for c in cases]
    _force_working_set(monkeypatch)
    rounds = []
    for cons, r in zip(cases, ref, strict=True):
        res = solve_frobenius(cons)
        assert res.status == r.status
        if not r.solved:
            continue
        assert res.solver == "ws-dual", res.message
        rounds.append(int(res.message.split(" rounds")[0].split()[-1]))
        assert np.array_equal(_support(res, cons), _support(r, cons))
        assert corr(res.W, r.W) >= 1 - 1e-12
        assert res.objective == pytest.approx(r.objective, rel=1e-12)
        assert cons.values(res.W).min() >= 1 - svm_frobenius.VERIFY_TOL
    assert len(rounds) >= 6 and max(rounds) > 2


def test_working_set_at_size_agrees_with_the_dense_routes(monkeypatch):
    """Above WORKING_SET_MIN_ROWS (1,984 rows): the working set's certified answer is the
    answer of the dense routes it replaces there."""
    cons = planted(64, 32, 20, seed=3)
    assert cons.n_rows > routes.WORKING_SET_MIN_ROWS
    res = solve_frobenius(cons)
    assert res.solved and res.solver == "ws-dual", res.message

    def declined(c):
        raise RuntimeError("working set disabled by the test")

    monkeypatch.setitem(svm_frobenius.ROUTES, "ws-dual", declined)
    ref = solve_frobenius(cons)
    assert ref.solved and ref.solver != "ws-dual"
    assert "working set disabled" in ref.message
    assert corr(res.W, ref.W) >= 1 - 1e-9
    assert res.objective == pytest.approx(ref.objective, rel=1e-9)
    assert np.array_equal(_support(res, cons), _support(ref, cons))


def test_infeasible_system_falls_back_to_the_routes_that_prove_it(monkeypatch):
    ds = make_dataset(Cell(n=15, T=5, d=1, seed=0))
    cons = att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
    ref = solve_frobenius(cons)
    assert ref.status == "infeasible"
    _force_working_set(monkeypatch)
    res = solve_frobenius(cons)
    assert res.status == "infeasible" and res.W is None
    assert "working set" in res.message
    # above the memory bound no dense route runs: the working set's own Farkas vector (from
    # its small system, checked on every row) proves it (issue 31)
    monkeypatch.setattr(routes, "DENSE_MAX_BYTES", 0)
    res = solve_frobenius(cons)
    assert res.status == "infeasible" and res.solver == "ws-dual" and res.W is None
    assert "working set" in res.message and "Farkas certificate" in res.message
    # without that vector: not solved, and counted apart
    monkeypatch.setattr(svm_frobenius, "_least_distance", lambda A, h: (None, 0.0, None))
    res = solve_frobenius(cons)
    assert res.status == "solver_error" and not res.solved and res.W is None
    assert "working set" in res.message


def test_large_systems_leave_the_batched_route():
    cons = planted(64, 32, 20, seed=3)
    small = planted(6, 8, 10, seed=0)
    assert svm_batched.batchable(small) and not svm_batched.batchable(cons)
    res, stats = svm_batched.solve_frobenius_batched([cons, small])
    assert stats.batched == 1 and res[0].solver == "ws-dual" and res[0].solved


def test_pivoting_from_any_start_solves_the_dual_qp():
    """The working set's pivoting (warm-started from any free set) reaches the same
    multipliers as scipy's NNLS on the Cholesky factor (the route of small systems)."""
    rng = np.random.default_rng(4)
    for seed in range(5):
        cons = planted(8, 6, 8, seed)
        G, b = svm_frobenius.gram(cons), cons.rhs
        ref = svm_frobenius._nnls_dual(G, b)
        assert ref is not None
        for start in (np.ones(b.size, bool), np.zeros(b.size, bool), rng.random(b.size) < 0.5):
            lam, free = svm_frobenius._pivoting(G, b, start, svm_frobenius.WS_MAX_PIVOTS)
            assert np.allclose(lam, ref, rtol=1e-9, atol=1e-12 * ref.max())
            assert np.array_equal(free & (lam > 0), ref > 1e-12 * ref.max())


def test_spread_takes_every_examples_worst_row_first():
    example = np.array([0, 0, 0, 1, 1, 2])
    viol = np.array([0.1, 0.5, 0.3, 0.2, 0.9, 0.05])
    order = svm_frobenius._spread(example, viol)
    assert order.tolist() == [4, 1, 5, 2, 3, 0]


def test_issue_size_is_certified_with_every_row_checked():
    """(n, T, d) = (256, 32, 64), 7,936 rows: certified by the working set; every row holds
    and the multipliers' weak-duality bound meets ||W|| (the certificate, recomputed here)."""
    cons = planted(256, 32, 64, seed=0)
    res = solve_frobenius(cons)
    assert res.solved and res.solver == "ws-dual", res.message
    assert cons.values(res.W).min() >= 1 - svm_frobenius.VERIFY_TOL
    support = cons.values(res.W) <= 1 + 1e-9
    lam = np.zeros(cons.n_rows)
    lam[support] = np.linalg.lstsq(cons.subset(support).matrix().T, res.W.ravel(), rcond=None)[0]
    assert lam.min() >= -1e-9 * lam.max()
    bound = svm_frobenius.lower_bound(cons, lam)
    assert bound == pytest.approx(res.objective, rel=1e-8)
