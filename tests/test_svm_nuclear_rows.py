"""Nuclear Att-SVMs of E3's rows (attnsvm.svm.nuclear_pd) against Clarabel.

E3 (config/paper.yaml, e3_rank) at n = T = 15 has 210 rows; before the primal-dual method
these instances went to Clarabel / SCS, and those with 81-150 rows ((10, 10), (10, 15),
(15, 10)) to the dual barrier. The reference here is the independent cvxpy route
(``normNuc`` on the reduced problem) forced to Clarabel.
"""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.nuclear as svm_nuclear
import attnsvm.svm.routes as routes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.frobenius import BASIS_TOL, VERIFY_TOL, orthonormal_basis, violation
from attnsvm.svm.nuclear_pd import certified_gap, solve_primal_dual
from attnsvm.tasks.metrics import rank


def instances(shapes, per_shape: int, seed: int, random_share: bool = True):
    """Feasible Att-SVM rows: opt tokens (as E3) and, every other one, a random selection."""
    rng = np.random.default_rng(seed)
    out = []
    for n, T, d in shapes:
        for k in range(per_shape):
            ds = make_dataset(Cell(n=n, T=T, d=d, train=False, seed=int(rng.integers(10_000))))
            use_random = random_share and k % 2 == 1
            alpha = rng.integers(0, T, size=n) if use_random else optimal_tokens(ds)
            cons = att_svm_constraints(ds.X, ds.Z, alpha)
            if solve_frobenius(cons).feasible:
                out.append(((n, T, d), cons))
    return out


def clarabel_reference(cons, monkeypatch):
    """The cvxpy route (normNuc, reduced) with Clarabel: independent of the direct path."""
    with monkeypatch.context() as m:
        m.setattr(svm_nuclear, "_try_direct", lambda c, t0, frobenius=None, route="auto": None)
        m.setattr(routes, "CLARABEL_MAX_SIZE", 10**9)
        return solve_nuclear(cons)


def check_against_reference(cases, monkeypatch):
    for shape, cons in cases:
        fast = solve_nuclear(cons)
        ref = clarabel_reference(cons, monkeypatch)
        note = (shape, fast.message, ref.message)
        assert ref.status == "optimal" and ref.solver == "cvxpy-clarabel", note
        assert fast.status == "optimal" and fast.solver == "direct-primal-dual", note
        assert "primal-dual status certificate, certified gap" in fast.message
        assert violation(cons, fast.W) <= VERIFY_TOL
        assert cons.values(fast.W).min() >= 1 - 1e-6
        assert abs(fast.objective - ref.objective) <= 1e-7 * ref.objective, note
        assert rank(fast.W) == rank(ref.W), (note, rank(fast.W), rank(ref.W))


#: E3's n = T = 15 at the values of d in config/paper.yaml whose SVMs are feasible
E3_SHAPES = [(15, 15, 10), (15, 15, 15), (15, 15, 20)]


def test_e3_sizes_agree_with_clarabel(monkeypatch):
    cases = instances(E3_SHAPES, per_shape=4, seed=19)
    assert len(cases) >= 10
    check_against_reference(cases, monkeypatch)


def test_e3_small_d_agree_with_clarabel(monkeypatch):
    """d = 5 at n = T = 15: rarely feasible; the feasible ones must agree too."""
    cases = [
        ((15, 15, 5), c)
        for _, c in instances([(15, 15, 5)], per_shape=40, seed=3, random_share=False)
    ]
    assert len(cases) >= 3
    check_against_reference(cases[:3], monkeypatch)


def test_e3_barrier_sizes_agree_with_clarabel(monkeypatch):
    """E3's 90-140 rows: the barrier's route before, the primal-dual one now."""
    cases = instances([(10, 10, 10), (10, 15, 15), (15, 10, 20)], per_shape=2, seed=11)
    assert len(cases) >= 5
    check_against_reference(cases, monkeypatch)


def test_e3_middle_rows_agree_with_clarabel(monkeypatch):
    """E3's 45-70 rows ((5, 10), (15, 5), (5, 15)): the barrier's route before issue 28's
    batched solves, the primal-dual one now."""
    cases = instances([(5, 10, 10), (15, 5, 10), (5, 15, 5)], per_shape=2, seed=13)
    assert len(cases) >= 5 and {c.n_rows for _, c in cases} == {45, 60, 70}
    check_against_reference(cases, monkeypatch)


def test_small_instances_take_the_primal_dual_route():
    """E2 / E6 sizes (42 rows): the primal-dual route, which replaced the dual barrier there
    (issue 45)."""
    (_, cons), *_ = instances([(6, 8, 10)], per_shape=1, seed=1, random_share=False)
    assert cons.n_rows <= routes.PD_MAX_ROWS
    assert solve_nuclear(cons).solver == "direct-primal-dual"


def test_larger_instances_agree_with_clarabel(monkeypatch):
    cases = instances([(20, 12, 25), (25, 10, 30)], per_shape=2, seed=7)
    assert len(cases) >= 3
    check_against_reference(cases, monkeypatch)


def test_certificate_is_a_true_bound():
    (_, cons), *_ = instances([(15, 15, 15)], per_shape=1, seed=2)
    U_l, U_r = orthonormal_basis(cons.left), orthonormal_basis(cons.right, BASIS_TOL)
    A, B = cons.left @ U_l, cons.right @ U_r
    res = solve_primal_dual(A, B, cons.rhs)
    assert res is not None and res.gap <= svm_nuclear.GAP_TOL
    assert res.gap == pytest.approx(certified_gap(A, B, cons.rhs, res.M, res.lam))
    assert np.all(res.lam >= 0)
    assert np.min(np.einsum("kp,pq,kq->k", A, res.M, B) / cons.rhs) >= 1 - 1e-9
    # the dual bound lies below the objective of any feasible point, e.g. the Frobenius W_mm
    M_fro = U_l.T @ solve_frobenius(cons).W @ U_r
    lower = cons.rhs @ res.lam / np.linalg.norm(A.T @ (res.lam[:, None] * B), 2)
    assert lower <= np.linalg.svd(M_fro, compute_uv=False).sum()


def test_declines_what_it_cannot_solve():
    A, B = np.ones((2, 2)), np.ones((2, 2))
    assert solve_primal_dual(A, B, np.array([1.0, 0.0])) is None  # rhs must be > 0
    assert solve_primal_dual(A, B, np.zeros(0)) is None
    assert solve_primal_dual(np.zeros((2, 2)), B, np.ones(2)) is None


def test_breakdown_falls_back_to_the_conic_route(monkeypatch):
    (_, cons), *_ = instances([(15, 15, 10)], per_shape=1, seed=4)
    ref = solve_nuclear(cons)
    assert ref.solver == "direct-primal-dual"
    monkeypatch.setattr(svm_nuclear, "solve_primal_dual", lambda *a, **k: None)
    res = solve_nuclear(cons)
    assert res.solver in ("direct-clarabel", "direct-scs") and res.status == "optimal"
    assert "direct primal-dual status breakdown" in res.message
    assert res.objective == pytest.approx(ref.objective, rel=1e-7)
    assert rank(res.W) == rank(ref.W)


def test_uncertified_answer_is_not_accepted(monkeypatch):
    """A primal-dual answer above GAP_TOL hands over to Clarabel / SCS."""
    (_, cons), *_ = instances([(15, 15, 15)], per_shape=1, seed=5)
    real = svm_nuclear.solve_primal_dual

    def early(*a, **k):
        return real(*a, **{**k, "max_iter": 5})

    monkeypatch.setattr(svm_nuclear, "solve_primal_dual", early)
    # without the Newton refinement of attnsvm.svm.nuclear_kkt, which would otherwise get the
    # first try (tests/test_svm_photo.py tests it and its own fallback)
    monkeypatch.setattr(svm_nuclear, "refine_kkt", lambda *a, **k: None)
    res = solve_nuclear(cons)
    assert res.status == "optimal" and res.solver in ("direct-clarabel", "direct-scs")
    assert "direct primal-dual certificate" in res.message


def test_feasibility_read_from_the_frobenius_answer_gives_the_same_answer():
    """``solve_nuclear(cons, frobenius=...)`` skips the second Frobenius QP (E3 solves both
    SVMs of every instance) and returns the same answer, bit for bit, feasible or not."""
    checked = {"optimal": 0, "infeasible": 0}
    for n, T, d in [(15, 15, 4), (10, 15, 5), (5, 15, 3), (15, 15, 10)]:
        for seed in range(4):
            ds = make_dataset(Cell(n=n, T=T, d=d, train=False, seed=seed))
            cons = att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
            alone = solve_nuclear(cons)
            hinted = solve_nuclear(cons, frobenius=solve_frobenius(cons))
            assert (alone.status, alone.solver, alone.message) == (
                hinted.status, hinted.solver, hinted.message
            )  # fmt: skip
            assert alone.objective == hinted.objective or np.isnan(alone.objective)
            assert (alone.W is None) == (hinted.W is None)
            if alone.W is not None:
                assert np.array_equal(alone.W, hinted.W)
            checked[alone.status] = checked.get(alone.status, 0) + 1
    assert checked["optimal"] >= 4 and checked["infeasible"] >= 4
