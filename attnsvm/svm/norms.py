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
    solve_frobenius,
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
#: inequality-only systems with more rows than this take the working set first (issue 28;
#: docs/science.md §10, "At size"): Clarabel's cost grows with rows x d^2 on the full system
WS_ROWS = 1000
#: rows of the first working set: those of least margin under the Frobenius answer
WS_START_ROWS = 500
#: most rows that join per round: the most violated
WS_ADD_ROWS = 300
#: fewest rows that join per round when any row is violated (topped up with those of least
#: margin ratio)
WS_MIN_ADD = 50
#: largest working set before the route hands over to the full system
WS_MAX_ROWS = 6000
#: rounds before the route hands over to the full system
WS_MAX_ROUNDS = 20
#: relative violation up to which a row outside the set counts as met (the answer is then
#: scaled onto the feasible set and every row checked to ``VERIFY_TOL``, as on every route)
WS_TOL = 1e-9


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


def _solve_working_set(
    cons: Constraints, p
) -> tuple[str, np.ndarray | None, np.ndarray | None] | None:
    """:func:`_solve_cvxpy` on a working set of rows (docs/science.md §10, "At size").

    The set starts with the ``WS_START_ROWS`` rows of least margin ratio under the Frobenius
    answer (the same feasible set); each round solves the SVM on the set, checks every row
    against its W (N d^2 flops) and, while any is violated, adds the violated rows (at most
    ``WS_ADD_ROWS``, the most violated first; at least ``WS_MIN_ADD`` rows, topped up with
    those of least margin ratio). The optimum
    on a subset is a lower bound of the full one, so when no row is violated its W is optimal
    for all rows, and its multipliers padded with zeros are dual feasible for all rows: the
    caller's certificate (every row, weak-duality gap) is today's, unchanged. ``None`` (the
    caller solves the full system) when the Frobenius answer or a round fails, the set would
    pass ``WS_MAX_ROWS`` or ``WS_MAX_ROUNDS`` pass (and the caller also hands over when the
    answer does not certify)."""
    fro = solve_frobenius(cons)
    if not fro.solved:
        return None  # infeasible or unsolved: the full system decides and certifies
    ratio = cons.values(fro.W) / cons.rhs
    S = np.sort(np.argsort(ratio, kind="stable")[:WS_START_ROWS])
    for _ in range(WS_MAX_ROUNDS):
        status, W, lam_S = _solve_cvxpy(cons.subset(S), p)
        if W is None:
            return None
        ratio = cons.values(W) / cons.rhs
        rest = np.setdiff1d(np.arange(cons.n_rows), S, assume_unique=True)
        if not np.any(ratio[rest] < 1.0 - WS_TOL):
            lam = np.zeros(cons.n_rows)
            lam[S] = lam_S
            return status, W, lam
        # the violated rows (most violated first), topped up to WS_MIN_ADD with the rows
        # nearest to violation: a round that adds a handful of rows costs a whole solve
        n_add = min(max(int(np.sum(ratio[rest] < 1.0 - WS_TOL)), WS_MIN_ADD), WS_ADD_ROWS)
        add = rest[np.argsort(ratio[rest], kind="stable")[:n_add]]
        if S.size + add.size > WS_MAX_ROWS:
            return None
        S = np.union1d(S, add)
    return None


def solve_norm_svm(cons: Constraints, norm: str) -> SVMResult:
    """``min ||W||_norm`` over the Att-SVM rows ``cons`` (docs/science.md §10), certified.

    Inequality-only systems of more than ``WS_ROWS`` rows are first solved on a working set
    (:func:`_solve_working_set`, solver name ending ``-ws``); an answer it does not certify
    (or none) hands over to the solve on all rows. Returns an
    :class:`attnsvm.svm.frobenius.SVMResult` whose ``objective`` is the norm of W; ``optimal``
    only with every row within ``VERIFY_TOL`` and a certified gap <= ``GAP_TOL``.
    """
    p = _check(norm)
    t0 = time.perf_counter()
    solver = f"cvxpy-clarabel-{norm}"
    if cons.n_rows > WS_ROWS and not cons.equality.any():
        try:
            found = _solve_working_set(cons, p)
        except Exception:  # noqa: BLE001 - the full system below decides
            found = None
        if found is not None and found[1] is not None:
            res = _certified(cons, norm, *found, solver + "-ws", t0)
            if res.status == "optimal":
                return res
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
    return _certified(cons, norm, status, W, lam, solver, t0)


def _certified(
    cons: Constraints, norm: str, status: str, W: np.ndarray, lam, solver: str, t0: float
) -> SVMResult:
    """The answer ``W`` scaled onto the feasible set, every row checked, and the certified
    relative gap of the multipliers ``lam``: ``optimal`` or ``optimal_inaccurate``."""
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
