"""The photo tokens' SVMs at n = 32 (docs/science.md §4 "The SVMs at size", §9; issue 28).

Near-duplicate 8x8 photo patches give Att-SVMs with huge answers (``||W_mm||_F`` up to 1e6
for margins of 1): the primal-dual method of :mod:`attnsvm.svm.nuclear_pd` stalls above
``GAP_TOL`` and the least-distance NNLS of the Frobenius SVM mistook them for infeasible, so
they fell through to SCS / OSQP (minutes). The Newton refinement of
:mod:`attnsvm.svm.nuclear_kkt` and the rescaled least-distance problem certify them; each
certificate is recomputed here from the rows, and the answers agree with Clarabel.
"""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.frobenius as svm_frobenius
import attnsvm.svm.nuclear as svm_nuclear
import attnsvm.svm.routes as routes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.frobenius import VERIFY_TOL, violation
from attnsvm.svm.nuclear_kkt import refine_kkt
from attnsvm.tasks.metrics import rank


def photo_rows(n: int, patch: int, positional: bool, seed: int):
    """The Att-SVM rows of the optimal tokens of a b8_real_photos cell (no training)."""
    cell = Cell(generator="photos", n=n, patch=patch, positional=positional, seed=seed, train=False)
    ds = make_dataset(cell)
    return att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))


def nuclear_gap(cons, W: np.ndarray, lam: np.ndarray) -> float:
    """Relative duality gap recomputed from the full rows: ``||W||_*`` against
    ``rhs^T lam / ||sum_k lam_k left_k right_k^T||_2`` (weak duality, lam >= 0)."""
    lam = np.maximum(lam, 0.0)
    G = cons.left.T @ (lam[:, None] * cons.right)
    upper = np.linalg.svd(W, compute_uv=False).sum()
    return float((upper - cons.rhs @ lam / np.linalg.norm(G, 2)) / upper)


def clarabel_nuclear(cons):
    """Clarabel on the direct conic form of the reduced SDP (an independent solver), with its
    answer's certified gap recomputed from the rows: (W, gap)."""
    prob = svm_nuclear._Direct(cons)
    _, x, lam = svm_nuclear._solve_direct(prob, "clarabel")
    W = svm_nuclear._rescale(cons, prob.lift(x))
    return W, nuclear_gap(cons, W, lam)


#: (n, patch, positional, seed) of photo systems whose primal-dual answer misses GAP_TOL
STALLED = [(32, 2, True, 4), (32, 2, True, 6)]


@pytest.mark.parametrize("case", STALLED)
def test_refinement_certifies_what_the_primal_dual_method_does_not(case):
    cons = photo_rows(*case)
    prob = svm_nuclear._Direct(cons)
    status, W0, lam0 = svm_nuclear._solve_primal_dual(prob)
    assert W0 is not None
    W0 = svm_nuclear._rescale(cons, W0)
    assert nuclear_gap(cons, W0, lam0) > svm_nuclear.GAP_TOL  # today's route: no certificate

    M0 = prob.U_l.T @ W0 @ prob.U_r
    res = refine_kkt(prob.a, cons.right @ prob.U_r, cons.rhs, M0, lam0)
    assert res is not None
    W = svm_nuclear._rescale(cons, prob.U_l @ res.M @ prob.U_r.T)
    assert violation(cons, W) <= VERIFY_TOL
    assert cons.values(W).min() >= 1 - 1e-9
    assert np.all(res.lam >= 0)
    assert nuclear_gap(cons, W, res.lam) <= svm_nuclear.GAP_TOL

    out = solve_nuclear(cons)
    assert out.status == "optimal" and out.solver == "direct-primal-dual+kkt", out.message
    # Clarabel's answer is certified to within GAP_TOL (its own status may say inaccurate):
    # the optimum lies in [(1 - gap) ||W_ref||_*, ||W_ref||_*], and so must the refined one
    W_ref, gap_ref = clarabel_nuclear(cons)
    assert violation(cons, W_ref) <= VERIFY_TOL and gap_ref <= svm_nuclear.GAP_TOL
    obj_ref = svm_nuclear.nuclear_norm(W_ref)
    assert (1 - gap_ref) * obj_ref <= out.objective <= obj_ref * (1 + 1e-12)
    assert rank(out.W) == rank(W_ref)


def test_refinement_agrees_where_the_primal_dual_method_certifies():
    """Started from a certified primal-dual pair, the refinement lands on the same optimum
    (objective within the primal-dual pair's certified gap, same rank) with a smaller gap."""
    cons = photo_rows(32, 4, False, 0)
    prob = svm_nuclear._Direct(cons)
    _, W0, lam0 = svm_nuclear._solve_primal_dual(prob)
    W0 = svm_nuclear._rescale(cons, W0)
    gap0 = nuclear_gap(cons, W0, lam0)
    assert gap0 <= svm_nuclear.GAP_TOL
    res = refine_kkt(prob.a, cons.right @ prob.U_r, cons.rhs, prob.U_l.T @ W0 @ prob.U_r, lam0)
    W = svm_nuclear._rescale(cons, prob.U_l @ res.M @ prob.U_r.T)
    assert violation(cons, W) <= VERIFY_TOL
    assert nuclear_gap(cons, W, res.lam) <= gap0
    obj0 = svm_nuclear.nuclear_norm(W0)
    assert (1 - gap0) * obj0 <= svm_nuclear.nuclear_norm(W) <= obj0 * (1 + 1e-12)
    assert rank(W) == rank(W0)


def test_refinement_declines_what_it_cannot_use():
    A, B = np.ones((2, 2)), np.ones((2, 2))
    M, lam = np.eye(2), np.ones(2)
    assert refine_kkt(A, B, np.array([1.0, 0.0]), M, lam) is None  # rhs must be > 0
    assert refine_kkt(A, B, np.ones(2), M, np.zeros(2)) is None  # G = 0: no tight direction
    assert refine_kkt(A, B, np.ones(2), np.full((2, 2), np.nan), lam) is None


def test_huge_frobenius_answer_is_not_taken_for_infeasible():
    """||W_mm||_F ~ 7e4: the least-distance NNLS reads h^T u ~ 1 - 1e-10 as a Farkas vector;
    the rescaled problem certifies the answer (as OSQP took ~45 s to fail before)."""
    cons = photo_rows(32, 2, False, 1)
    red = svm_frobenius.reduce(cons)
    lam, bound, _ = svm_frobenius._least_distance(red.A, cons.rhs)
    assert lam is None and 1e4 < bound < svm_frobenius.LDP_INFEASIBLE_NORM
    res = solve_frobenius(cons)
    assert res.status == "optimal" and res.solver == "ldp-dual", res.message
    assert "least distance rescaled" in res.message
    primal = tuple((r, svm_frobenius.ROUTES[r]) for r in ("clarabel-primal", "osqp-primal"))
    ref = svm_frobenius._solve_routes(cons, primal, 0.0)
    assert ref.status == "optimal" and ref.solver == "clarabel-primal"
    assert res.objective == pytest.approx(ref.objective, rel=1e-8)
    assert res.objective > 1e4


def test_an_uncertified_refinement_hands_over_to_the_conic_route(monkeypatch):
    """A refined pair that misses the certificate is not accepted: Clarabel answers."""
    cons = photo_rows(*STALLED[1])
    real = svm_nuclear.refine_kkt

    def off(*args, **kwargs):
        res = real(*args, **kwargs)
        res.M = 1.01 * res.M  # feasible, but 1% above the optimum: gap ~1e-2
        return res

    monkeypatch.setattr(svm_nuclear, "refine_kkt", off)
    monkeypatch.setattr(routes, "CLARABEL_MAX_SIZE", 10**9)  # Clarabel before SCS
    out = solve_nuclear(cons)
    assert out.solver == "direct-clarabel" and out.status == "optimal", out.message
    assert "direct primal-dual+kkt refined: violation" in out.message
