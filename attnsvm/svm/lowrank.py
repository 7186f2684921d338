"""Rank-constrained Att-SVM_* (docs/science.md §4: ``min ||W||_*`` with rank(W) <= m).

For ``m < min(n, d)`` the rank constraint of Att-SVM_* can be active and the problem is not
convex. It is solved in factored form ``W = A B^T`` (A, B in R^{d x m}),

    min (||A||_F^2 + ||B||_F^2) / 2   s.t.   left_k^T A B^T right_k >= 1,

whose optimal value equals ``min ||W||_*`` over rank <= m (for any W of rank <= m the
balanced factorization ``A = U sqrt(S)``, ``B = V sqrt(S)`` attains ``||W||_*``).

Method: alternating exact convex solves with restarts. With B fixed the problem in A is a
Frobenius Att-SVM with right vectors ``B^T right_k`` (a QP, solved exactly by
:func:`attnsvm.svm.solve_frobenius`); likewise for B with A fixed; after each pair of solves
the product is re-factored in balanced form. Every step keeps W feasible and never increases
the objective, but the alternation stops at coordinate-wise optima: for small m the feasible
set splits into regions of different sign patterns of ``left_k^T A`` and ``B^T right_k``
that it cannot cross. Restarts therefore begin from the top-m right singular vectors of the
convex solution ``W_mm_*``, of the Frobenius solution ``W_mm``, of random perturbations of
``W_mm_*`` and of Gaussian matrices.

Quality: the convex optimum ``||W_mm_*||_*`` is a lower bound. When the best restart reaches
it (relative gap <= ``CERTIFY_TOL``) the answer is certified globally optimal; otherwise the
result reports the gap to the bound and the spread of the restarts' objectives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import solve_frobenius

#: relative gap to the convex lower bound below which the answer is certified optimal
CERTIFY_TOL = 1e-6
#: restarts whose objectives agree to this relative tolerance count as the same optimum
AGREE_TOL = 1e-4


@dataclass(frozen=True)
class LowRankResult:
    """Best factored solution over restarts.

    ``W`` (d, d) or None when no restart found a feasible rank-m point; ``objective`` its
    ``||W||_*``; ``objectives`` the final objective per restart (NaN: that start was
    infeasible); ``lower_bound`` the convex ``||W_mm_*||_*`` (NaN if not given);
    ``status``: ``certified`` (reaches the lower bound), ``feasible`` (above it, not
    certified) or ``infeasible``.
    """

    W: np.ndarray | None
    objective: float
    objectives: np.ndarray
    lower_bound: float
    status: str
    sweeps: int
    seconds: float

    @property
    def gap(self) -> float:
        """Relative gap ``objective / lower_bound - 1`` (NaN without both)."""
        if not (np.isfinite(self.objective) and np.isfinite(self.lower_bound)):
            return float("nan")
        return self.objective / self.lower_bound - 1.0

    @property
    def agreeing(self) -> int:
        """Number of restarts that end within ``AGREE_TOL`` of the best objective."""
        obj = self.objectives[np.isfinite(self.objectives)]
        if obj.size == 0:
            return 0
        return int(np.sum(obj <= obj.min() * (1 + AGREE_TOL)))


def _balanced(W: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, float]:
    U, s, Vt = np.linalg.svd(W)
    r = np.sqrt(s[:m])
    return U[:, :m] * r, Vt[:m].T * r, float(s[:m].sum())


def _solve_factor(cons: Constraints, right: np.ndarray, left: np.ndarray) -> np.ndarray | None:
    """``argmin ||F||_F`` s.t. ``left_k^T F right_k >= rhs_k`` (F: left dim x right dim)."""
    sub = Constraints(
        left=left,
        right=right,
        rhs=cons.rhs,
        equality=cons.equality,
        example=cons.example,
        token=cons.token,
    )
    res = solve_frobenius(sub)
    return res.W if res.solved else None


def _descend(
    cons: Constraints, B: np.ndarray, m: int, sweeps: int, tol: float
) -> tuple[np.ndarray | None, float, int]:
    """Alternate exact A- and B-solves from B; returns (W, ||W||_*, sweeps used)."""
    obj, W, k = np.inf, None, 0
    for k in range(1, sweeps + 1):
        A = _solve_factor(cons, cons.right @ B, cons.left)
        if A is None:
            return W, obj, k
        B = _solve_factor(cons, cons.left @ A, cons.right)
        if B is None:
            return W, obj, k
        A, B, new = _balanced(A @ B.T, m)
        W_new = A @ B.T
        done = obj - new <= tol * new
        W, obj = W_new, min(obj, new)
        if done:
            break
    return W, obj, k


def solve_rank_constrained(
    cons: Constraints,
    m: int,
    *,
    convex: np.ndarray | None = None,
    frobenius: np.ndarray | None = None,
    restarts: int = 12,
    sweeps: int = 100,
    tol: float = 1e-9,
    seed: int = 0,
) -> LowRankResult:
    """``min ||W||_*`` s.t. the constraints and rank(W) <= m, by factored alternation.

    ``convex``: the convex solution ``W_mm_*`` (gives the lower bound and the first start);
    ``frobenius``: ``W_mm`` (second start); then random perturbations of ``W_mm_*`` (relative
    size 0.1, 0.3, 1, 3), then Gaussian matrices, ``restarts`` starts in all.
    """
    t0 = time.perf_counter()
    d = cons.d
    rng = np.random.default_rng(seed)
    bound = float(np.linalg.svd(convex, compute_uv=False).sum()) if convex is not None else np.nan
    if convex is not None and np.linalg.matrix_rank(convex, tol=1e-9 * bound) <= m:
        return LowRankResult(convex, bound, np.array([bound]), bound, "certified", 0, 0.0)
    starts = [W for W in (convex, frobenius) if W is not None]
    base = convex if convex is not None else frobenius
    for scale in (0.1, 0.3, 1.0, 3.0):
        if base is not None and len(starts) < restarts:
            G = rng.standard_normal((d, d))
            starts.append(base + scale * np.linalg.norm(base) * G / np.linalg.norm(G))
    while len(starts) < restarts:
        starts.append(rng.standard_normal((d, d)))
    best, best_obj, objs, used = None, np.inf, [], 0
    for W0 in starts[:restarts]:
        _, B, _ = _balanced(W0, m)
        W, obj, k = _descend(cons, B, m, sweeps, tol)
        used += k
        objs.append(obj if W is not None else np.nan)
        if W is not None and obj < best_obj:
            best, best_obj = W, obj
    if best is None:
        status = "infeasible"
        best_obj = np.nan
    elif np.isfinite(bound) and best_obj <= bound * (1 + CERTIFY_TOL):
        status = "certified"
    else:
        status = "feasible"
    return LowRankResult(
        best, float(best_obj), np.array(objs), bound, status, used, time.perf_counter() - t0
    )
