"""The nuclear SVM at the paper's small sizes (E2, E6, E3's small shapes: the primal-dual route
of attnsvm.svm.nuclear_pd, which replaced the dual barrier there, issue 45) against Clarabel."""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.nuclear as svm_nuclear
import attnsvm.svm.routes as routes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.frobenius import BASIS_TOL, orthonormal_basis
from attnsvm.svm.nuclear_pd import certified_gap, solve_primal_dual
from attnsvm.tasks.metrics import rank


def instances(count: int, seed: int):
    """Feasible Att-SVM rows at the paper's small sizes, opt or random selections."""
    rng = np.random.default_rng(seed)
    shapes = [(6, 8, 10), (5, 5, 5), (10, 5, 15), (5, 10, 20), (3, 4, 8), (15, 5, 20)]
    out = []
    for k in range(count):
        n, T, d = shapes[k % len(shapes)]
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=int(rng.integers(0, 10_000))))
        alpha = optimal_tokens(ds) if k % 2 == 0 else rng.integers(0, T, size=n)
        cons = att_svm_constraints(ds.X, ds.Z, alpha)
        if solve_frobenius(cons).feasible:
            out.append(cons)
    return out


def test_small_instances_agree_with_clarabel(monkeypatch):
    cases = instances(60, seed=5)
    assert len(cases) >= 50
    fast = [solve_nuclear(c) for c in cases]
    monkeypatch.setattr(routes, "PD_MAX_SIZE", 0)  # the conic path as reference
    ref = [solve_nuclear(c) for c in cases]
    used = 0
    for cons, f, r in zip(cases, fast, ref, strict=True):
        assert f.status == r.status == "optimal", (f.message, r.message)
        assert r.solver != "direct-primal-dual"
        used += f.solver == "direct-primal-dual"
        assert abs(f.objective - r.objective) <= 1e-7 * r.objective
        assert rank(f.W, 1e-6) == rank(r.W, 1e-6)
        assert cons.values(f.W).min() >= 1 - 1e-6
    assert used >= 0.9 * len(cases)  # the fast path, not a silent fallback


def test_the_certificate_is_a_true_bound():
    cons = instances(1, seed=2)[0]
    U_l, U_r = orthonormal_basis(cons.left), orthonormal_basis(cons.right, BASIS_TOL)
    A, B = cons.left @ U_l, cons.right @ U_r
    res = solve_primal_dual(A, B, cons.rhs)
    assert res is not None and res.gap <= 1e-7
    assert res.gap == pytest.approx(certified_gap(A, B, cons.rhs, res.M, res.lam))
    # the dual bound lies below the objective of any feasible point, e.g. the Frobenius W_mm
    frob = solve_frobenius(cons)
    M_fro = U_l.T @ frob.W @ U_r
    lower = cons.rhs @ res.lam / np.linalg.norm(A.T @ (res.lam[:, None] * B), 2)
    assert lower <= np.linalg.svd(M_fro, compute_uv=False).sum()
    assert np.all(res.lam >= 0)


def test_the_interior_point_route_declines_what_it_cannot_solve():
    A, B = np.ones((2, 2)), np.ones((2, 2))
    assert solve_primal_dual(A, B, np.array([1.0, 0.0])) is None  # rhs must be > 0
    assert solve_primal_dual(A, B, np.zeros(0)) is None


def test_breakdown_falls_back_to_clarabel(monkeypatch):
    cons = instances(1, seed=3)[0]
    ref = solve_nuclear(cons)
    assert ref.solver == "direct-primal-dual"
    monkeypatch.setattr(svm_nuclear, "solve_primal_dual", lambda *a, **k: None)
    res = solve_nuclear(cons)
    assert res.solver == "direct-clarabel" and res.status == "optimal"
    assert "direct primal-dual status breakdown" in res.message
    assert res.objective == pytest.approx(ref.objective, rel=1e-7)
