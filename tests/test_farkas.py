"""Infeasible is certified too (docs/science.md §4, "Infeasible is certified"; issue 31): every
SVM route's "infeasible" is stored only with a Farkas vector checked on every row, and a
solver's bogus "infeasible" is never stored as infeasible."""

from __future__ import annotations

import time

import numpy as np
import pytest

import attnsvm.svm.frobenius as F
import attnsvm.svm.norms as svm_norms
import attnsvm.svm.routes as routes
from attnsvm import codes
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.ntp.svm import solve_ntp_svm
from attnsvm.svm import farkas, min_norm_equality, solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import Constraints, att_svm_constraints
from attnsvm.svm.frobenius_batched import solve_frobenius_batched
from attnsvm.svm.head import head_svm
from attnsvm.tasks.measure import feasible_flag


def _opposite(d: int = 3, seed: int = 0, extra: int = 4) -> Constraints:
    """Two identical rows with opposite labels (``a^T W z >= 1`` and ``-a^T W z >= 1``) among
    ``extra`` random rows: infeasible, with the exact Farkas vector (1/2, 1/2, 0, ...)."""
    rng = np.random.default_rng(seed)
    a, z = rng.standard_normal(d), rng.standard_normal(d)
    left = np.vstack([a, -a, rng.standard_normal((extra, d))])
    right = np.vstack([z, z, rng.standard_normal((extra, d))])
    N = left.shape[0]
    return Constraints(
        left=left, right=right, rhs=np.ones(N), equality=np.zeros(N, bool),
        example=np.arange(N), token=np.zeros(N, int),
    )  # fmt: skip


def _feasible(seed: int = 0) -> Constraints:
    ds = make_dataset(Cell(n=6, T=5, d=8, seed=seed, train=False))
    return att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))


def _certified(cons: Constraints, res) -> None:
    """Status infeasible, no W, and a Farkas vector of these rows passes the check again."""
    assert res.status == "infeasible" and res.W is None, (res.status, res.message)
    assert "Farkas certificate" in res.message, res.message
    y, note = F.certify_infeasible(cons)
    assert y is not None, note
    assert farkas.check(cons, y).certified


# ----------------------------------------------------------------------------- the check
def test_check_accepts_an_exact_certificate_and_rejects_wrong_ones():
    cons = _opposite()
    y = np.zeros(cons.n_rows)
    y[:2] = 1.0
    ok = farkas.check(cons, y)
    assert ok.certified and ok.exact and ok.residual <= 1e-15 and ok.margin == 1.0
    assert not farkas.check(_feasible(), np.ones(_feasible().n_rows)).exact
    assert not farkas.check(cons, -y).certified  # wrong signs on inequality rows
    assert not farkas.check(cons, np.r_[1.0, 0.5, np.zeros(cons.n_rows - 2)]).certified
    assert not farkas.check(cons, np.zeros(cons.n_rows)).certified  # no margin
    assert not farkas.check(cons, np.ones(3)).certified  # wrong length
    # on a feasible system no vector passes: W* meets every row, so rhs^T y <= <G(y), W*>
    feas = _feasible()
    rng = np.random.default_rng(1)
    for _ in range(20):
        assert not farkas.check(feas, rng.random(feas.n_rows)).certified
    # equality rows take free multipliers: W e = 1 and W e = -1 (as equalities) are empty
    eq = Constraints(
        left=np.array([[1.0, 0.0], [1.0, 0.0]]), right=np.array([[1.0, 0.0], [1.0, 0.0]]),
        rhs=np.array([1.0, -1.0]), equality=np.ones(2, bool),
        example=np.zeros(2, int), token=np.zeros(2, int),
    )  # fmt: skip
    assert farkas.check(eq, np.array([1.0, -1.0])).certified
    assert farkas.check(eq, farkas.search(eq.matrix(), eq.rhs, eq.equality)).certified


def test_a_token_equal_to_the_selected_one_is_certified():
    """A zero row (``x_ia = x_it``: the token repeats the selected one, as in real data) makes
    the rows infeasible on its own; the check measures the residual against the rows' median
    norm, not against that zero row (issue 31: config.yaml's b8_real_tokens)."""
    cons = _feasible()
    left = cons.left.copy()
    left[3] = 0.0
    zero = Constraints(left=left, right=cons.right, rhs=cons.rhs, equality=cons.equality,
                       example=cons.example, token=cons.token)  # fmt: skip
    _certified(zero, solve_frobenius(zero))
    y = np.zeros(zero.n_rows)
    y[3] = 1.0
    assert farkas.check(zero, y).certified
    # the same row made tiny instead of zero: still certified, by the tolerance
    left[3] = 1e-14 * cons.left[3]
    tiny = Constraints(left=left, right=cons.right, rhs=cons.rhs, equality=cons.equality,
                       example=cons.example, token=cons.token)  # fmt: skip
    chk = farkas.check(tiny, y)
    assert chk.certified and not chk.exact and chk.residual <= 1e-13


# ----------------------------------------------------------------------------- every route
@pytest.mark.parametrize(
    "route", ["ldp-dual", "clarabel-dual", "osqp-dual", "clarabel-primal", "osqp-primal"]
)
def test_each_frobenius_route_stores_infeasible_with_a_checked_certificate(route):
    cons = _opposite()
    res = F._solve_routes(cons, ((route, F.ROUTES[route]),), time.perf_counter())
    assert res.solver == route
    _certified(cons, res)


def test_default_batched_working_set_nuclear_head_norms_and_ntp_routes_certify(monkeypatch):
    cons = _opposite()
    _certified(cons, solve_frobenius(cons))
    _certified(cons, solve_frobenius_batched([cons, _feasible()], "cpu")[0][0])
    _certified(cons, solve_nuclear(cons))
    for norm in svm_norms.NORMS:
        _certified(cons, svm_norms.solve_norm_svm(cons, norm))
    X = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])  # one token, opposite labels
    v, res = head_svm(X, np.array([1.0, -1.0]), np.array([0, 0]))
    assert v is None and res.status == "infeasible" and "Farkas certificate" in res.message
    # the working set at size: the Farkas vector of its small system, checked on every row
    monkeypatch.setattr(routes, "WORKING_SET_MIN_ROWS", 0)
    monkeypatch.setattr(routes, "DENSE_MAX_BYTES", 0)  # no dense route may decide
    ds = make_dataset(Cell(n=15, T=5, d=1, seed=0))
    big = att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
    res = solve_frobenius(big)
    assert res.solver == "ws-dual" and "working set" in res.message
    assert res.status == "infeasible" and "Farkas certificate" in res.message


def test_ntp_and_inconsistent_equalities_certify():
    # NTP rows: an edge both inside an SCC (== 0) and between SCCs (>= 1) cannot hold
    e = np.eye(3)
    ntp = Constraints(
        left=np.vstack([e[0] - e[1], e[0] - e[1], e[1] - e[2]]), right=np.vstack([e[2]] * 3),
        rhs=np.array([0.0, 1.0, 1.0]), equality=np.array([True, False, False]),
        example=np.full(3, 2), token=np.array([1, 1, 2]),
    )  # fmt: skip
    for norm in ("fro", "nuc"):
        _certified(ntp, solve_ntp_svm(ntp, norm))
    # inconsistent equalities (Gen-SVM W_fin)
    eq = Constraints(
        left=np.array([[1.0, 0.0], [1.0, 0.0]]), right=np.array([[0.0, 1.0], [0.0, 1.0]]),
        rhs=np.array([1.0, 2.0]), equality=np.ones(2, bool),
        example=np.zeros(2, int), token=np.zeros(2, int),
    )  # fmt: skip
    res = min_norm_equality(eq)
    assert res.status == "infeasible" and "Farkas certificate" in res.message
    _certified(eq, solve_frobenius(eq))


# ----------------------------------------------------------------------------- bogus verdicts
def test_a_bogus_infeasible_is_never_stored_as_infeasible(monkeypatch):
    cons = _feasible()
    ref = solve_frobenius(cons)
    assert ref.status == "optimal"

    def liar(c):
        raise F._Infeasible("liar", "claims infeasible", np.ones(c.n_rows))

    # first in line, then the next route certifies the optimum
    monkeypatch.setitem(F.ROUTES, "liar", liar)
    monkeypatch.setattr(routes, "DUAL", ("liar", *routes.DUAL))  # the table reads it
    res = solve_frobenius(cons)
    assert res.status == "optimal" and res.solver != "liar", res.message
    np.testing.assert_allclose(res.W, ref.W, rtol=1e-9, atol=1e-12)
    assert "Farkas vector rejected" in res.message
    # alone: counted apart, neither feasible nor infeasible
    res = F._solve_routes(cons, (("liar", liar),), time.perf_counter())
    assert res.status == "infeasible_uncertified" and res.W is None and not res.solved
    assert np.isnan(feasible_flag(res)) and feasible_flag(ref) == 1.0
    assert codes.encode(res.status, codes.SVM_STATUS) != codes.SVM_STATUS.index("infeasible")
    # a norm SVM whose solver says infeasible on a feasible system
    monkeypatch.setattr(svm_norms, "_solve_cvxpy", lambda c, p: ("infeasible", None, None))
    res = svm_norms.solve_norm_svm(cons, "max")
    assert res.status == "infeasible_uncertified" and res.W is None
    # the nuclear SVM never turns the Frobenius answer's uncertified claim into infeasible
    # (here its structure proves the rows feasible and it solves them)
    frob = F._solve_routes(cons, (("liar", liar),), time.perf_counter())
    assert solve_nuclear(cons, frobenius=frob).status in ("optimal", "infeasible_uncertified")
