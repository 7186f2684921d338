"""A working set around the primal-dual method: nuclear Att-SVMs with thousands of rows.

Implements docs/science.md §4, Att-SVM_* (``W_mm_*``), "The SVMs at size", on the reduced rows
of :mod:`attnsvm.svm.nuclear` (``min ||M||_* s.t. a_k^T M b_k >= c_k``, every ``c_k > 0``) for
instances with more rows than the primal-dual method of :mod:`attnsvm.svm.nuclear_pd` takes
at once (its Schur complement is N x N: ~6 N^2 doubles and N^3 / 3 flops per iteration).

The optimum is pinned down by its tight rows, far fewer than all rows at these sizes (a
rank-r optimum of a d x d problem generically has at most ``r (2d - r)``), so the
primal-dual method runs on a working set S:

1. S starts with the rows of least margin under a warm start (the Frobenius answer, which
   shares the feasible set: ``WS_START_ROWS`` rows, or all rows it holds with equality);
2. the primal-dual method solves the SVM on S, giving ``M_S`` and multipliers ``lam_S``;
3. every row is checked against ``M_S`` (N (p + q) flops, never an N x N matrix); when none is
   violated by more than ``WS_TOL`` relative, ``M_S`` (the optimum of a relaxation) meets every
   row and is optimal for all rows; else the rows without multiplier leave S and the most
   violated rows join it (``WS_MIN_ADD`` rows, or as many as S keeps, at most ``WS_MAX_ROWS``).

The multipliers ``lam_S`` padded with zeros are dual feasible for all rows (``G`` only sees
rows of S), so the certificate is today's one unchanged: the caller checks every row of the
lifted W and accepts it only with the certified relative gap ``(||W||_* - c^T lam /
||G(lam)||_2) / ||W||_*`` <= ``attnsvm.svm.nuclear.GAP_TOL``, and otherwise goes on to the
next solver (Clarabel / SCS), as for every other route. Memory: the primal-dual method's
~6 |S|^2 doubles (|S| <= ``WS_MAX_ROWS``: at most ~430 MB) plus O(N (p + q)) for the rows
(bench/bench_scaling.py measures the peak).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnsvm.svm.nuclear_pd import solve_primal_dual

#: rows the first working set takes (those of least margin under the warm start), unless the
#: warm start holds more rows with equality (they all join)
WS_START_ROWS = 1500
#: rows the working set may hold: the primal-dual method's N x N matrices (~6 N^2 doubles,
#: ~430 MB at 3,000 rows; its N^3 / 3-flop Cholesky sets the time)
WS_MAX_ROWS = 3000
#: fewest violated rows that join per round (as many as the set keeps when that is more)
WS_MIN_ADD = 200
#: relative violation ``(c_k - a_k^T M b_k) / c_k`` up to which a row counts as met; the
#: caller scales W by at most 1e-4 (``attnsvm.svm.nuclear._rescale``) and re-checks every row
WS_TOL = 1e-9
#: multipliers at least this fraction of the largest keep their row in the working set
WS_KEEP_LAM = 1e-8
#: rounds before the route gives up (the caller then uses a conic solver)
WS_MAX_ROUNDS = 30
#: a warm-start row counts as tight when its margin ratio is below 1 + this
WS_TIGHT = 1e-6


@dataclass
class WorkingSetResult:
    """Primal ``M`` (p x q), multipliers ``lam`` over all N rows, rounds, the last set's size."""

    M: np.ndarray
    lam: np.ndarray
    gap: float
    rounds: int
    rows: int
    note: str


def solve_working_set(
    A: np.ndarray, B: np.ndarray, c: np.ndarray, warm: np.ndarray | None = None
) -> WorkingSetResult | None:
    """Att-SVM_* on reduced rows ``a_k`` (rows of A, N x p), ``b_k`` (rows of B, N x q), ``c``.

    ``warm``: margins ``a_k^T M0 b_k`` of a warm start M0 (any feasible point, e.g. the
    Frobenius answer); None orders the first working set by ``c_k / (|a_k| |b_k|)`` (rows
    hardest to meet first). Returns the last round's primal and its multipliers padded with
    zeros (module docstring), or None when the primal-dual method breaks down, the working set
    would outgrow ``WS_MAX_ROWS``, or ``WS_MAX_ROUNDS`` pass. Requires ``c > 0``. The caller
    certifies whatever comes back (every row, duality gap).
    """
    A, B, c = (np.asarray(v, dtype=np.float64) for v in (A, B, c))
    N = c.size
    if N == 0 or np.any(c <= 0):
        return None
    if warm is not None and np.all(np.isfinite(warm)):
        ratio = np.asarray(warm, dtype=np.float64) / c
        size = max(WS_START_ROWS, int(np.sum(ratio < 1.0 + WS_TIGHT)))
        order = np.argsort(ratio, kind="stable")
    else:
        norms = np.linalg.norm(A, axis=1) * np.linalg.norm(B, axis=1)
        order = np.argsort(-c / np.maximum(norms, np.finfo(float).tiny), kind="stable")
        size = WS_START_ROWS
    S = np.sort(order[: min(N, WS_MAX_ROWS, size)])
    for rounds in range(1, WS_MAX_ROUNDS + 1):
        res = solve_primal_dual(A[S], B[S], c[S])
        if res is None:
            return None
        viol = 1.0 - np.einsum("kp,kp->k", A @ res.M, B) / c
        bad = np.flatnonzero(viol > WS_TOL)
        if bad.size == 0:
            lam = np.zeros(N)
            lam[S] = np.maximum(res.lam, 0.0)
            note = f"working set: {rounds} rounds, {S.size} of {N} rows"
            return WorkingSetResult(res.M, lam, res.gap, rounds, int(S.size), note)
        keep = S[res.lam > WS_KEEP_LAM * max(float(res.lam.max()), 0.0)]
        k = min(bad.size, max(WS_MIN_ADD, keep.size), WS_MAX_ROWS - keep.size)
        if k <= 0:
            return None
        add = bad[np.argsort(-viol[bad], kind="stable")[:k]]
        S = np.union1d(keep, add)
    return None
