"""Att-SVM with the Frobenius norm (SCIENCE.md section 4, ``W_mm(alpha)``), solved exactly.

``min ||W||_F s.t. left_k^T W right_k >= rhs_k`` (and ``== rhs_k`` on equality rows).

* Inequality rows only: the dual QP (SCIENCE.md section 4, "its dual is a QP in n(T-1)
  variables") ``min_lambda>=0 1/2 lambda^T G lambda - rhs^T lambda`` with
  ``G_kl = <left_k, left_l> <right_k, right_l>`` and ``W = sum_k lambda_k left_k right_k^T``,
  solved with Clarabel's Python API (no modelling layer). An infeasible SVM is an unbounded
  dual (Clarabel: DualInfeasible).
* With equality rows (Gen-SVM): the primal in reduced coordinates ``W = U_l M U_r^T``
  (orthonormal bases of span(left rows) and span(right rows); SCIENCE.md section 4), with
  a zero cone for the equalities and a nonnegative cone for the inequalities.

On a Clarabel error the same problem is retried with OSQP (high accuracy, polishing) before
``solver_error`` is reported. Every returned W is checked against the constraints.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import clarabel
import numpy as np
import osqp
import scipy.sparse as sp
from scipy.linalg import lapack
from scipy.optimize import nnls

from attnsvm.constraints import Constraints

STATUSES = ("optimal", "optimal_inaccurate", "infeasible", "solver_error")
#: relative tolerance of the feasibility check of a returned W (``optimal`` needs it)
VERIFY_TOL = 1e-6
#: Clarabel tolerances of the QPs (defaults are 1e-8)
CLARABEL_TOL = 1e-10
#: use the reduced primal for inequality-only systems when d * d * PRIMAL_RATIO <= N
PRIMAL_RATIO = 4
#: relative singular-value cut when building the orthonormal bases of the reduction
BASIS_TOL = 1e-10
#: smallest Cholesky pivot of the dual Gram matrix, relative to the largest, for the NNLS route
NNLS_MIN_PIVOT = 1e-7


@dataclass(frozen=True)
class SVMResult:
    """Result of one SVM solve.

    ``W`` is None when the SVM is infeasible or the solvers failed (never a rank-1 stand-in,
    SCIENCE.md section 7); ``objective`` is ``||W||_F`` or ``||W||_*`` (NaN without W).
    """

    W: np.ndarray | None
    status: str
    objective: float
    solver: str
    seconds: float
    message: str = ""

    @property
    def feasible(self) -> bool:
        """Whether a solution W was returned."""
        return self.W is not None


# ----------------------------------------------------------------------------- helpers
def orthonormal_basis(rows: np.ndarray, tol: float = BASIS_TOL) -> np.ndarray:
    """Orthonormal basis (d, r) of the span of the rows of ``rows`` (N, d), via SVD."""
    if rows.shape[0] == 0:
        return np.zeros((rows.shape[1], 0))
    _, s, vt = np.linalg.svd(rows, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return np.zeros((rows.shape[1], 0))
    r = int(np.sum(s > tol * s[0]))
    return vt[:r].T.copy()


@dataclass(frozen=True)
class Reduced:
    """Reduced problem ``W = U_l M U_r^T``: ``A`` (N, r_l*r_r) acts on ``vec(M)`` (row-major)."""

    U_l: np.ndarray
    U_r: np.ndarray
    A: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.U_l.shape[1], self.U_r.shape[1]

    def lift(self, m: np.ndarray) -> np.ndarray:
        """Full (d, d) W from the reduced vec(M)."""
        return self.U_l @ np.asarray(m).reshape(self.shape) @ self.U_r.T


def reduce(cons: Constraints) -> Reduced:
    """Restrict W to span(left rows) x span(right rows) (SCIENCE.md section 4).

    Both ``||.||_F`` and ``||.||_*`` are preserved, and projecting any feasible W onto the
    subspaces keeps it feasible and does not increase either norm.
    """
    U_l, U_r = orthonormal_basis(cons.left), orthonormal_basis(cons.right)
    a, b = cons.left @ U_l, cons.right @ U_r
    A = (a[:, :, None] * b[:, None, :]).reshape(cons.n_rows, -1)
    return Reduced(U_l, U_r, A)


def violation(cons: Constraints, W: np.ndarray) -> float:
    """Largest relative constraint violation of W (0 when feasible)."""
    if cons.n_rows == 0:
        return 0.0
    v, b = cons.values(W), cons.rhs
    scale = np.maximum(1.0, np.abs(b))
    viol = np.where(cons.equality, np.abs(v - b), np.maximum(b - v, 0.0)) / scale
    return float(viol.max())


def _result(W, status, objective, solver, t0, message="") -> SVMResult:
    return SVMResult(W, status, float(objective), solver, time.perf_counter() - t0, message)


def _infeasible(solver: str, t0: float, message: str) -> SVMResult:
    return _result(None, "infeasible", np.nan, solver, t0, message)


def _finish(cons: Constraints, W: np.ndarray, ok: bool, solver: str, t0: float, msg: str = ""):
    """Verify W against the constraints; ``optimal`` needs solver success and feasibility."""
    viol = violation(cons, W)
    status = "optimal" if ok and viol <= VERIFY_TOL else "optimal_inaccurate"
    if viol > VERIFY_TOL:
        msg = (msg + "; " if msg else "") + f"max relative violation {viol:.2e}"
    return _result(W, status, np.linalg.norm(W), solver, t0, msg)


def _clarabel_settings() -> clarabel.DefaultSettings:
    s = clarabel.DefaultSettings()
    s.verbose = False
    s.tol_gap_abs = s.tol_gap_rel = s.tol_feas = CLARABEL_TOL
    s.tol_ktratio = 1e-8
    s.max_iter = 500
    return s


def _osqp_solve(P, q, A, lo, hi):
    """OSQP at high accuracy with polishing; returns (status string, x)."""
    prob = osqp.OSQP()
    kw = dict(verbose=False, eps_abs=1e-10, eps_rel=1e-10, max_iter=200_000)
    kw["eps_prim_inf"] = kw["eps_dual_inf"] = 1e-9
    try:
        prob.setup(P, q, A, lo, hi, polishing=True, **kw)
    except (TypeError, ValueError):  # osqp < 1.0 calls the option "polish"
        prob = osqp.OSQP()
        prob.setup(P, q, A, lo, hi, polish=True, **kw)
    try:
        res = prob.solve(raise_error=False)
    except TypeError:  # osqp < 1.0 has no raise_error
        res = prob.solve()
    return str(res.info.status), res.x


_SOLVED = ("Solved",)
_ALMOST = ("AlmostSolved",)


# ----------------------------------------------------------------------------- dual QP
def gram(cons: Constraints) -> np.ndarray:
    """Dual Gram matrix ``G_kl = <left_k, left_l> <right_k, right_l>`` (SCIENCE.md section 4)."""
    return (cons.left @ cons.left.T) * (cons.right @ cons.right.T)


def _lift_dual(cons: Constraints, lam: np.ndarray) -> np.ndarray:
    return cons.left.T @ (lam[:, None] * cons.right)


def _polish_dual(cons: Constraints, G: np.ndarray, lam: np.ndarray) -> np.ndarray | None:
    """Active-set refinement: solve the equality system on the support of lambda exactly.

    Returns W if the result satisfies the KKT conditions (multipliers >= 0, all constraints
    feasible) to 1e-9, else None.
    """
    if lam is None or not np.all(np.isfinite(lam)) or lam.max() <= 0:
        return None
    S = lam > 1e-7 * lam.max()
    mu = np.linalg.lstsq(G[np.ix_(S, S)], cons.rhs[S], rcond=None)[0]
    if mu.min() < -1e-9 * max(1.0, mu.max()):
        return None
    full = np.zeros_like(lam)
    full[S] = np.maximum(mu, 0.0)
    W = _lift_dual(cons, full)
    return W if violation(cons, W) <= 1e-9 else None


def _nnls_dual(G: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The dual QP ``min 1/2 lam^T G lam - b^T lam, lam >= 0`` as non-negative least squares.

    With ``G = L L^T`` (Cholesky) the objective is ``1/2 ||L^T lam - L^{-1} b||^2`` + const,
    which scipy's Lawson-Hanson active set solves exactly in ~0.1 ms at the paper's sizes
    (an interior-point QP costs ~1.4 ms). None when G is not numerically positive definite
    (more rows than the lifted space has dimensions): the conic solvers handle that case.
    """
    L, info = lapack.dpotrf(G, lower=1)
    if info != 0:
        return None
    diag = np.abs(np.diagonal(L))
    if diag.min() <= NNLS_MIN_PIVOT * diag.max():
        return None
    rhs = lapack.dtrtrs(L, b, lower=1)[0]
    try:
        lam, _ = nnls(L.T, rhs, maxiter=50 * G.shape[0])
    except RuntimeError:  # iteration limit
        return None
    return lam


def _solve_dual(cons: Constraints, t0: float) -> SVMResult:
    G = gram(cons)
    b = cons.rhs
    N = cons.n_rows
    lam = _nnls_dual(G, b)
    if lam is not None:
        W = _polish_dual(cons, G, lam)
        if W is not None:
            return _finish(cons, W, True, "nnls-dual", t0, "scipy nnls, polished")
    P = sp.csc_matrix(np.triu(G))
    q = -b
    msg = ""
    try:
        solver = clarabel.DefaultSolver(
            P, q, -sp.identity(N, format="csc"), np.zeros(N),
            [clarabel.NonnegativeConeT(N)], _clarabel_settings(),
        )  # fmt: skip
        sol = solver.solve()
        status = str(sol.status).split(".")[-1]
        if status in ("DualInfeasible", "AlmostDualInfeasible"):
            return _infeasible("clarabel-dual", t0, f"dual unbounded ({status})")
        lam = np.asarray(sol.x)
        if status in _SOLVED + _ALMOST or status in ("InsufficientProgress", "MaxIterations"):
            W = _polish_dual(cons, G, lam)
            if W is not None:
                return _finish(cons, W, True, "clarabel-dual", t0, f"clarabel {status}, polished")
            if status in _SOLVED + _ALMOST:
                W = _lift_dual(cons, np.maximum(lam, 0.0))
                return _finish(cons, W, status in _SOLVED, "clarabel-dual", t0, status)
        msg = f"clarabel status {status}"
    except Exception as exc:  # noqa: BLE001 - any solver failure triggers the OSQP retry
        msg = f"clarabel raised {type(exc).__name__}: {exc}"
    # ---- OSQP retry
    try:
        status, lam = _osqp_solve(
            P, q, sp.identity(N, format="csc"), np.zeros(N), np.full(N, np.inf)
        )
        if status.startswith("dual infeasible"):
            return _infeasible("osqp-dual", t0, f"{msg}; osqp: dual unbounded ({status})")
        lam = np.asarray(lam, dtype=np.float64)
        W = _polish_dual(cons, G, lam)
        if W is not None:
            return _finish(cons, W, True, "osqp-dual", t0, f"{msg}; osqp {status}, polished")
        if status.startswith("solved"):
            W = _lift_dual(cons, np.maximum(lam, 0.0))
            return _finish(cons, W, status == "solved", "osqp-dual", t0, f"{msg}; osqp {status}")
        msg += f"; osqp status {status}"
    except Exception as exc:  # noqa: BLE001
        msg += f"; osqp raised {type(exc).__name__}: {exc}"
    return _result(None, "solver_error", np.nan, "clarabel-dual", t0, msg)


# ----------------------------------------------------------------------------- primal
def independent_equalities(
    A_eq: np.ndarray, b_eq: np.ndarray, tol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray, float]:
    """Replace ``A_eq m = b_eq`` by an equivalent full-row-rank system (SVD).

    Returns ``(A', b', inconsistency)`` where inconsistency is the relative norm of the part of
    b_eq outside range(A_eq) (> ~1e-8 means the equalities have no solution).
    """
    if A_eq.shape[0] == 0:
        return A_eq, b_eq, 0.0
    U, s, Vt = np.linalg.svd(A_eq, full_matrices=False)
    r = int(np.sum(s > tol * s[0])) if s.size and s[0] > 0 else 0
    c = U.T @ b_eq
    resid = np.linalg.norm(b_eq - U[:, :r] @ c[:r]) / max(1.0, np.linalg.norm(b_eq))
    return s[:r, None] * Vt[:r], c[:r], float(resid)


def _solve_primal_reduced(cons: Constraints, t0: float) -> SVMResult:
    red = reduce(cons)
    eq = cons.equality
    A_eq, b_eq, resid = independent_equalities(red.A[eq], cons.rhs[eq])
    if resid > 1e-8:
        return _infeasible("clarabel-primal", t0, f"inconsistent equalities (residual {resid:.1e})")
    A_in, b_in = red.A[~eq], cons.rhs[~eq]
    p = red.A.shape[1]
    P = sp.identity(p, format="csc")
    q = np.zeros(p)
    msg = ""
    try:
        A = sp.csc_matrix(np.vstack([A_eq, -A_in]))
        b = np.concatenate([b_eq, -b_in])
        cones = []
        if A_eq.shape[0]:
            cones.append(clarabel.ZeroConeT(A_eq.shape[0]))
        if A_in.shape[0]:
            cones.append(clarabel.NonnegativeConeT(A_in.shape[0]))
        sol = clarabel.DefaultSolver(P, q, A, b, cones, _clarabel_settings()).solve()
        status = str(sol.status).split(".")[-1]
        if status in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
            return _infeasible("clarabel-primal", t0, f"primal infeasible ({status})")
        if status in _SOLVED + _ALMOST:
            W = red.lift(np.asarray(sol.x))
            return _finish(cons, W, status in _SOLVED, "clarabel-primal", t0, status)
        msg = f"clarabel status {status}"
    except Exception as exc:  # noqa: BLE001
        msg = f"clarabel raised {type(exc).__name__}: {exc}"
    try:
        A = sp.csc_matrix(np.vstack([A_eq, A_in]))
        lo = np.concatenate([b_eq, b_in])
        hi = np.concatenate([b_eq, np.full(b_in.size, np.inf)])
        status, x = _osqp_solve(P, q, A, lo, hi)
        if status.startswith("primal infeasible"):
            return _infeasible("osqp-primal", t0, f"{msg}; osqp: {status}")
        if status.startswith("solved"):
            W = red.lift(np.asarray(x))
            return _finish(cons, W, status == "solved", "osqp-primal", t0, f"{msg}; {status}")
        msg += f"; osqp status {status}"
    except Exception as exc:  # noqa: BLE001
        msg += f"; osqp raised {type(exc).__name__}: {exc}"
    return _result(None, "solver_error", np.nan, "clarabel-primal", t0, msg)


def solve_frobenius(cons: Constraints) -> SVMResult:
    """Att-SVM ``W_mm = argmin ||W||_F`` s.t. the constraints (SCIENCE.md section 4).

    Inequality-only systems go through the dual QP (N variables), unless the primal has at
    most N / ``PRIMAL_RATIO`` variables (d^2; small d and many rows, e.g. sequence constraints
    with N = n T (T-1)); systems with equality rows (Gen-SVM ``W_mm_gen``) always go through
    the reduced primal. Status ``infeasible`` (W None) is a result
    about the data; ``optimal`` means the solver converged and W satisfies every constraint
    to a relative ``VERIFY_TOL``; ``optimal_inaccurate`` flags a W that does not.
    """
    t0 = time.perf_counter()
    if cons.n_rows == 0:
        return _result(np.zeros((cons.d, cons.d)), "optimal", 0.0, "trivial", t0)
    if cons.equality.any():
        return _solve_primal_reduced(cons, t0)
    if PRIMAL_RATIO * cons.d**2 <= cons.n_rows:
        return _solve_primal_reduced(cons, t0)
    return _solve_dual(cons, t0)
