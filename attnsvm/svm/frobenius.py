"""Att-SVM with the Frobenius norm (docs/science.md §4, ``W_mm(alpha)``), solved exactly.

The paper's (Att-SVM) (arXiv 2308.16898): the hard-margin SVM whose solution is the limit
direction of GD on W (the paper's ``W^mm_alpha``).

``min ||W||_F s.t. left_k^T W right_k >= rhs_k`` (and ``== rhs_k`` on equality rows).

* Inequality rows only: the dual QP (docs/science.md §4, "its dual is a QP in n(T-1)
  variables") ``min_lambda>=0 1/2 lambda^T G lambda - rhs^T lambda`` with
  ``G_kl = <left_k, left_l> <right_k, right_l>`` and ``W = sum_k lambda_k left_k right_k^T``,
  solved by scipy's NNLS on the Cholesky factor of G when G is positive definite, else as a
  least-distance problem on the reduced rows (Lawson and Hanson's LDP, again one NNLS; an
  infeasible SVM then shows as a Farkas certificate), else with Clarabel's Python API (no
  modelling layer; an infeasible SVM is an unbounded dual, Clarabel: DualInfeasible).
* With equality rows (Gen-SVM): the primal in reduced coordinates ``W = U_l M U_r^T``
  (orthonormal bases of span(left rows) and span(right rows); docs/science.md §4), with
  a zero cone for the equalities and a nonnegative cone for the inequalities.

On a Clarabel error the same problem is retried with OSQP (high accuracy, polishing) before
``solver_error`` is reported.

An answer is ``optimal`` only with a certificate (issue 12): W satisfies every constraint to
``VERIFY_TOL`` relative (inequality-only systems are scaled up onto the feasible set, which is
exact for positive right-hand sides), and multipliers ``lam >= 0`` (free on equalities) give a
weak-duality lower bound ``(rhs^T lam) / ||sum_k lam_k left_k right_k^T||_F <= ||W_mm||_F``
within ``GAP_TOL`` relative of ``||W||_F``. A route whose answer misses the certificate is
polished on its active set (the equality system of the active rows, solved exactly, with its
multipliers checked for sign: the KKT conditions); if that fails too, the next route runs (dual
QP -> reduced primal with Clarabel -> reduced primal with OSQP). Nearly infeasible instances
(margins of 1e-5 and below, ``||W_mm||`` of 1e5) are where the routes disagree. If no route
certifies its answer, the best one is returned as ``optimal_inaccurate``, which every metric,
summary and figure treats as "not solved". ``SVMResult.solver`` names the route that produced
the answer; ``SVMResult.message`` records the routes tried and the certified gap.

An answer is ``infeasible`` only with a Farkas vector checked on every row
(:mod:`attnsvm.svm.farkas`, docs/science.md §4 "Infeasible is certified"); a route's claim
without one hands over to the next route, and without any certified answer the status is
``infeasible_uncertified`` (not solved, counted apart).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import clarabel
import numpy as np
import osqp
import scipy.sparse as sp
from scipy.linalg import lapack
from scipy.optimize import lsq_linear, nnls

import attnsvm.svm.farkas as farkas
import attnsvm.svm.routes as R
from attnsvm.svm.constraints import Constraints

STATUSES = (
    "optimal", "optimal_inaccurate", "infeasible", "solver_error", "infeasible_uncertified",
)  # fmt: skip
#: relative tolerance of the feasibility check of a returned W (``optimal`` needs it; issue 12)
VERIFY_TOL = 1e-9
#: relative duality gap ``(||W|| - lower bound) / ||W||`` an ``optimal`` answer must certify
GAP_TOL = 1e-8
#: Clarabel tolerances of the QPs (defaults are 1e-8)
CLARABEL_TOL = 1e-10
#: relative singular-value cut when building the orthonormal bases of the reduction
BASIS_TOL = 1e-10
#: smallest Cholesky pivot of the dual Gram matrix, relative to the largest, for the NNLS route
NNLS_MIN_PIVOT = 1e-7
#: least-distance route: infeasibility is reported only when the Farkas certificate shows that
#: every feasible W would need a norm above this (else the conic routes decide)
LDP_INFEASIBLE_NORM = 1e12
#: rows of the first working set: the N / WS_START_SHARE rows hardest to satisfy alone
#: (largest ``rhs_k / ||left_k|| ||right_k||``), at least WS_MIN_ADD
WS_START_SHARE = 32
#: rows added per round: the most violated, WS_GROW times the support (at least WS_MIN_ADD)
WS_GROW, WS_MIN_ADD = 0.5, 256
#: largest working set: the rank bound r = rank(left) * rank(right) of the lifted rows plus
#: min(r, WS_MIN_ADD) (a support has at most r rows; past r the Gram matrix of the working
#: set is singular and the least-distance problem on it takes over from the pivoting)
#: rounds of the working set, and pivots of each round's block principal pivoting
WS_MAX_ROUNDS, WS_MAX_PIVOTS = 100, 200
#: relative violation below which a row outside the working set counts as satisfied (the
#: certificate then checks every row to ``VERIFY_TOL``)
WS_TOL = 1e-11
#: relative sign tolerance of the pivoting (as attnsvm.svm.frobenius_batched.PIVOT_TOL)
WS_PIVOT_TOL = 1e-12


@dataclass(frozen=True)
class SVMResult:
    """Result of one SVM solve.

    ``W`` is None when the SVM is infeasible or the solvers failed (never a rank-1 stand-in,
    docs/science.md §7); ``objective`` is ``||W||_F`` or ``||W||_*`` (NaN without W).
    """

    W: np.ndarray | None
    status: str
    objective: float
    solver: str
    seconds: float
    message: str = ""

    @property
    def feasible(self) -> bool:
        """Whether a solution W was returned (``optimal`` or ``optimal_inaccurate``)."""
        return self.W is not None

    @property
    def solved(self) -> bool:
        """Whether W is a certified solution (status ``optimal``): the only answers that count.

        ``optimal_inaccurate`` and ``solver_error`` are "not solved" (neither feasible nor
        infeasible) in every metric, summary and figure (issue 12).
        """
        return self.status == "optimal" and self.W is not None


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
    """Restrict W to span(left rows) x span(right rows) (docs/science.md §4).

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


def _lift_dual(cons: Constraints, lam: np.ndarray) -> np.ndarray:
    """``sum_k lam_k left_k right_k^T`` (d, d)."""
    return cons.left.T @ (lam[:, None] * cons.right)


def _scalable(cons: Constraints) -> bool:
    """Whether scaling W keeps it optimal-shaped: equality rhs 0, inequality rhs > 0."""
    return bool(np.all(cons.rhs[cons.equality] == 0) and np.all(cons.rhs[~cons.equality] > 0))


def scale_onto(cons: Constraints, W: np.ndarray) -> np.ndarray:
    """W scaled so that its tightest inequality row holds with equality (exactly feasible).

    Only for :func:`_scalable` systems (the Att-SVM: every rhs is 1) and a W whose inequality
    rows are all positive; otherwise W is returned unchanged.
    """
    ineq = ~cons.equality
    if cons.n_rows == 0 or not ineq.any() or not _scalable(cons):
        return W
    ratio = float(np.min(cons.values(W)[ineq] / cons.rhs[ineq]))
    return W / ratio if np.isfinite(ratio) and ratio > 0 else W


def lower_bound(cons: Constraints, lam: np.ndarray | None) -> float:
    """Weak-duality lower bound on ``||W_mm||_F`` from multipliers lam (free on equalities).

    For every feasible W, ``rhs^T lam <= <G(lam), W> <= ||G(lam)||_F ||W||_F`` with
    ``G(lam) = sum_k lam_k left_k right_k^T`` and lam >= 0 on inequality rows (clipped here),
    so ``rhs^T lam / ||G(lam)||_F`` bounds the optimum from below. -inf when undefined.
    """
    if lam is None or lam.shape != (cons.n_rows,) or not np.all(np.isfinite(lam)):
        return -np.inf
    lam = np.where(cons.equality, lam, np.maximum(lam, 0.0))
    g = float(np.linalg.norm(_lift_dual(cons, lam)))
    val = float(cons.rhs @ lam)
    return val / g if g > 0 else -np.inf


def certificate(
    cons: Constraints, W: np.ndarray, lam: np.ndarray | None
) -> tuple[np.ndarray, float, float]:
    """``(W scaled onto the feasible set, relative violation, certified relative gap)``.

    The gap is ``(||W||_F - lower_bound) / ||W||_F`` (:func:`lower_bound`); inf without a
    bound. An answer is ``optimal`` iff violation <= ``VERIFY_TOL`` and gap <= ``GAP_TOL``.
    """
    W = scale_onto(cons, W)
    viol = violation(cons, W)
    obj = float(np.linalg.norm(W))
    lb = lower_bound(cons, lam)
    if obj == 0:  # W = 0 is feasible only when it is optimal
        gap = 0.0
    else:
        gap = (obj - lb) / obj if np.isfinite(lb) else np.inf
    return W, viol, float(gap)


#: multipliers above this fraction of the largest one form the support of a canonical answer
CANONICAL_SUPPORT_TOL = 1e-7


def canonical_dual(
    cons: Constraints, lam: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(W, lam)`` solved exactly on the support of ``lam``, the same way whichever route found
    that support (docs/science.md §4, the dual of Att-SVM).

    Routes reach the same support with multipliers that differ in the last bits (scipy's NNLS,
    the batched pivoting of :mod:`attnsvm.svm.frobenius_batched`, whose rounding depends on
    which instances share its batch). Re-solving ``G_SS lam_S = rhs_S`` on that support with
    one Cholesky factorization makes the stored W a function of the constraint rows alone, so
    that a cell gets the same bits however its block was packed. Inequality-only systems;
    None when the support's Gram matrix is not positive definite or a multiplier comes out
    negative (the caller keeps the route's own answer).
    """
    if lam is None or cons.equality.any() or lam.shape != (cons.n_rows,):
        return None
    if not np.all(np.isfinite(lam)) or not lam.max(initial=0.0) > 0:
        return None
    S = lam > CANONICAL_SUPPORT_TOL * lam.max()
    left, right = cons.left[S], cons.right[S]
    L, info = lapack.dpotrf((left @ left.T) * (right @ right.T), lower=1)
    if info != 0:
        return None
    lam_S, info = lapack.dpotrs(L, cons.rhs[S], lower=1)
    if info != 0 or not np.all(lam_S >= 0):
        return None
    full = np.zeros(cons.n_rows)
    full[S] = lam_S
    return _lift_dual(cons, full), full


def certified_canonical(cons: Constraints, lam: np.ndarray | None):
    """:func:`canonical_dual`'s answer as ``(W scaled onto the feasible set, lam)`` when it
    passes :func:`certificate`, else None."""
    answer = canonical_dual(cons, lam)
    if answer is None:
        return None
    W, viol, gap = certificate(cons, *answer)
    return (W, answer[1]) if viol <= VERIFY_TOL and gap <= GAP_TOL else None


#: relative slack below which a row counts as active when polishing on the active set
ACTIVE_TOLS = (1e-7, 1e-5, 1e-3)


def polish_active(cons: Constraints, W: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Candidates ``(W, lam)`` from the active set of W, solved exactly (KKT conditions).

    For each slack tolerance of ``ACTIVE_TOLS``: the rows S within that relative slack (and
    every equality row) are imposed with equality, ``W = argmin ||W||_F s.t. rows S = rhs``
    (minimum-norm least squares in the reduced coordinates of :func:`reduce`), and the
    multipliers solve ``sum_{k in S} lam_k left_k right_k^T = W`` with lam >= 0 on inequality
    rows (bounded least squares): the KKT conditions. The caller's :func:`certificate` decides
    whether a candidate is feasible and optimal.
    """
    if W is None or not np.all(np.isfinite(W)) or cons.n_rows == 0:
        return []
    red = reduce(cons)
    slack = (cons.values(W) - cons.rhs) / np.maximum(1.0, np.abs(cons.rhs))
    out, seen = [], set()
    for tol in ACTIVE_TOLS:
        S = cons.equality | (slack <= tol)
        key = S.tobytes()
        if not S.any() or key in seen:
            continue
        seen.add(key)
        A_S = red.A[S]
        m = np.linalg.lstsq(A_S, cons.rhs[S], rcond=None)[0]
        out.append((red.lift(m), _signed_multipliers(cons, red, m, S)))
    return out


def _signed_multipliers(cons: Constraints, red: Reduced, m: np.ndarray, S: np.ndarray):
    """Multipliers on rows S with ``sum_k lam_k a_k = m``, lam >= 0 on inequality rows.

    Bounded least squares (the active set is often degenerate: more active rows than the
    reduced dimension, where plain least squares returns negative multipliers).
    """
    lam = np.zeros(cons.n_rows)
    if not S.any():
        return lam
    lb = np.where(cons.equality[S], -np.inf, 0.0)
    res = lsq_linear(red.A[S].T, m, bounds=(lb, np.inf), method="bvls", tol=1e-14)
    lam[S] = res.x
    return lam


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
    """Dual Gram matrix ``G_kl = <left_k, left_l> <right_k, right_l>`` (docs/science.md §4)."""
    return (cons.left @ cons.left.T) * (cons.right @ cons.right.T)


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


class _Infeasible(Exception):
    """A route claims the system infeasible (a result about the data, not an error), with its
    Farkas vector over every row when it has one; :func:`_solve_routes` stores the verdict
    only with a vector that :func:`attnsvm.svm.farkas.check` certifies."""

    def __init__(self, solver: str, message: str, y: np.ndarray | None = None) -> None:
        super().__init__(message)
        self.solver = solver
        self.farkas = y


Candidate = tuple[np.ndarray, "np.ndarray | None", str]
"""(W, multipliers over all rows or None, note) proposed by one route."""


def _route_nnls(cons: Constraints) -> list[Candidate]:
    lam = _nnls_dual(gram(cons), cons.rhs)
    return [] if lam is None else [(_lift_dual(cons, lam), lam, "scipy nnls")]


def _least_distance(
    A: np.ndarray, h: np.ndarray
) -> tuple[np.ndarray | None, float, np.ndarray | None]:
    """``min ||m|| s.t. A m >= h`` by least-distance programming
    (:func:`attnsvm.svm.farkas.least_distance`, Lawson and Hanson, ch. 23). Returns
    ``(lam, bound, u)``: the multipliers (``m = A^T lam``), or lam None with ``u`` the Farkas
    vector of the rows (``u >= 0``, ``A^T u = 0``, ``h^T u = 1``) and
    ``bound = h^T u / ||A^T u||``, the smallest norm any feasible m could have (inf for an
    exact certificate; 0 when NNLS stopped, u None).
    """
    lam, u = farkas.least_distance(A, h)
    if u is None:
        return lam, 0.0, None
    g = float(np.linalg.norm(A.T @ u))
    return None, (float(h @ u) / g if g > 0 else np.inf), u


def _route_least_distance(cons: Constraints) -> list[Candidate]:
    """The Frobenius Att-SVM on its reduced rows as a least-distance problem
    (:func:`_least_distance`, docs/science.md §4): milliseconds where the dual Gram matrix is
    singular (more rows than the reduced space has dimensions: E3 at n, T >= 10), where an
    interior-point QP on the N x N Gram matrix takes tens of milliseconds."""
    red = reduce(cons)
    lam, bound, u = _least_distance(red.A, cons.rhs)
    if lam is None and bound >= LDP_INFEASIBLE_NORM:
        raise _Infeasible("ldp-dual", f"least distance: feasible norm >= {bound:.1e}", u)
    if lam is None and 0 < bound < np.inf:
        # NNLS reads h^T u ~ 1 - 1 / (1 + ||m||^2) as a Farkas vector once ||m|| >~ 3e4 (the
        # photo tokens at n = 32: ||W_mm|| of 7e4..1e6; issue 28): the same problem with h
        # scaled by 1 / bound (a lower bound on ||m||) has ||m|| >= 1 and the same multipliers
        # times 1 / bound
        lam, _, _ = _least_distance(red.A, cons.rhs / bound)
        if lam is None:
            return []
        return [(_lift_dual(cons, lam * bound), lam * bound, "scipy nnls, least distance rescaled")]
    if lam is None:
        return []
    return [(_lift_dual(cons, lam), lam, "scipy nnls, least distance")]


def _pivoting(G: np.ndarray, b: np.ndarray, free: np.ndarray, max_iter: int):
    """``min_{lam >= 0} 1/2 lam^T G lam - b^T lam`` for one positive-definite G by block
    principal pivoting (Kim & Park 2011, the single-instance form of
    :func:`attnsvm.svm.frobenius_batched.block_principal_pivoting`), started from the free
    set ``free`` (a warm start). Returns ``(lam, free)`` or None (a free-set system that does
    not factorize, or no convergence in ``max_iter`` exchanges)."""
    N = b.size
    best, tries = N + 1, 3
    for _ in range(max_iter + 1):
        lam = np.zeros(N)
        F = np.flatnonzero(free)
        if F.size:
            L, info = lapack.dpotrf(G[np.ix_(F, F)], lower=1)
            if info != 0:
                return None
            lam[F] = lapack.dpotrs(L, b[F], lower=1)[0]
        Glam = G @ lam
        w = Glam - b
        scale = np.sqrt(np.diagonal(G) * max(float(lam @ Glam), 0.0)) + np.abs(b)
        lam_scale = max(1.0, float(np.abs(lam).max(initial=0.0)))
        V = (free & (lam < -WS_PIVOT_TOL * lam_scale)) | (~free & (w < -WS_PIVOT_TOL * scale))
        nv = int(V.sum())
        if nv == 0:
            return lam, free
        if nv < best or tries >= 1:  # exchange every violating variable
            tries = 3 if nv < best else tries - 1
            best = min(best, nv)
            free = free ^ V
        else:  # backup rule: the largest violating index alone (finite for a PD G)
            free = free.copy()
            free[np.flatnonzero(V)[-1]] ^= True
    return None


def working_set_dual(cons: Constraints) -> tuple[np.ndarray | None, str]:
    """Multipliers of the Frobenius Att-SVM dual over all rows by a working set (issue 28).

    docs/science.md §4, "The SVMs at size": the dual QP is solved on a working set S of rows
    (its Gram matrix ``G_SS = (L_S L_S^T) o (R_S R_S^T)``, the Hadamard structure, formed for
    S only) by block principal pivoting warm-started from the previous round's support; every
    row is then checked against ``W_S = sum_{k in S} lam_k left_k right_k^T`` (N d^2 flops,
    never the N x d^2 matrix); the rows of zero multiplier leave S and the most violated rows
    join it. The optimum on S rises strictly each round (the support keeps its optimum, a
    violated row raises it), so no working set repeats; when no row is violated the
    multipliers solve the whole dual. Returns ``(lam, note)``; lam None when the working set
    would outgrow the rank bound of the lifted rows (``WS_MIN_ADD``; an infeasible SVM, whose
    optimum on S grows without bound: the other routes decide), the working set has no
    solution, or ``WS_MAX_ROUNDS`` pass. Where the least-distance problem on S has no
    solution its Farkas vector (zeros outside S) is raised as an ``_Infeasible`` claim, which
    :func:`_solve_routes` checks on every row (:mod:`attnsvm.svm.farkas`).
    """
    N = cons.n_rows
    left, right, rhs = cons.left, cons.right, cons.rhs
    rank = np.linalg.matrix_rank(left) * np.linalg.matrix_rank(right)
    cap = rank + min(rank, WS_MIN_ADD)
    scale = np.maximum(1.0, np.abs(rhs))
    hardness = rhs / np.maximum(
        np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1), np.finfo(float).tiny
    )
    size = min(cap, max(WS_MIN_ADD, N // WS_START_SHARE))
    S = np.sort(np.argsort(-hardness, kind="stable")[:size])
    least_distance = 0
    for rounds in range(1, WS_MAX_ROUNDS + 1):
        lS, rS = left[S], right[S]
        out = _pivoting((lS @ lS.T) * (rS @ rS.T), rhs[S], np.ones(S.size, bool), WS_MAX_PIVOTS)
        if out is None:  # dependent rows in S: the least-distance problem on S is exact
            lam_S, bound, u = _least_distance(reduce(cons.subset(S)).A, rhs[S])
            if lam_S is None:
                note = f"working set: no solution on {S.size} rows (round {rounds})"
                if u is None:
                    return None, note
                y = np.zeros(N)  # S's Farkas vector is one of every row (zeros elsewhere)
                y[S] = u
                raise _Infeasible("ws-dual", f"{note}, feasible norm >= {bound:.1e}", y)
            free = lam_S > 0
            least_distance += 1
        else:
            lam_S, free = out
        W = lS.T @ (lam_S[:, None] * rS)
        viol = (rhs - cons.values(W)) / scale
        bad = np.flatnonzero(viol > WS_TOL)
        if bad.size == 0:
            lam = np.zeros(N)
            lam[S] = lam_S
            how = f", {least_distance} by least distance" if least_distance else ""
            return lam, f"working set: {rounds} rounds{how}, {S.size} of {N} rows"
        keep = S[free & (lam_S > 0)]
        k = min(bad.size, max(int(WS_GROW * keep.size), WS_MIN_ADD), cap - keep.size)
        if k <= 0:
            return None, f"working set: reached {keep.size} rows of rank bound {rank}"
        add = bad[_spread(cons.example[bad], viol[bad])[:k]]
        S = np.union1d(keep, add)
    return None, f"working set: no answer in {WS_MAX_ROUNDS} rounds"


def _spread(example: np.ndarray, viol: np.ndarray) -> np.ndarray:
    """Order of violated rows to add: every example's most violated row first (by violation),
    then every example's second, ...: rows of one example share a d-dimensional subspace of
    the lifted space, so adding many of them at once makes the working set's Gram singular."""
    order = np.lexsort((-viol, example))
    ex = example[order]
    start = np.r_[0, np.flatnonzero(ex[1:] != ex[:-1]) + 1]
    within = np.arange(ex.size) - np.repeat(start, np.diff(np.r_[start, ex.size]))
    return order[np.lexsort((-viol[order], within))]


def _route_working_set(cons: Constraints) -> list[Candidate]:
    """:func:`working_set_dual` as a dual route (its multipliers are re-solved on their
    support like every dual route's, so the stored W does not depend on the route)."""
    lam, note = working_set_dual(cons)
    if lam is None:
        raise RuntimeError(note)
    return [(_lift_dual(cons, lam), lam, note)]


def _dense_ok(cons: Constraints) -> bool:
    """Whether the dense lifted matrix (N x d^2) fits in ``routes.DENSE_MAX_BYTES`` (the
    routes and the active-set polish that form it are skipped otherwise)."""
    return R.Instance.of(cons).dense


def _route_clarabel_dual(cons: Constraints) -> list[Candidate]:
    N = cons.n_rows
    P = sp.csc_matrix(np.triu(gram(cons)))
    solver = clarabel.DefaultSolver(
        P, -cons.rhs, -sp.identity(N, format="csc"), np.zeros(N),
        [clarabel.NonnegativeConeT(N)], _clarabel_settings(),
    )  # fmt: skip
    sol = solver.solve()
    status = str(sol.status).split(".")[-1]
    if status in ("DualInfeasible", "AlmostDualInfeasible"):
        raise _Infeasible("clarabel-dual", f"dual unbounded ({status})")
    if status not in _SOLVED + _ALMOST + ("InsufficientProgress", "MaxIterations"):
        raise RuntimeError(f"clarabel status {status}")
    lam = np.maximum(np.asarray(sol.x), 0.0)
    return [(_lift_dual(cons, lam), lam, f"clarabel {status}")]


def _route_osqp_dual(cons: Constraints) -> list[Candidate]:
    N = cons.n_rows
    P = sp.csc_matrix(np.triu(gram(cons)))
    status, lam = _osqp_solve(
        P, -cons.rhs, sp.identity(N, format="csc"), np.zeros(N), np.full(N, np.inf)
    )
    if status.startswith("dual infeasible"):
        raise _Infeasible("osqp-dual", f"osqp: dual unbounded ({status})")
    if lam is None or not status.startswith("solved"):
        raise RuntimeError(f"osqp status {status}")
    lam = np.maximum(np.asarray(lam, dtype=np.float64), 0.0)
    return [(_lift_dual(cons, lam), lam, f"osqp {status}")]


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


def _reduced_primal(cons: Constraints, solver: str, red: Reduced | None = None):
    """The reduced primal's data (issue: equalities made independent, inconsistency checked);
    ``red``: :func:`reduce`'s answer when the caller already has it."""
    red = reduce(cons) if red is None else red
    eq = cons.equality
    A_eq, b_eq, resid = independent_equalities(red.A[eq], cons.rhs[eq])
    if resid > 1e-8:
        raise _Infeasible(solver, f"inconsistent equalities (residual {resid:.1e})")
    return red, A_eq, b_eq, red.A[~eq], cons.rhs[~eq]


def _multipliers(cons: Constraints, red: Reduced, m: np.ndarray) -> np.ndarray | None:
    """Multipliers of a reduced primal answer m on its rows within ``ACTIVE_TOLS[0]`` relative
    slack (:func:`_signed_multipliers`); the certificate decides whether they bound well."""
    W = red.lift(m)
    slack = (cons.values(W) - cons.rhs) / np.maximum(1.0, np.abs(cons.rhs))
    S = cons.equality | (slack <= ACTIVE_TOLS[0])
    if not S.any():
        return None
    return _signed_multipliers(cons, red, m, S)


def _route_clarabel_primal(cons: Constraints, red: Reduced | None = None) -> list[Candidate]:
    red, A_eq, b_eq, A_in, b_in = _reduced_primal(cons, "clarabel-primal", red)
    p = red.A.shape[1]
    A = sp.csc_matrix(np.vstack([A_eq, -A_in]))
    b = np.concatenate([b_eq, -b_in])
    cones = []
    if A_eq.shape[0]:
        cones.append(clarabel.ZeroConeT(A_eq.shape[0]))
    if A_in.shape[0]:
        cones.append(clarabel.NonnegativeConeT(A_in.shape[0]))
    P = sp.identity(p, format="csc")
    sol = clarabel.DefaultSolver(P, np.zeros(p), A, b, cones, _clarabel_settings()).solve()
    status = str(sol.status).split(".")[-1]
    if status in ("PrimalInfeasible", "AlmostPrimalInfeasible"):
        raise _Infeasible("clarabel-primal", f"primal infeasible ({status})")
    if status not in _SOLVED + _ALMOST + ("InsufficientProgress", "MaxIterations"):
        raise RuntimeError(f"clarabel status {status}")
    m = np.asarray(sol.x)
    return [(red.lift(m), _multipliers(cons, red, m), f"clarabel {status}")]


def _route_osqp_primal(cons: Constraints, red: Reduced | None = None) -> list[Candidate]:
    red, A_eq, b_eq, A_in, b_in = _reduced_primal(cons, "osqp-primal", red)
    p = red.A.shape[1]
    A = sp.csc_matrix(np.vstack([A_eq, A_in]))
    lo = np.concatenate([b_eq, b_in])
    hi = np.concatenate([b_eq, np.full(b_in.size, np.inf)])
    status, x = _osqp_solve(sp.identity(p, format="csc"), np.zeros(p), A, lo, hi)
    if status.startswith("primal infeasible"):
        raise _Infeasible("osqp-primal", f"osqp: {status}")
    if x is None or not status.startswith("solved"):
        raise RuntimeError(f"osqp status {status}")
    m = np.asarray(x, dtype=np.float64)
    return [(red.lift(m), _multipliers(cons, red, m), f"osqp {status}")]


#: the routes of the table (attnsvm.svm.routes.FROBENIUS) by name
ROUTES = {
    "nnls-dual": _route_nnls,
    "ldp-dual": _route_least_distance,
    "clarabel-dual": _route_clarabel_dual,
    "osqp-dual": _route_osqp_dual,
    "clarabel-primal": _route_clarabel_primal,
    "osqp-primal": _route_osqp_primal,
    "ws-dual": _route_working_set,
}


def _as_is_then_polished(cons: Constraints, W0: np.ndarray, lam0, note: str):
    """A route's answer as it is, then (lazily: several least-squares solves, needed only
    when the first misses the certificate) its :func:`polish_active` candidates."""
    yield W0, lam0, note
    if not _dense_ok(cons):  # polish_active forms the N x d^2 lifted matrix
        return
    for W, lam in polish_active(cons, W0):
        yield W, lam, f"{note}, polished on the active set"


def _solve_routes(cons: Constraints, routes, t0: float) -> SVMResult:
    """Run the routes in order until one answer is certified (module docstring).

    Each route's answer is certified as it is, then after :func:`polish_active`; a route that
    raises or misses the certificate hands over to the next. A route that proves
    infeasibility ends the search. Without any certified answer the one with the smallest
    (violation, gap) is returned as ``optimal_inaccurate``; without any answer,
    ``solver_error``.
    """
    notes: list[str] = []
    best: tuple[float, float, np.ndarray, str] | None = None
    claimed: str | None = None  # a route that claimed infeasibility without a certificate
    for name, route in routes:
        try:
            cands = route(cons)
        except _Infeasible as exc:
            y, note = certify_infeasible(cons, exc.farkas)
            notes.append(f"{exc}; {note}")
            if y is not None:
                return _infeasible(exc.solver, t0, "; ".join(notes))
            claimed = claimed or exc.solver
            continue  # a bogus "infeasible": the next route decides
        except Exception as exc:  # noqa: BLE001 - any solver failure: next route
            notes.append(f"{name} raised {type(exc).__name__}: {exc}")
            continue
        if not cands:
            notes.append(f"{name} declined")
        for W0, lam0, note in cands:
            if not np.all(np.isfinite(W0)):
                notes.append(f"{name} ({note}): non-finite answer")
                continue
            for W, lam, how in _as_is_then_polished(cons, W0, lam0, note):
                W, viol, gap = certificate(cons, W, lam)
                if viol <= VERIFY_TOL and gap <= GAP_TOL:
                    notes.append(f"{how}: violation {viol:.1e}, certified gap {gap:.1e}")
                    canonical = certified_canonical(cons, lam) if name.endswith("-dual") else None
                    if canonical is not None:
                        W = canonical[0]
                        notes.append("re-solved on its support (canonical_dual)")
                    return _result(W, "optimal", np.linalg.norm(W), name, t0, "; ".join(notes))
                if best is None or (viol, gap) < best[:2]:
                    best = (viol, gap, W, name)
            notes.append(f"{name} ({note}): no certificate")
    if best is not None:
        viol, gap, W, name = best
        notes.append(f"best answer: max relative violation {viol:.2e}, gap {gap:.1e}")
        return _result(W, "optimal_inaccurate", np.linalg.norm(W), name, t0, "; ".join(notes))
    if claimed is not None:
        notes.append("infeasibility claimed without a certificate")
        return _result(None, "infeasible_uncertified", np.nan, claimed, t0, "; ".join(notes))
    first = routes[0][0] if routes else "none"
    return _result(None, "solver_error", np.nan, first, t0, "; ".join(notes))


def certify_infeasible(
    cons: Constraints, y: np.ndarray | None = None
) -> tuple[np.ndarray | None, str]:
    """A checked Farkas vector of ``cons`` (docs/science.md §4, "Infeasible is certified";
    :mod:`attnsvm.svm.farkas`): ``y`` (a route's own vector) if it passes, else one found by
    the least-distance search on the reduced rows while they fit in ``routes.DENSE_MAX_BYTES``.
    Returns ``(vector or None, note)``; every route's "infeasible" goes through here."""
    A = reduce(cons).A if _dense_ok(cons) else None
    return farkas.certify(cons, [y], A)


def solve_frobenius(cons: Constraints, route: str = "auto") -> SVMResult:
    """Att-SVM ``W_mm = argmin ||W||_F`` s.t. the constraints (docs/science.md §4).

    The routes of :data:`attnsvm.svm.routes.FROBENIUS` run in order until one answer is
    certified (module docstring); ``route`` (a cell's ``svm_route``) puts one first where it
    applies. Where the table starts with the least-distance problem (``ldp-dual``: few
    variables, ``PRIMAL_RATIO d^2 <= N``) it is solved once, up front: a Farkas certificate
    ends the solve as ``infeasible``, its multipliers are the first answer, and the reduced
    primal routes reuse its reduction. Status ``infeasible`` (W None) is a result about the
    data; ``optimal`` means W satisfies every constraint to a relative ``VERIFY_TOL`` and its
    multipliers certify a relative gap <= ``GAP_TOL``; ``optimal_inaccurate`` flags a best
    answer without that certificate (not a solution: :attr:`SVMResult.solved` is False).
    """
    t0 = time.perf_counter()
    names = R.frobenius(cons, route)
    if names == ("trivial",):
        return _result(np.zeros((cons.d, cons.d)), "optimal", 0.0, "trivial", t0)
    if names[0] != "ldp-dual":
        return _solve_routes(cons, tuple((n, ROUTES[n]) for n in names), t0)
    # mostly infeasible where it comes first (E3 at d <= 4): a Farkas certificate from one NNLS
    # settles that in a fraction of the conic solve; on feasible ones the same NNLS gives the
    # multipliers (their certificate and canonical re-solve as every dual route's), and the
    # other routes run only where they miss it
    red = reduce(cons)
    lam, bound, u = _least_distance(red.A, cons.rhs)
    first: tuple = ()
    if lam is None and bound >= LDP_INFEASIBLE_NORM:
        y, note = farkas.certify(cons, [u])
        message = f"least distance: feasible norm >= {bound:.1e}; {note}"
        if y is not None:
            return _infeasible("ldp-dual", t0, message)
        first = (("ldp-dual", functools.partial(_claim, message=message, y=u)),)
    elif lam is not None:
        first = (("ldp-dual", functools.partial(_answer, lam=lam, note="least distance")),)
    rest = tuple(
        (n, functools.partial(ROUTES[n], red=red) if n.endswith("-primal") else ROUTES[n])
        for n in names[1:]
    )  # the primal routes reuse the reduction
    return _solve_routes(cons, first + rest, t0)


def _answer(cons: Constraints, lam: np.ndarray, note: str) -> list[Candidate]:
    """A route that offers multipliers found before the routes ran (``W = G(lam)``)."""
    return [(_lift_dual(cons, lam), lam, f"scipy nnls, {note}")]


def _claim(cons: Constraints, message: str, y: np.ndarray | None) -> list[Candidate]:
    """A route that only repeats an infeasibility claim made before the routes ran (its
    vector failed the check: :func:`_solve_routes` records it and goes on)."""
    raise _Infeasible("ldp-dual", message, y)
