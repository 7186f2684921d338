"""Att-SVM_* with the nuclear norm (docs/science.md §4, ``W_mm_*(alpha)``).

The paper's (Att-SVM⋆) (arXiv 2308.16898): the nuclear-norm SVM whose solution is the limit
direction of ``W = K Q^T`` under GD on (K, Q) (the paper's ``W^mm_{⋆,alpha}``).

``min ||W||_* s.t. left_k^T W right_k >= rhs_k`` (== on equality rows), solved on the reduced
problem ``W = U_l M U_r^T`` (orthonormal bases of span(left rows), span(right rows)): the SDP
shrinks from size 2d to ``r_l + r_r`` and the nuclear norm is preserved (docs/science.md §4).

The SDP needs accuracy (docs/science.md §4: SCS at default tolerances leaves singular values
of 1e-7..1e-5 that corrupt rank counts): Clarabel for small reduced sizes, else SCS with
``eps_abs = eps_rel = 1e-8``; the other solver is tried when the first one fails.
Feasibility is decided first by the exact Frobenius dual (both SVMs share the feasible set).

Fast path (inequality rows, the Att-SVM): the SDP is handed to Clarabel / SCS directly, with
no modelling layer (cvxpy's compile took ~2.5 s of ~18 s at (n, T, d) = (50, 20, 100)). When
the distinct right vectors ``z_j`` (one per example) are linearly independent, the variable is
``Y = M R`` (``Z^T = U_r R``, QR), whose column j is ``M U_r^T z_j``: every constraint row then
touches one column of Y (r_l entries instead of r_l * r_r), and ``M = Y R^{-1}`` enters only
the PSD block. The constraint matrix has ~20x fewer nonzeros, which is what SCS's
factorization and iterations pay for. In that case feasibility is certified by structure
(each example's left rows linearly independent: ``W z_j`` can be chosen per example), without
the Frobenius QP; otherwise the QP decides it as before. Any failure of the fast path falls
back to the cvxpy route.

Which direct route runs first is the route table's (:data:`attnsvm.svm.routes.NUCLEAR`, every
rhs > 0): the primal-dual NT method of :mod:`attnsvm.svm.nuclear_pd` up to ``PD_MAX_ROWS``
rows, and above that the primal-dual method on a working set of rows
(:mod:`attnsvm.svm.nuclear_ws`, issue 28, warm-started from the Frobenius answer: its
multipliers padded with zeros certify the gap over all rows); then Clarabel / SCS. Each answer
is accepted only with a certified duality gap <= ``GAP_TOL``; the timings behind the table's
limits are in BENCHMARKS.md, "SVM routes".
An answer of the primal-dual or working-set route that misses the certificate
first goes through the Newton refinement of its optimality conditions
(:mod:`attnsvm.svm.nuclear_kkt`; issue 28: the photo tokens at n = 32, 64, whose
near-duplicate patches stall the interior-point methods above ``GAP_TOL``), certified the
same way (solver ``direct-<route>+kkt``); only then do Clarabel / SCS run. Answers the routes
certify by themselves never reach it. ``SVMResult.solver`` names the route that produced the
answer.

Many instances at once (:func:`solve_nuclear_many`, issue 28: E3's untrained groups, 100
seeds of one shape): every instance takes the path above, with the primal-dual solves of the
instances of one shape run in batches (``solve_primal_dual_many``), which give each instance
the same answer, bit for bit, as alone;
so every answer is the one :func:`solve_nuclear` gives, whatever the batch
(tests/test_svm_nuclear_batched.py).
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass

import clarabel
import numpy as np
import scipy.sparse as sp

import attnsvm.svm.routes as R
from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import (
    BASIS_TOL,
    VERIFY_TOL,
    SVMResult,
    independent_equalities,
    orthonormal_basis,
    reduce,
    solve_frobenius,
    violation,
)
from attnsvm.svm.nuclear_kkt import refine_kkt
from attnsvm.svm.nuclear_pd import certified_gap, solve_primal_dual, solve_primal_dual_many
from attnsvm.svm.nuclear_ws import solve_working_set

SCS_OPTIONS = dict(eps_abs=1e-8, eps_rel=1e-8, max_iters=200_000, acceleration_lookback=10)
#: relative duality gap an SDP answer must certify to be ``optimal`` (issue 12)
GAP_TOL = 1e-7
CLARABEL_OPTIONS = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)


#: largest condition number of R (QR of the distinct right vectors) for the Y = M R substitution
MAX_COND_R = 1e6


def nuclear_norm(W: np.ndarray) -> float:
    """``||W||_*``: sum of singular values."""
    return float(np.linalg.svd(W, compute_uv=False).sum())


def _solve_sdp(A_in, b_in, A_eq, b_eq, shape, solver: str):
    """One cvxpy normNuc problem on M (one vector constraint per row type).

    Returns (status, M, multipliers of the inequality rows, multipliers of the equality rows).
    """
    import cvxpy as cp  # imported when needed: ~1 s of every block job's start-up otherwise

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
    # cvxpy's Lagrangian adds nu^T (A_eq m - b_eq) but lam^T (b_in - A_in m): the equality
    # multipliers of duality_gap's G = A_in^T lam + A_eq^T mu are -nu
    mu = -duals.pop(0) if A_eq.shape[0] else np.zeros(0)
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


# ----------------------------------------------------------------------------- direct path
def _svec_index(r: np.ndarray, c: np.ndarray, k: int, solver: str) -> np.ndarray:
    """Position of entry (r, c) of a symmetric k x k matrix in the solver's packed vector.

    SCS packs the lower triangle column by column, Clarabel the upper triangle column by
    column (both scale off-diagonal entries by sqrt(2)).
    """
    lo, hi = np.maximum(r, c), np.minimum(r, c)
    if solver == "scs":
        return hi * (2 * k - hi + 1) // 2 + (lo - hi)
    return lo * (lo + 1) // 2 + hi


class _Direct:
    """The reduced nuclear-norm SDP in conic standard form ``A x + s = b, s in K``.

    Variables x = [vec(Y) (r_l * q), the lower triangles of the diagonal blocks P (r_l x r_l)
    and Q (r_r x r_r)]; PSD slack ``[[P, M], [M^T, Q]]`` with ``M = Y C``; objective
    ``(tr P + tr Q) / 2``. Row k: ``a_k^T Y beta_k >= rhs_k`` with ``a_k = U_l^T left_k``.
    """

    def __init__(self, cons: Constraints) -> None:
        self.cons = cons
        left, right = cons.left, cons.right
        self.U_l = orthonormal_basis(left)
        a = left @ self.U_l  # (N, r_l)
        uniq, inv = _unique_rows(right)
        self.substituted = False
        d = cons.d
        if uniq.shape[0] <= d:
            Q_, R = np.linalg.qr(uniq.T)  # uniq^T = Q_ R, R (m, m) upper triangular
            diag = np.abs(np.diag(R))
            if diag.size and diag.min() > 0 and np.linalg.cond(R) <= MAX_COND_R:
                self.substituted = True
                self.U_r, self.R = Q_, R
                self.C = np.triu(np.linalg.inv(R))  # R^{-1}, upper triangular
                self.group = inv
        if not self.substituted:
            self.U_r = orthonormal_basis(right, BASIS_TOL)
            self.C = np.eye(self.U_r.shape[1])
            beta = right @ self.U_r
        r_l, r_r, q = a.shape[1], self.U_r.shape[1], self.C.shape[0]
        self.shape = (r_l, r_r)
        self.a = a
        self.ny, self.q = r_l * q, q
        self.b_lin = -cons.rhs
        self._inv = inv
        self._beta = None if self.substituted else beta

    @functools.cached_property
    def A_lin(self) -> sp.csc_matrix:
        """Constraint rows ``-a_k (x) beta_k`` on vec(Y) (row-major: Y[c, j] at c * q + j).

        Built on first use: the interior-point route (attnsvm.svm.nuclear_pd) never needs it.
        """
        N, (r_l, _), q, a = self.cons.n_rows, self.shape, self.q, self.a
        if self.substituted:
            rows = np.repeat(np.arange(N), r_l)
            cols = (np.arange(r_l)[None, :] * q + self._inv[:, None]).ravel()
            return sp.csc_matrix((-a.ravel(), (rows, cols)), shape=(N, self.ny))
        return sp.csc_matrix(-(a[:, :, None] * self._beta[:, None, :]).reshape(N, self.ny))

    def problem(self, solver: str):
        r_l, r_r = self.shape
        k = r_l + r_r
        q, ny = self.q, self.ny
        # diagonal-block variables: lower triangles of P and Q
        pr, pc = np.tril_indices(r_l)
        qr_, qc = np.tril_indices(r_r)
        dr = np.concatenate([pr, qr_ + r_l])
        dc = np.concatenate([pc, qc + r_l])
        nd = dr.size
        scale = np.where(dr == dc, 1.0, np.sqrt(2.0))
        rows_d = _svec_index(dr, dc, k, solver)
        cols_d = ny + np.arange(nd)
        # off-diagonal block: S[r_l + l, c] = M[c, l] = sum_j Y[c, j] C[j, l]
        jj, ll = np.nonzero(self.C)
        cc = np.repeat(np.arange(r_l), jj.size)
        jrep, lrep = np.tile(jj, r_l), np.tile(ll, r_l)
        rows_o = _svec_index(r_l + lrep, cc, k, solver)
        cols_o = cc * q + jrep
        vals_o = -np.sqrt(2.0) * self.C[jrep, lrep]
        n_psd = k * (k + 1) // 2
        A_psd = sp.csc_matrix(
            (
                np.concatenate([-scale, vals_o]),
                (np.concatenate([rows_d, rows_o]), np.concatenate([cols_d, cols_o])),
            ),
            shape=(n_psd, ny + nd),
        )
        A_lin = sp.hstack([self.A_lin, sp.csc_matrix((self.A_lin.shape[0], nd))], format="csc")
        A = sp.vstack([A_lin, A_psd], format="csc")
        b = np.concatenate([self.b_lin, np.zeros(n_psd)])
        c = np.zeros(ny + nd)
        c[ny:] = np.where(dr == dc, 0.5, 0.0)
        return A, b, c, k

    def lift(self, x: np.ndarray) -> np.ndarray:
        r_l = self.shape[0]
        Y = np.asarray(x[: self.ny]).reshape(r_l, self.q)
        return self.U_l @ (Y @ self.C) @ self.U_r.T

    def certified_feasible(self) -> bool:
        """Structural certificate: independent right vectors and, per right vector, linearly
        independent left rows (then ``W z_j`` can be chosen per group to meet every row)."""
        if not self.substituted:
            return False
        g = self.group
        order = np.argsort(g, kind="stable")
        sizes = np.bincount(g)
        if sizes.max() > self.a.shape[1]:  # more rows than dimensions in some group
            return False
        if np.all(sizes == sizes[0]):  # equal groups (the Att-SVM: T - 1 rows per example)
            # one batched SVD: LAPACK runs on each group's rows as in the loop below
            s = np.linalg.svd(self.a[order].reshape(sizes.size, sizes[0], -1), compute_uv=False)
            return bool(np.all(s[:, -1] > 1e-9 * np.maximum(1.0, s[:, 0])))
        bounds = np.flatnonzero(np.diff(g[order])) + 1
        for idx in np.split(order, bounds):
            s = np.linalg.svd(self.a[idx], compute_uv=False)
            if s[-1] <= 1e-9 * max(1.0, s[0]):
                return False
        return True

    def gap(self, W: np.ndarray, lam: np.ndarray, upper: float | None = None) -> float:
        """Relative gap of ``||W||_*`` (``upper`` when known) to the weak-duality bound of
        the multipliers lam."""
        if lam is None or not np.all(np.isfinite(lam)):
            return float("inf")
        return certified_gap(self.cons.left, self.cons.right, self.cons.rhs, W, lam, upper)


def _unique_rows(right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(right, axis=0, return_inverse=True)`` (inverse flattened), with runs of
    equal consecutive rows (an example's T - 1 rows share its z) collapsed first: the same
    sorted distinct rows and the same inverse, at a fraction of the sort.

    The distinct rows come from a lexicographic sort (``np.lexsort``, first column first:
    np.unique's row order) and a comparison of neighbours, the same result as np.unique,
    whose structured view of the rows costs ~0.1 ms a call (E3: one call per instance)."""
    rows, back = right, None
    if right.shape[0] > 1:
        new = np.any(right[1:] != right[:-1], axis=1)
        if not new.all():
            rows = right[np.concatenate([[0], np.flatnonzero(new) + 1])]
            back = np.cumsum(np.concatenate([[0], new]))
    if rows.size == 0 or np.isnan(rows).any():  # (NaN rows: np.unique's own tie order)
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        inv = inv.ravel()
    else:
        order = np.lexsort(rows.T[::-1])
        ranked = rows[order]
        first = np.concatenate([[True], np.any(ranked[1:] != ranked[:-1], axis=1)])
        uniq = ranked[first]
        inv = np.empty(rows.shape[0], dtype=np.intp)
        inv[order] = np.cumsum(first) - 1
    return uniq, inv if back is None else inv[back]


def _solve_direct(prob: _Direct, solver: str) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """Solve with SCS or Clarabel's own API. Returns (status, x, multipliers of the rows)."""
    A, b, c, k = prob.problem(solver)
    N = prob.A_lin.shape[0]
    if solver == "scs":
        import scs  # the last fallback only

        opts = dict(SCS_OPTIONS, verbose=False)
        sol = scs.SCS(dict(A=A, b=b, c=c), dict(l=N, s=[k]), **opts).solve()
        status = str(sol["info"]["status"])
        ok = {"solved": "optimal"}.get(
            status, "optimal_inaccurate" if "inaccurate" in status else status
        )
        if "infeasible" in status or "unbounded" in status or sol["x"] is None:
            return status, None, None
        return ok, np.asarray(sol["x"]), np.asarray(sol["y"][:N])
    s = clarabel.DefaultSettings()
    s.verbose = False
    s.tol_gap_abs = CLARABEL_OPTIONS["tol_gap_abs"]
    s.tol_gap_rel = CLARABEL_OPTIONS["tol_gap_rel"]
    s.tol_feas = CLARABEL_OPTIONS["tol_feas"]
    s.max_iter = CLARABEL_OPTIONS["max_iter"]
    s.chordal_decomposition_enable = False  # one dense PSD block: nothing to decompose
    cones = [clarabel.NonnegativeConeT(N), clarabel.PSDTriangleConeT(k)]
    sol = clarabel.DefaultSolver(sp.csc_matrix((c.size, c.size)), c, A, b, cones, s).solve()
    status = str(sol.status).split(".")[-1]
    if status not in ("Solved", "AlmostSolved", "InsufficientProgress", "MaxIterations"):
        return status, None, None
    return (
        "optimal" if status == "Solved" else "optimal_inaccurate",
        np.asarray(sol.x),
        np.asarray(sol.z)[:N],
    )


def _reduced(prob: _Direct) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reduced rows ``(a_k, b_k, c_k)`` the interior-point methods solve on."""
    cons = prob.cons
    return prob.a, cons.right @ prob.U_r, cons.rhs


def _solve_primal_dual(prob: _Direct) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """The primal-dual method of :mod:`attnsvm.svm.nuclear_pd` on the reduced rows.

    Its status is never "optimal" by itself: the caller accepts its answer only through the
    certified duality gap (``GAP_TOL``).
    """
    return _lift_certificate(prob, solve_primal_dual(*_reduced(prob)))


def _solve_working_set(
    prob: _Direct, frobenius: SVMResult | None
) -> tuple[str, np.ndarray | None, np.ndarray | None, str]:
    """The working set of :mod:`attnsvm.svm.nuclear_ws` around the primal-dual method, warm
    started from the Frobenius answer's margins (issue 28). Its answer counts only through the
    certified gap over all rows (``GAP_TOL``), like the primal-dual method's."""
    cons = prob.cons
    W0 = None if frobenius is None else frobenius.W
    warm = None if W0 is None else cons.values(W0)
    res = solve_working_set(prob.a, cons.right @ prob.U_r, cons.rhs, warm)
    if res is None:
        return "breakdown", None, None, "working set: no answer"
    return "certificate", prob.U_l @ res.M @ prob.U_r.T, res.lam, res.note


#: the interior-point routes whose uncertified answer goes through the Newton refinement of
#: attnsvm.svm.nuclear_kkt before the conic solvers take over
_REFINED = ("primal-dual", "ws-primal-dual")


def _refine(prob: _Direct, W: np.ndarray, lam: np.ndarray) -> tuple:
    """(full-size W, multipliers) of the Newton refinement of an uncertified interior-point
    pair (:mod:`attnsvm.svm.nuclear_kkt`), or (None, None); the caller certifies it."""
    cons = prob.cons
    try:
        res = refine_kkt(prob.a, cons.right @ prob.U_r, cons.rhs, prob.U_l.T @ W @ prob.U_r, lam)
    except (np.linalg.LinAlgError, ValueError):  # e.g. an SVD that does not converge
        return None, None
    if res is None:
        return None, None
    return prob.U_l @ res.M @ prob.U_r.T, res.lam


def _lift_certificate(prob: _Direct, res) -> tuple[str, np.ndarray | None, np.ndarray | None]:
    """(status, full-size W, multipliers) of a reduced primal-dual result."""
    if res is None:
        return "breakdown", None, None
    return "certificate", prob.U_l @ res.M @ prob.U_r.T, res.lam


def _frobenius_verdict(
    cons: Constraints, t0: float, frobenius: SVMResult | None = None
) -> SVMResult | None:
    """The Frobenius QP's answer when it shows the constraint set empty (``infeasible``, with
    its checked Farkas vector: the rows, not the norm, decide; ``infeasible_uncertified``
    without one) or fails (``solver_error``); None when it found a feasible W
    (docs/science.md §4: the same constraints decide feasibility for both norms).
    ``frobenius``: that answer when the caller already has it (:func:`solve_nuclear`), else
    the QP is solved here."""
    frob = solve_frobenius(cons) if frobenius is None else frobenius
    if frob.status not in ("infeasible", "infeasible_uncertified", "solver_error"):
        return None
    return SVMResult(
        None, frob.status, float("nan"), f"frobenius:{frob.solver}",
        time.perf_counter() - t0, frob.message,
    )  # fmt: skip


def _sdp_order(size: int) -> list[str]:
    """Conic solvers to try, most suitable first, for a reduced problem of ``size`` p + q."""
    return ["clarabel", "scs"] if size <= R.CLARABEL_MAX_SIZE else ["scs", "clarabel"]


@dataclass
class _Plan:
    """One instance of the direct path (:func:`_try_direct`) before its first solver runs."""

    cons: Constraints
    t0: float
    prob: _Direct
    order: list[str]
    messages: list[str]
    frobenius: SVMResult | None


def _try_direct(
    cons: Constraints, t0: float, frobenius: SVMResult | None, route: str = "auto"
) -> SVMResult | None:
    """The direct conic path (module docstring); None when it does not apply or fails."""
    plan = _plan_direct(cons, t0, frobenius, route)
    return plan if not isinstance(plan, _Plan) else _run_direct(plan)


def _plan_direct(cons: Constraints, t0: float, frobenius: SVMResult | None, route: str = "auto"):
    """The direct path up to its first solver: a :class:`_Plan`, the Frobenius verdict
    (an :class:`SVMResult`: the rows are empty or the QP failed), or None (no direct path).
    Its solvers are the routes of :data:`attnsvm.svm.routes.NUCLEAR` (``route``: a cell's
    ``svm_route``, first where it applies)."""
    if cons.equality.any():
        return None
    try:
        prob = _Direct(cons)
    except (np.linalg.LinAlgError, ValueError):
        return None
    messages = []
    order = list(R.nuclear(cons, sum(prob.shape), route))
    at_size = order[0] == "ws-primal-dual"
    if at_size and frobenius is None:  # the working set's warm start (and feasibility)
        frobenius = solve_frobenius(cons)
    if not prob.certified_feasible():
        verdict = _frobenius_verdict(cons, t0, frobenius)
        if verdict is not None:
            return verdict
        messages.append("feasibility by the Frobenius QP")
    else:
        messages.append("feasibility certified by structure")
    return _Plan(cons, t0, prob, order, messages, frobenius)


def _run_direct(plan: _Plan, first: tuple | None = None) -> SVMResult | None:
    """The solvers of a :class:`_Plan` in order until one certifies its answer; None when
    none does. ``first``: the ``(status, W, lam)`` of ``plan.order[0]`` when it was solved
    already (:func:`solve_nuclear_many`), the same as that solver gives here."""
    cons, t0, prob, messages, frobenius = (
        plan.cons, plan.t0, plan.prob, plan.messages, plan.frobenius
    )  # fmt: skip
    for solver in plan.order:
        try:
            if first is not None:
                (status, W, lam), first = first, None
            elif solver == "primal-dual":
                status, W, lam = _solve_primal_dual(prob)
            elif solver == "ws-primal-dual":
                status, W, lam, note = _solve_working_set(prob, frobenius)
                messages.append(note)
            else:
                status, x, lam = _solve_direct(prob, solver)
                W = None if x is None or not np.all(np.isfinite(x)) else prob.lift(x)
        except Exception as exc:  # noqa: BLE001 - any failure: next solver, then cvxpy route
            messages.append(f"direct {solver} raised {type(exc).__name__}: {exc}")
            continue
        if W is None:
            messages.append(f"direct {solver} status {status}")
            continue
        W = _rescale(cons, W)
        viol = violation(cons, W)
        objective = nuclear_norm(W)
        gap = prob.gap(W, lam, objective)
        ok = viol <= VERIFY_TOL and gap <= GAP_TOL  # a certified gap always (issue 12)
        route = solver
        if not ok and solver in _REFINED and lam is not None:
            # an interior-point pair that misses the certificate: Newton on its optimality
            # conditions (attnsvm.svm.nuclear_kkt) before the slow conic solvers
            messages.append(f"direct {solver} {status}: violation {viol:.1e}, gap {gap:.1e}")
            route, status = f"{solver}+kkt", "refined"
            W, lam = _refine(prob, W, lam)
            if W is None:
                messages.append(f"direct {route}: no answer")
                continue
            W = _rescale(cons, W)
            objective = nuclear_norm(W)
            viol, gap = violation(cons, W), prob.gap(W, lam, objective)
            ok = viol <= VERIFY_TOL and gap <= GAP_TOL
        if not ok:
            messages.append(f"direct {route} {status}: violation {viol:.1e}, gap {gap:.1e}")
            continue
        messages.append(f"{route} status {status}, certified gap {gap:.1e}")
        messages.append(f"reduced size {prob.shape}, Y = M R: {prob.substituted}")
        return SVMResult(
            W, "optimal", objective, f"direct-{route}", time.perf_counter() - t0,
            "; ".join(messages),
        )  # fmt: skip
    return None


def solve_nuclear(
    cons: Constraints, frobenius: SVMResult | None = None, route: str = "auto"
) -> SVMResult:
    """Att-SVM_* ``W_mm_* = argmin ||W||_*`` s.t. the constraints (docs/science.md §4).

    ``frobenius``: the answer of :func:`attnsvm.svm.frobenius.solve_frobenius` (or of its
    batched form) for the same rows, when the caller already has it; feasibility is then read
    from it instead of solving the Frobenius QP a second time. The answer is the same: a
    certified ``optimal`` answer proves the set non-empty whichever route found it, and any
    other status comes from :func:`~attnsvm.svm.frobenius.solve_frobenius` itself.

    Returns the full d x d W. Status ``infeasible`` (W None) when the constraint set is empty
    (decided by the Frobenius dual), ``optimal`` when W satisfies the constraints to
    ``VERIFY_TOL`` and the solver's multipliers certify a relative duality gap <= ``GAP_TOL``
    whatever the solver's own status (issue 12); a route that misses the certificate hands
    over to the next solver; ``optimal_inaccurate`` (not solved) when none certifies its
    answer, ``solver_error`` when both SDP solvers failed. ``route``: a cell's ``svm_route``
    (:mod:`attnsvm.svm.routes`).
    """
    t0 = time.perf_counter()
    d = cons.d
    if cons.n_rows == 0:
        return SVMResult(np.zeros((d, d)), "optimal", 0.0, "trivial", time.perf_counter() - t0)
    direct = _try_direct(cons, t0, frobenius, route)
    if direct is not None:
        return direct
    return _solve_conic(cons, t0, frobenius)


def solve_nuclear_many(
    conss: list[Constraints], frobenius: list[SVMResult | None] | None = None,
    route: str = "auto",
) -> list[SVMResult]:  # fmt: skip
    """:func:`solve_nuclear` of every constraint set (``frobenius``: their Frobenius answers,
    as there), the same answers, bit for bit, in less time.

    The instances whose first route is the primal-dual method (attnsvm.svm.nuclear_pd) run
    it together, every instance of one shape in one batch
    (:func:`~attnsvm.svm.nuclear_pd.solve_primal_dual_many`: an instance's arithmetic is the
    one it has alone, so its answer does not depend on the batch); the certificate and every
    later route (refinement, Clarabel / SCS, cvxpy) then run per instance exactly as in
    :func:`solve_nuclear`. A batch that raises is solved per instance instead. Each answer's
    ``seconds`` is its own work plus its share of its batch.
    """
    frobenius = [None] * len(conss) if frobenius is None else list(frobenius)
    out: list[SVMResult | None] = [None] * len(conss)
    plans: dict[int, _Plan] = {}
    spent: dict[int, float] = {}
    for i, cons in enumerate(conss):
        t0 = time.perf_counter()
        if cons.n_rows == 0:
            out[i] = solve_nuclear(cons, frobenius[i], route)
            continue
        plan = _plan_direct(cons, t0, frobenius[i], route)
        if isinstance(plan, _Plan):
            plans[i] = plan
            spent[i] = time.perf_counter() - t0
        elif plan is not None:
            out[i] = plan
        else:
            out[i] = _solve_conic(cons, t0, frobenius[i])
    first: dict[int, tuple] = {}
    todo = [i for i, plan in plans.items() if plan.order[0] == "primal-dual"]
    t0 = time.perf_counter()
    try:
        answers = solve_primal_dual_many([_reduced(plans[i].prob) for i in todo])
    except Exception:  # noqa: BLE001 - solved per instance below, as solve_nuclear does
        answers = None
    if todo and answers is not None:
        share = (time.perf_counter() - t0) / len(todo)
        for i, res in zip(todo, answers, strict=True):
            first[i] = _lift_certificate(plans[i].prob, res)
            spent[i] += share
    for i, plan in plans.items():
        plan.t0 = time.perf_counter() - spent[i]
        direct = _run_direct(plan, first.get(i))
        out[i] = direct if direct is not None else _solve_conic(plan.cons, plan.t0, frobenius[i])
    return out


def _solve_conic(cons: Constraints, t0: float, frobenius: SVMResult | None) -> SVMResult:
    """:func:`solve_nuclear` after the direct path: the Frobenius verdict, else the cvxpy
    route (Clarabel / SCS on the reduced problem)."""
    verdict = _frobenius_verdict(cons, t0, frobenius)
    if verdict is not None:
        return verdict
    red = reduce(cons)
    eq = cons.equality
    A_eq, b_eq, _ = independent_equalities(red.A[eq], cons.rhs[eq])
    A_in, b_in = red.A[~eq], cons.rhs[~eq]
    size = sum(red.shape)
    order = _sdp_order(size)
    messages = []
    import cvxpy as cp  # only the conic route needs it (see _solve_sdp)

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
        ok = viol <= VERIFY_TOL and gap <= GAP_TOL  # a certified gap always (issue 12)
        if viol > VERIFY_TOL:
            messages.append(f"max relative violation {viol:.2e}")
        messages.append(f"{solver} status {status}, certified gap {gap:.1e}")
        if not ok and solver != order[-1]:
            continue  # the next solver may certify its answer
        messages.append(f"reduced size {red.shape}")
        return SVMResult(
            W, "optimal" if ok else "optimal_inaccurate", nuclear_norm(W),
            f"cvxpy-{solver}", time.perf_counter() - t0, "; ".join(messages),
        )  # fmt: skip
    return SVMResult(
        None, "solver_error", float("nan"), f"cvxpy-{order[0]}", time.perf_counter() - t0,
        "; ".join(messages),
    )  # fmt: skip
