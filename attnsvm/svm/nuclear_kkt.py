"""Newton refinement of the optimality conditions of a nuclear Att-SVM (docs/science.md §4).

Implements docs/science.md §4, Att-SVM_* (``W_mm_*``), "The SVMs at size", on the reduced rows
of :mod:`attnsvm.svm.nuclear` (``min ||M||_* s.t. a_k^T M b_k >= c_k``, every ``c_k > 0``).

Why: the interior-point methods (:mod:`attnsvm.svm.nuclear_pd` and its working set)
stall short of ``GAP_TOL`` on the photo tokens at n = 32, 64 (issue 28): near-duplicate
patches need a large ``M`` (``||M||_2`` of a few hundred for margins of 1), the Schur
complement loses the primal rows (residual 1e-7..1e-5 while the complementarity gap is
1e-9), and the primal is ill-determined to first order (its blocks outside the tight
singular subspace of G cost only quadratically). Their dual, and the active rows and the rank
they identify, are right; this module solves the optimality conditions on that face exactly.

At an optimum of rank r with tight subspaces ``U_1, V_1`` of ``G(lam) = sum_k lam_k a_k b_k^T``
(``||G||_2 = 1``), ``M = U_1 K V_1^T`` with K >= 0. With the balanced factors
``P = U_1 K^{1/2}``, ``Q = V_1 K^{1/2}`` (``M = P Q^T``, the Burer-Monteiro form whose
``(||P||^2 + ||Q||^2) / 2 = ||M||_*``) the conditions on the active rows S are the square
system

    G(lam_S) Q = P,   G(lam_S)^T P = Q,   a_k^T P Q^T b_k = c_k  (k in S)

in ``(P, Q, lam_S)``: ``(p + q) r + |S|`` equations and unknowns, singular only along the
rotations ``(P, Q) -> (P O, Q O)``. Gauss-Newton steps (minimum-norm least squares, which
ignores that null space) converge quadratically from the interior-point iterate. At the
solution ``c^T lam = <G, M> = ||P||_F^2 = ||M||_*``: the gap closes to rounding.

Nothing here is trusted: the caller checks every row of the lifted W and accepts the pair
only with the certified relative gap ``(||W||_* - c^T lam / ||G(lam)||_2) / ||W||_*`` <=
``attnsvm.svm.nuclear.GAP_TOL``, the same certificate as every other route (multipliers of
rows outside S are zero, so ``lam`` is dual feasible for all rows after clipping at 0).
Memory: one dense Jacobian of ``((p + q) r + |S|)^2`` doubles, at most ``KKT_MAX_VARS^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``1 - sigma_i(G) / sigma_1(G)`` up to which a singular direction counts as tight (as the
#: polish of attnsvm.svm.nuclear_pd)
KKT_TIGHT = 1e-4
#: multipliers at least this fraction of the largest count as active rows
KKT_ACTIVE = 1e-6
#: Gauss-Newton steps at most, over all candidate faces and rounds (quadratic convergence
#: takes 3-14 from an interior-point iterate on the photo tokens); one step is a least-squares
#: solve with at most KKT_MAX_VARS unknowns (1.7 s at 2,000 on one core at load 3.4), so
#: this bounds the time (~70 s in the worst case; on the photo tokens 3-14 steps of at most
#: about 500 unknowns)
KKT_MAX_ITER = 40
#: residual ``||F||_inf / (1 + ||c||_inf + ||P||_max^2)`` at which the iteration stops
KKT_TOL = 1e-15
#: rounds of rows joining the active set (rows the Newton answer violates)
KKT_ROUNDS = 4
#: relative violation above which a row outside S joins it
KKT_VIOL = 1e-12
#: residual (relative to ``1 + ||P||_max^2``) below which a Newton answer is trusted enough
#: to let the rows it violates join (a diverged iterate violates rows at random)
KKT_JOIN = 1e-8
#: certified-gap estimate at which no further candidate face is tried
KKT_DONE = 1e-10
#: unknowns ``(p + q) r + |S|`` above which the dense Jacobian is not formed (32 MB at 2,000)
KKT_MAX_VARS = 2000


@dataclass
class KKTResult:
    """Primal ``M = P Q^T`` (p x q), multipliers ``lam`` (N,; zero off the active rows), the
    rank and active rows used, the Gauss-Newton steps and the final residual."""

    M: np.ndarray
    lam: np.ndarray
    rank: int
    active: int
    steps: int
    residual: float


def _residual(A, B, c, P, Q, lam):
    """``F(P, Q, lam)`` of the module docstring, stacked: (p r + q r + |S|,)."""
    G = A.T @ (lam[:, None] * B)
    rows = np.einsum("kp,kp->k", A @ P, B @ Q) - c
    return np.concatenate([(G @ Q - P).ravel(), (G.T @ P - Q).ravel(), rows]), G


def _jacobian(A, B, P, Q, G) -> np.ndarray:
    """Jacobian of :func:`_residual` in (vec P, vec Q, lam_S), row-major vec (symmetric)."""
    p, r = P.shape
    q = Q.shape[0]
    s = A.shape[0]
    BQ, AP = B @ Q, A @ P  # (s, r): Q^T b_k and P^T a_k
    # column k of d(GQ)/d lam_k is vec(a_k (Q^T b_k)^T), of d(G^T P)/d lam_k vec(b_k (P^T a_k)^T)
    Ca = (A[:, :, None] * BQ[:, None, :]).reshape(s, p * r).T
    Cb = (B[:, :, None] * AP[:, None, :]).reshape(s, q * r).T
    I_r = np.eye(r)
    J = np.zeros((p * r + q * r + s, p * r + q * r + s))
    ip, iq = slice(0, p * r), slice(p * r, p * r + q * r)
    il = slice(p * r + q * r, None)
    J[ip, ip] = -np.eye(p * r)
    J[ip, iq] = np.kron(G, I_r)
    J[ip, il] = Ca
    J[iq, ip] = np.kron(G.T, I_r)
    J[iq, iq] = -np.eye(q * r)
    J[iq, il] = Cb
    J[il, ip] = Ca.T
    J[il, iq] = Cb.T
    return J


def _largest_jump(values: np.ndarray) -> int:
    """Count of the leading values of a descending positive sequence before its largest
    ratio ``v_i / v_{i+1}`` (all of them when there is a single value)."""
    if values.size < 2:
        return int(values.size)
    v = np.maximum(values, np.finfo(float).tiny)
    with np.errstate(over="ignore"):  # a jump past the float range is the largest: inf
        return int(np.argmax(v[:-1] / v[1:])) + 1


def _faces(sig: np.ndarray, lam: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Candidate (rank, active rows) pairs read from the singular values of G (descending)
    and the multipliers: by thresholds (``KKT_TIGHT``, ``KKT_ACTIVE``) and by the largest
    jump of ``1 - sigma_i / sigma_1`` and of the sorted multipliers (the multipliers of
    active rows span up to 7 decades on the photo tokens, beyond any fixed threshold)."""
    slack = np.maximum(1.0 - sig / sig[0], 1e-16)  # ascending
    r_thr = int(np.sum(slack <= KKT_TIGHT))
    r_jump = int(np.argmax(slack[1:] / slack[:-1])) + 1 if sig.size > 1 else 1
    order = np.argsort(-lam, kind="stable")
    S_thr = np.sort(np.flatnonzero(lam >= KKT_ACTIVE * lam.max()))
    S_jump = np.sort(order[: _largest_jump(lam[order])])
    out: list[tuple[int, np.ndarray]] = []
    for r in dict.fromkeys([r_jump, r_thr]):
        for S in (S_jump, S_thr):
            if r > 0 and not any(r == r0 and np.array_equal(S, S0) for r0, S0 in out):
                out.append((r, S))
    return out


def _newton(A, B, c, P, Q, y, max_iter: int):
    """Gauss-Newton on :func:`_residual` from ``(P, Q, y)``: (P, Q, y, steps, residual)."""
    p, r = P.shape
    q = Q.shape[0]
    F, G = _residual(A, B, c, P, Q, y)
    norm = float(np.abs(F).max())
    steps = 0
    while steps < max_iter:
        scale = 1.0 + float(np.abs(c).max()) + float(np.abs(P).max()) ** 2
        if norm <= KKT_TOL * scale:
            break
        step = np.linalg.lstsq(_jacobian(A, B, P, Q, G), -F, rcond=None)[0]
        if not np.all(np.isfinite(step)):
            break
        dP = step[: p * r].reshape(p, r)
        dQ = step[p * r : (p + q) * r].reshape(q, r)
        dy = step[(p + q) * r :]
        t = 1.0
        while t >= 1.0 / 64:
            F1, G1 = _residual(A, B, c, P + t * dP, Q + t * dQ, y + t * dy)
            norm1 = float(np.abs(F1).max())
            if norm1 < norm:
                break
            t /= 2.0
        else:
            break  # no step length reduces the residual
        P, Q, y, F, G, norm = P + t * dP, Q + t * dQ, y + t * dy, F1, G1, norm1
        steps += 1
    return P, Q, y, steps, norm


def _gap(A, B, c, M, lam) -> float:
    """Relative gap of ``||M||_*`` (scaled up to meet every row, as the caller does by at
    most 1e-4) to ``c^T lam / ||G(lam)||_2``: how candidates are ranked (the caller
    re-certifies)."""
    ratio = float(np.min(np.einsum("kp,pq,kq->k", A, M, B) / c))
    if not ratio > 1.0 - 1e-4:
        return float("inf")
    upper = float(np.linalg.svd(M, compute_uv=False).sum()) / min(ratio, 1.0)
    spec = float(np.linalg.norm(A.T @ (lam[:, None] * B), 2))
    if not (upper > 0 and spec > 0):
        return float("inf")
    return (upper - float(c @ lam) / spec) / upper


def refine_kkt(
    A: np.ndarray,
    B: np.ndarray,
    c: np.ndarray,
    M: np.ndarray,
    lam: np.ndarray,
    *,
    max_iter: int = KKT_MAX_ITER,
) -> KKTResult | None:
    """Att-SVM_* from an approximate pair ``(M, lam)`` on reduced rows ``a_k`` (rows of A,
    N x p), ``b_k`` (rows of B, N x q), ``c`` (module docstring).

    The rank r (tight singular values of ``G(lam)``) and the active rows S are read from the
    pair (:func:`_faces`: up to four candidates); for each, the factors start from the
    symmetric part of ``U_1^T M V_1`` and Gauss-Newton steps (halved while they do not reduce
    the residual) run until the residual is below ``KKT_TOL`` or stops falling; rows the
    answer violates then join S (lam 0) and Newton goes on, up to ``KKT_ROUNDS`` rounds;
    ``max_iter`` steps in all.
    Returns the candidate of least gap, or None when no candidate gives a finite answer or
    each would exceed ``KKT_MAX_VARS`` unknowns. Requires ``c > 0``; the caller certifies
    whatever comes back (every row, duality gap).
    """
    A, B, c, M, lam = (np.asarray(v, dtype=np.float64) for v in (A, B, c, M, lam))
    if c.size == 0 or np.any(c <= 0) or not (np.all(np.isfinite(M)) and np.all(np.isfinite(lam))):
        return None
    lam = np.maximum(lam, 0.0)
    G = A.T @ (lam[:, None] * B)
    U, sig, Vt = np.linalg.svd(G)
    if sig.size == 0 or not sig[0] > 0:
        return None
    p, q = A.shape[1], B.shape[1]
    best: KKTResult | None = None
    best_gap = float("inf")
    used = 0  # Gauss-Newton steps of all candidates: at most max_iter
    for r, S in _faces(sig, lam):
        U1, V1 = U[:, :r], Vt[:r].T
        K = U1.T @ M @ V1
        w, E = np.linalg.eigh(0.5 * (K + K.T))
        half = (E * np.sqrt(np.maximum(w, 0.0))) @ E.T
        P, Q, y = U1 @ half, V1 @ half, lam[S] / sig[0]
        steps = 0
        for _ in range(KKT_ROUNDS):
            if (p + q) * r + S.size > KKT_MAX_VARS or used >= max_iter:
                break
            P, Q, y, k, norm = _newton(A[S], B[S], c[S], P, Q, y, max_iter - used)
            steps, used = steps + k, used + k
            viol = 1.0 - np.einsum("kp,kp->k", A @ P, B @ Q) / c
            viol[S] = -np.inf
            bad = np.flatnonzero(viol > KKT_VIOL)
            out = np.zeros_like(lam)
            out[S] = np.maximum(y, 0.0)
            M1 = P @ Q.T
            if np.all(np.isfinite(M1)) and np.all(np.isfinite(out)):
                gap = _gap(A, B, c, M1, out)
                if best is None or gap < best_gap:  # the first candidate, or a better one
                    best, best_gap = KKTResult(M1, out, r, int(S.size), steps, norm), gap
            converged = norm <= KKT_JOIN * (1.0 + float(np.abs(P).max()) ** 2)
            if bad.size == 0 or not converged or not np.all(np.isfinite(M1)):
                break
            S = np.union1d(S, bad)
            y = out[S]
        if best_gap <= KKT_DONE:
            break
    return best
