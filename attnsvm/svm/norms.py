"""Attention SVMs in other norms: max-entry, spectral and entrywise l_p (docs/science.md §10).

``min ||W|| s.t. left_k^T W right_k >= rhs_k`` (== on equality rows), the constraint rows of
the Frobenius Att-SVM (:mod:`attnsvm.svm.constraints`) with another norm:

* ``max``: the largest entry ``max_ij |W_ij|`` (an LP),
* ``spec``: the spectral norm ``sigma_max(W)`` (an SDP),
* ``l1p5``, ``l3``: the entrywise ``l_p`` norm, p = 1.5, 3 (power cones).

The max-margin solutions of sign descent / Adam, spectral descent and l_p mirror descent on a
linear model (docs/science.md §10). Each is solved by cvxpy with Clarabel (interior point) on
the full d x d variable (entrywise norms are not invariant under the orthonormal reduction of
:mod:`attnsvm.svm.frobenius`). Status and certificate follow the Frobenius and nuclear SVMs
(issue 12): the answer is scaled onto the feasible set (its tightest row made exact), every row
is checked (relative violation <= ``VERIFY_TOL``), and the solver's multipliers give a
weak-duality lower bound ``rhs^T lam / ||G(lam)||_dual`` with ``G(lam) = sum_k lam_k left_k
right_k^T`` (dual norms: entrywise l_1, nuclear, l_q); ``optimal`` needs a relative gap of at
most ``GAP_TOL``, else ``optimal_inaccurate``.

The max-entry and spectral SVMs need not have a unique solution (their unit balls have flat
faces): :func:`margin_ratio` measures how close a direction is to the optimal margin, which
does not depend on which solution the solver returned. For the spectral SVM the optimal face
is wide enough that a correlation with the returned solution says more about the solver than
about the direction (:data:`WIDE_FACE`): only its margin ratio is stored.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import (
    VERIFY_TOL,
    SVMResult,
    certify_infeasible,
    scale_onto,
    violation,
)

#: the norms of this module: name -> (p of the entrywise norm, or "spec"), description
NORMS: dict[str, float | str] = {"max": np.inf, "spec": "spec", "l1p5": 1.5, "l3": 3.0}
#: the norms whose SVM's optimal face is wide (issue 29): the spectral ball's flat faces make
#: the set of optimal W large, so the correlation of a direction with the one solution the
#: solver returns depends on the solver; for these only :func:`margin_ratio` is stored, which
#: is the same for every optimal solution (docs/store.md)
WIDE_FACE: tuple[str, ...] = ("spec",)
#: the norms :func:`matrix_norm` also knows (the Frobenius and nuclear SVMs' own)
_ALSO = {"fro": 2.0, "nuc": "nuc"}
#: relative duality gap an ``optimal`` answer must certify (Clarabel reaches ~1e-9 here)
GAP_TOL = 1e-6
CLARABEL_OPTIONS = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)


def _check(norm: str, also: bool = False) -> float | str:
    known = {**NORMS, **_ALSO} if also else NORMS
    if norm not in known:
        raise ValueError(f"norm must be one of {', '.join(known)}, got {norm!r}")
    return known[norm]


def matrix_norm(W: np.ndarray, norm: str) -> float:
    """``||W||`` in ``norm`` (a name of :data:`NORMS`, or fro / nuc)."""
    p = _check(norm, also=True)
    W = np.asarray(W, dtype=np.float64)
    if p == "nuc":
        return float(np.linalg.svd(W, compute_uv=False).sum())
    if p == "spec":
        return float(np.linalg.norm(W, 2))
    return float(np.linalg.norm(W.ravel(), p))


def dual_norm(G: np.ndarray, norm: str) -> float:
    """``||G||`` in the dual norm of ``norm``: entrywise l_1, nuclear, or l_q (1/p + 1/q = 1)."""
    p = _check(norm)
    G = np.asarray(G, dtype=np.float64)
    if p == "spec":
        return float(np.linalg.svd(G, compute_uv=False).sum())
    q = 1.0 if p == np.inf else p / (p - 1.0)
    return float(np.linalg.norm(G.ravel(), q))


def lower_bound(cons: Constraints, lam: np.ndarray | None, norm: str) -> float:
    """Weak-duality bound ``rhs^T lam / ||G(lam)||_dual`` (lam clipped >= 0 on inequality
    rows): for every feasible W, ``rhs^T lam <= <G, W> <= ||G||_dual ||W||``."""
    if lam is None or lam.shape != (cons.n_rows,) or not np.all(np.isfinite(lam)):
        return -np.inf
    lam = np.where(cons.equality, lam, np.maximum(lam, 0.0))
    g = dual_norm(cons.left.T @ (lam[:, None] * cons.right), norm)
    return float(cons.rhs @ lam) / g if g > 0 else -np.inf


def _objective(cp, W, p):
    if p == "spec":
        return cp.sigma_max(W)
    return cp.max(cp.abs(W)) if p == np.inf else cp.pnorm(cp.vec(W, order="C"), p)


def _solve_cvxpy(cons: Constraints, p) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    import cvxpy as cp  # imported when needed (~1 s)

    d = cons.d
    W = cp.Variable((d, d))
    A = cons.matrix()
    w = cp.vec(W, order="C")
    parts, rows = [], []
    for eq in (False, True):
        sel = cons.equality == eq
        if sel.any():
            expr = A[sel] @ w
            parts.append(expr == cons.rhs[sel] if eq else expr >= cons.rhs[sel])
            rows.append(np.flatnonzero(sel))
    prob = cp.Problem(cp.Minimize(_objective(cp, W, p)), parts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL, **CLARABEL_OPTIONS)
    if W.value is None:
        return str(prob.status), None, None
    lam = np.zeros(cons.n_rows)
    for c, r in zip(parts, rows, strict=True):
        dual = np.asarray(c.dual_value, dtype=np.float64).ravel()
        lam[r] = -dual if cons.equality[r[0]] else dual  # cvxpy: nu^T (A w - b) on ==
    return str(prob.status), np.asarray(W.value, dtype=np.float64), lam


def solve_norm_svm(cons: Constraints, norm: str) -> SVMResult:
    """``min ||W||_norm`` over the Att-SVM rows ``cons`` (docs/science.md §10), certified.

    Returns an :class:`attnsvm.svm.frobenius.SVMResult` whose ``objective`` is the norm of W;
    ``optimal`` only with every row within ``VERIFY_TOL`` and a certified gap <= ``GAP_TOL``.
    """
    p = _check(norm)
    t0 = time.perf_counter()
    solver = f"cvxpy-clarabel-{norm}"
    try:
        status, W, lam = _solve_cvxpy(cons, p)
    except Exception as exc:  # noqa: BLE001 - a solver failure is a status, not a crash
        return SVMResult(None, "solver_error", np.nan, solver, time.perf_counter() - t0, repr(exc))
    if W is None:
        if not status.startswith("infeasible"):
            return SVMResult(None, "solver_error", np.nan, solver, time.perf_counter() - t0, status)
        # the rows, not the norm, decide feasibility: the same Farkas vector certifies it
        y, note = certify_infeasible(cons)
        kind = "infeasible" if y is not None else "infeasible_uncertified"
        return SVMResult(None, kind, np.nan, solver, time.perf_counter() - t0, f"{status}; {note}")
    W = scale_onto(cons, W)
    obj, viol = matrix_norm(W, norm), violation(cons, W)
    lb = lower_bound(cons, lam, norm)
    gap = 0.0 if obj == 0 else ((obj - lb) / obj if np.isfinite(lb) else np.inf)
    ok = viol <= VERIFY_TOL and gap <= GAP_TOL
    msg = f"{status}; violation {viol:.2e}, certified gap {gap:.2e}"
    st = "optimal" if ok else "optimal_inaccurate"
    return SVMResult(W, st, obj, solver, time.perf_counter() - t0, msg)


def svm_solver(norm: str):
    """``solve_norm_svm`` for one norm, a named module-level function (the key of
    :class:`attnsvm.tasks.cache.SolveCache` is the solver's qualified name)."""
    _check(norm)
    return _SOLVERS[norm]


def _solve_max(cons: Constraints) -> SVMResult:
    return solve_norm_svm(cons, "max")


def _solve_spec(cons: Constraints) -> SVMResult:
    return solve_norm_svm(cons, "spec")


def _solve_l1p5(cons: Constraints) -> SVMResult:
    return solve_norm_svm(cons, "l1p5")


def _solve_l3(cons: Constraints) -> SVMResult:
    return solve_norm_svm(cons, "l3")


_SOLVERS = {"max": _solve_max, "spec": _solve_spec, "l1p5": _solve_l1p5, "l3": _solve_l3}


def margin_ratio(cons: Constraints, W: np.ndarray, norm: str, optimum: float) -> float:
    """``min_k (left_k^T W right_k / rhs_k) / ||W||_norm * optimum`` over the inequality rows:
    the margin of W's direction in ``norm`` relative to the SVM's (1 iff ``W`` scaled is an
    optimal solution, whichever one; <= 1 otherwise). NaN when undefined."""
    ineq = ~cons.equality
    nrm = matrix_norm(W, norm)
    if not ineq.any() or nrm == 0 or not np.isfinite(optimum):
        return float("nan")
    return float(np.min(cons.values(W)[ineq] / cons.rhs[ineq]) / nrm * optimum)
