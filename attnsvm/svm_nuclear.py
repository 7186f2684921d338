"""Att-SVM_* with the nuclear norm (SCIENCE.md section 4, ``W_mm_*(alpha)``).

``min ||W||_* s.t. left_k^T W right_k >= rhs_k`` (== on equality rows), solved on the reduced
problem ``W = U_l M U_r^T`` (orthonormal bases of span(left rows), span(right rows)): the SDP
shrinks from size 2d to ``r_l + r_r`` and the nuclear norm is preserved (SCIENCE.md section 4).

The SDP needs accuracy (SCIENCE.md section 4: SCS at default tolerances leaves singular values
of 1e-7..1e-5 that corrupt rank counts): Clarabel for small reduced sizes, else SCS with
``eps_abs = eps_rel = 1e-8``; the other solver is tried when the first one fails.
Feasibility is decided first by the exact Frobenius dual (both SVMs share the feasible set).
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np

from attnsvm.constraints import Constraints
from attnsvm.svm_frobenius import (
    VERIFY_TOL,
    SVMResult,
    independent_equalities,
    reduce,
    solve_frobenius,
    violation,
)

#: reduced SDP size ``r_l + r_r`` up to which Clarabel (interior point, exact, slow) is used
CLARABEL_MAX_SIZE = 30
SCS_OPTIONS = dict(eps_abs=1e-8, eps_rel=1e-8, max_iters=200_000, acceleration_lookback=10)
#: relative duality gap that certifies an ``optimal_inaccurate`` SDP answer as optimal
GAP_TOL = 1e-7
CLARABEL_OPTIONS = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)


def nuclear_norm(W: np.ndarray) -> float:
    """``||W||_*``: sum of singular values."""
    return float(np.linalg.svd(W, compute_uv=False).sum())


def _solve_sdp(A_in, b_in, A_eq, b_eq, shape, solver: str):
    """One cvxpy normNuc problem on M (one vector constraint per row type).

    Returns (status, M, multipliers of the inequality rows, multipliers of the equality rows).
    """
    M = cp.Variable(shape)
    m = cp.vec(M, order="C")
    cons = []
    if A_in.shape[0]:
        cons.append(A_in @ m >= b_in)
    if A_eq.shape[0]:
        cons.append(A_eq @ m == b_eq)
    prob = cp.Problem(cp.Minimize(cp.normNuc(M)), cons)
    with warnings.catch_warnings():  # "solution may be inaccurate": the status says so
        warnings.simplefilter("ignore", UserWarning)
        if solver == "clarabel":
            prob.solve(solver=cp.CLARABEL, **CLARABEL_OPTIONS)
        else:
            prob.solve(solver=cp.SCS, **SCS_OPTIONS)
    if M.value is None:
        return str(prob.status), None, None, None
    duals = [np.asarray(c.dual_value, dtype=np.float64).ravel() for c in cons]
    lam = duals.pop(0) if A_in.shape[0] else np.zeros(0)
    mu = duals.pop(0) if A_eq.shape[0] else np.zeros(0)
    return str(prob.status), np.asarray(M.value), lam, mu


def duality_gap(A_in, b_in, A_eq, b_eq, shape, M, lam, mu) -> float:
    """Relative gap between ``||M||_*`` and a certified lower bound (weak duality).

    The dual of ``min ||M||_* s.t. A_in m >= b_in, A_eq m = b_eq`` is
    ``max b_in^T lam + b_eq^T mu s.t. lam >= 0, ||mat(A_in^T lam + A_eq^T mu)||_2 <= 1``; the
    solver's multipliers, clipped to lam >= 0 and scaled to unit spectral norm, are dual
    feasible, so their objective bounds the optimum from below whatever the solver status.
    """
    if lam is None or not (np.all(np.isfinite(lam)) and np.all(np.isfinite(mu))):
        return float("inf")
    lam = np.maximum(lam, 0.0)
    G = (A_in.T @ lam + A_eq.T @ mu).reshape(shape)
    spec = float(np.linalg.norm(G, 2)) if G.size else 0.0
    upper = float(np.linalg.svd(M, compute_uv=False).sum())
    if spec <= 0 or upper <= 0:
        return float("inf")
    lower = float(b_in @ lam + b_eq @ mu) / spec
    return (upper - lower) / upper


def _rescale(cons: Constraints, W: np.ndarray) -> np.ndarray:
    """Scale W up by at most 1e-4 so that tiny inequality violations vanish.

    Valid when every equality rhs is 0 (scaling keeps them); the objective changes by the
    same relative factor, far below the solvers' tolerances.
    """
    if cons.n_rows == 0 or np.any(cons.rhs[cons.equality] != 0):
        return W
    ineq = ~cons.equality & (cons.rhs > 0)
    if not ineq.any():
        return W
    ratio = float(np.min(cons.values(W)[ineq] / cons.rhs[ineq]))
    if 1.0 - 1e-4 < ratio < 1.0:
        return W / ratio
    return W


def solve_nuclear(cons: Constraints) -> SVMResult:
    """Att-SVM_* ``W_mm_* = argmin ||W||_*`` s.t. the constraints (SCIENCE.md section 4).

    Returns the full d x d W. Status ``infeasible`` (W None) when the constraint set is empty
    (decided by the Frobenius dual), ``optimal`` when the SDP solver converged and W satisfies
    the constraints to ``VERIFY_TOL`` (an "inaccurate" solver answer also counts when its
    multipliers certify a relative duality gap <= ``GAP_TOL``), ``optimal_inaccurate``
    otherwise, ``solver_error`` when both SDP solvers failed.
    """
    t0 = time.perf_counter()
    d = cons.d
    if cons.n_rows == 0:
        return SVMResult(np.zeros((d, d)), "optimal", 0.0, "trivial", time.perf_counter() - t0)
    frob = solve_frobenius(cons)
    if frob.status in ("infeasible", "solver_error"):
        return SVMResult(
            None, frob.status, float("nan"), f"frobenius:{frob.solver}",
            time.perf_counter() - t0, frob.message,
        )  # fmt: skip
    red = reduce(cons)
    eq = cons.equality
    A_eq, b_eq, _ = independent_equalities(red.A[eq], cons.rhs[eq])
    A_in, b_in = red.A[~eq], cons.rhs[~eq]
    size = sum(red.shape)
    order = ["clarabel", "scs"] if size <= CLARABEL_MAX_SIZE else ["scs", "clarabel"]
    messages = []
    for solver in order:
        try:
            status, M, lam, mu = _solve_sdp(A_in, b_in, A_eq, b_eq, red.shape, solver)
        except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
            messages.append(f"{solver} raised {type(exc).__name__}: {exc}")
            continue
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            # the Frobenius dual found a feasible W; trust the exact QP over the SDP
            messages.append(f"{solver} reported {status} although the QP is feasible")
            continue
        if M is None or status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            messages.append(f"{solver} status {status}")
            continue
        W = _rescale(cons, red.lift(M))
        viol = violation(cons, W)
        gap = duality_gap(A_in, b_in, A_eq, b_eq, red.shape, red.U_l.T @ W @ red.U_r, lam, mu)
        ok = viol <= VERIFY_TOL and (status == cp.OPTIMAL or gap <= GAP_TOL)
        if viol > VERIFY_TOL:
            messages.append(f"max relative violation {viol:.2e}")
        messages.append(f"{solver} status {status}, certified gap {gap:.1e}")
        messages.append(f"reduced size {red.shape}")
        return SVMResult(
            W, "optimal" if ok else "optimal_inaccurate", nuclear_norm(W),
            f"cvxpy-{solver}", time.perf_counter() - t0, "; ".join(messages),
        )  # fmt: skip
    return SVMResult(
        None, "solver_error", float("nan"), f"cvxpy-{order[0]}", time.perf_counter() - t0,
        "; ".join(messages),
    )  # fmt: skip
