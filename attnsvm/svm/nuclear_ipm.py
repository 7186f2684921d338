"""Dual barrier interior-point method for small nuclear-norm Att-SVMs (docs/science.md §4).

The reduced Att-SVM_* is ``min ||M||_* s.t. a_k^T M b_k >= c_k`` (every ``c_k > 0``), with M
``p x q``. Its dual (the one :func:`attnsvm.svm.nuclear.duality_gap` certifies with) is

    max c^T lam  s.t.  lam >= 0,  ||G(lam)||_2 <= 1,   G(lam) = sum_k lam_k a_k b_k^T,

and ``||G||_2 <= 1`` is the LMI ``[[I, G], [G^T, I]] >= 0`` whose log-determinant is
``log det(I - G^T G)``. The barrier method minimizes

    phi_t(lam) = -t c^T lam - sum_k log lam_k - log det(I - G^T G)

for growing t (times ``T_FACTOR`` after each centering) by Newton steps with a backtracking
line search that never leaves the domain. At a central point ``t c_k + 1 / lam_k =
2 a_k^T G S b_k`` with ``S = (I - G^T G)^{-1}``, so ``M = (2 / t) G S`` meets every row with
slack ``1 / (t lam_k)`` and ``[[(2/t)(I + G S G^T), M], [M^T, (2/t) S]] >= 0``: a primal point
whose duality gap is about ``(N + p + q) / t``. That point loses accuracy as t grows (S is
ill-conditioned), so :func:`polish` rebuilds the primal from the optimality conditions (tight
singular subspace of G, active rows). Nothing here is trusted: every answer carries the
certified gap of ``||M||_*`` to the dual bound ``c^T lam / ||G(lam)||_2``, and the caller
accepts it only below ``attnsvm.svm.nuclear.GAP_TOL``.

Why: at the sizes of the paper's experiments (N ~ 40 rows, p + q ~ 16) one Newton step is a
few dense 40 x 40 operations, and ~45 of them cost ~2.5 ms, while a general conic
solver spends ~1.5 ms per iteration on a 136 x 136 dense PSD block (BENCHMARKS.md as of commit
8948a9c, "What got E2 from 11x to 52x").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

#: factor by which t grows after each centering
T_FACTOR = 30.0
#: Newton decrement below which a point counts as centered and the full Newton step is
#: trusted (for a self-concordant barrier it stays in the domain when delta < 1)
CENTERED = 1.0
#: sufficient decrease of the line search, as a fraction of the Newton decrement squared
ARMIJO = 0.1
#: Newton decrement up to which the line search starts from the full step
LS_START = 4.0
#: Newton decrement of the last centering, whose point gives the returned primal
FINAL_CENTERED = 1e-3
#: relative duality-gap estimate ``(N + p + q) / (t c^T lam)`` at which the path stops
TARGET_GAP = 1e-9
#: certified gap below which a result is returned; above it the path continues to a 100x
#: smaller target (down to MIN_TARGET_GAP), whose polish usually certifies
ACCEPT_GAP = 1e-8
MIN_TARGET_GAP = 1e-12
#: ``1 - sigma_i(G)`` up to which a singular direction of G counts as tight (polish)
TIGHT_SIGMA = 1e-4
#: multipliers at least this fraction of the largest count as active rows (polish)
ACTIVE_LAM = 1e-6


@dataclass
class DualBarrierResult:
    """Primal ``M`` (p x q), dual ``lam`` (N,), certified relative gap, Newton steps taken."""

    M: np.ndarray
    lam: np.ndarray
    gap: float
    newton_steps: int
    polished: bool = False


def _cholesky(K: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor, or None when K is not numerically positive definite.

    LAPACK's potrf directly: numpy's wrapper costs 5x more at these sizes, and this runs a
    few times per Newton step.
    """
    L, info = lapack.dpotrf(K, lower=1)
    return L if info == 0 else None


def _phi_parts(A, B, c, lam, t, I_q) -> tuple[float, tuple | None]:
    """``(phi_t(lam), (G(lam), L))``, ``phi_t`` the barrier function (``I_q``: the q x q
    identity), with ``L`` the Cholesky factor of ``I - G^T G``, which
    the Newton step at an accepted ``lam`` would compute again (the same operations, so the
    same bits); ``(inf, None)`` outside the domain."""
    if lam.min() <= 0:
        return float("inf"), None
    G = A.T @ (lam[:, None] * B)
    L = _cholesky(I_q - G.T @ G)
    if L is None:
        return float("inf"), None
    phi = float(-t * (c @ lam) - np.log(lam).sum() - 2.0 * np.log(L.diagonal()).sum())
    return phi, (G, L)


def certified_gap(A, B, c, M, lam, upper: float | None = None) -> float:
    """Relative gap ``(||M||_* - c^T lam / ||G(lam)||_2) / ||M||_*`` (weak duality).

    ``upper``: ``||M||_*`` when the caller has it (the same sum of singular values)."""
    if upper is None:
        upper = float(np.linalg.svd(M, compute_uv=False).sum())
    if upper <= 0:
        return float("inf")
    return (upper - _dual_bound(A, B, c, lam)) / upper


def _dual_bound(A, B, c, lam) -> float:
    """``c^T lam / ||G(lam)||_2`` for ``lam >= 0``: a lower bound on the optimum (-inf if none)."""
    lam = np.maximum(lam, 0.0)
    spec = float(np.linalg.norm(A.T @ (lam[:, None] * B), 2))
    return float(c @ lam) / spec if spec > 0 else -float("inf")


def _primal(A, B, c, G, S, t) -> np.ndarray:
    """``M = (2/t) G S``, scaled up so every row holds (``c > 0``: scaling keeps the rows)."""
    M = (2.0 / t) * (G @ S)
    ratio = float(np.min(np.einsum("kp,pq,kq->k", A, M, B) / c))
    return M / ratio if 0 < ratio < 1 else M


def _tight_subspace(G: np.ndarray):
    """Singular vectors of G split into tight (``1 - sigma <= TIGHT_SIGMA``) and the rest."""
    U, sig, Vt = np.linalg.svd(G)
    r = int(np.sum(1.0 - sig <= TIGHT_SIGMA))
    return U, Vt.T, r


def polish(A, B, c, lam, G) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Primal and dual from the optimality conditions (docs/science.md §4, Att-SVM_*).

    ``G(lam) in d||M||_*`` means ``M = U_1 K V_1^T`` with ``K >= 0``, where ``U_1, V_1`` are the
    singular vectors of G whose singular value is 1, every row with ``lam_k > 0`` holds with
    equality, and ``G = U_1 V_1^T + (a part orthogonal to U_1 and V_1 of norm < 1)``. Given
    the tight subspace and the active rows from the barrier, K and the active multipliers
    solve small linear systems, free of the barrier's ill-conditioning at large t. Returns
    ``(M or None, lam or None)``: None where a system does not pin its unknowns down or K is
    not PSD. The caller certifies whatever is returned.
    """
    U, V, r = _tight_subspace(G)
    if r == 0:
        return None, None
    active = lam >= ACTIVE_LAM * lam.max()
    ua, vb = A[active] @ U, B[active] @ V  # (n_a, p), (n_a, q)
    return _polish_primal(A, B, c, active, ua[:, :r], vb[:, :r], U[:, :r], V[:, :r]), (
        _polish_dual(lam, active, ua, vb, r)
    )


def _polish_primal(A, B, c, active, a, b, U1, V1) -> np.ndarray | None:
    r = U1.shape[1]
    iu = np.triu_indices(r)
    # a^T K b with K symmetric, over the upper triangle (off-diagonals appear twice)
    coef = a[:, iu[0]] * b[:, iu[1]] + np.where(iu[0] != iu[1], a[:, iu[1]] * b[:, iu[0]], 0.0)
    if coef.shape[0] < coef.shape[1]:
        return None
    sol, _, rank_, _ = np.linalg.lstsq(coef, c[active], rcond=None)
    if rank_ < coef.shape[1]:
        return None
    K = np.zeros((r, r))
    K[iu] = sol
    K = K + np.triu(K, 1).T
    w, Q = np.linalg.eigh(K)
    if w.min() < -1e-9 * max(w.max(), 0.0):
        return None
    M = U1 @ ((Q * np.maximum(w, 0.0)) @ Q.T) @ V1.T
    ratio = float(np.min(np.einsum("kp,pq,kq->k", A, M, B) / c))
    if ratio <= 0:
        return None
    return M / ratio if ratio < 1 else M


def _polish_dual(lam, active, ua, vb, r) -> np.ndarray | None:
    """Active multipliers with ``U^T G V = [[I_r, 0], [0, *]]`` (least squares)."""
    p, q = ua.shape[1], vb.shape[1]
    rows, cols = np.nonzero((np.arange(p)[:, None] < r) | (np.arange(q)[None, :] < r))
    coef = (ua[:, rows] * vb[:, cols]).T  # (equations, n_a)
    rhs = ((rows == cols) & (rows < r)).astype(np.float64)
    sol = np.linalg.lstsq(coef, rhs, rcond=None)[0]
    if not np.all(np.isfinite(sol)):
        return None
    out = np.zeros_like(lam)
    out[active] = np.maximum(sol, 0.0)
    return out


def solve_dual_barrier(
    A: np.ndarray,
    B: np.ndarray,
    c: np.ndarray,
    *,
    target_gap: float = TARGET_GAP,
    max_steps: int = 300,
) -> DualBarrierResult | None:
    """Att-SVM_* on reduced rows ``a_k`` (rows of A, N x p) and ``b_k`` (rows of B, N x q).

    Follows the central path until its gap estimate ``(N + p + q) / t`` is ``target_gap``
    relative, then takes the best certified pair of the central and the
    optimality-condition (:func:`polish`) primals and duals; when that pair certifies only
    above ``ACCEPT_GAP``, the path goes on to a 100x smaller estimate (down to
    ``MIN_TARGET_GAP``) and the best pair so far is returned. None when the method breaks
    down before any pair (a singular Newton system, no progress, ``max_steps`` reached): the
    caller then uses a general conic solver. Requires ``c > 0`` and a feasible primal
    (otherwise the dual is unbounded and the method reports None).
    """
    A, B, c = (np.asarray(x, dtype=np.float64) for x in (A, B, c))
    N = c.size
    if N == 0 or np.any(c <= 0):
        return None
    swap = B.shape[1] > A.shape[1]
    if swap:  # keep the Schur complement on the smaller side q
        A, B = B, A
    p, q = A.shape[1], B.shape[1]
    I_q = np.eye(q)
    AAt = A @ A.T
    s1 = float(np.linalg.norm(A.T @ B, 2))
    if s1 <= 0:
        return None
    lam = np.full(N, 0.5 / s1)
    theta = N + p + q
    t = theta / float(c @ lam)
    steps = 0
    phi_t = t
    # phi at the current lam, for the t of phi_t, and the G(lam), Cholesky pair behind it
    phi_last, parts = _phi_parts(A, B, c, lam, t, I_q)
    best = None  # best certified result so far (the path may continue after one)
    while steps < max_steps:
        newton = _newton_step(A, B, c, lam, t, I_q, AAt, parts)
        if newton is None:
            return best
        G, S, y, delta = newton
        steps += 1
        done = theta / (t * float(c @ lam)) <= target_gap
        if done and delta <= FINAL_CENTERED:
            res = _result(A, B, c, lam, G, S, t, steps, swap)
            best = res if best is None or res.gap < best.gap else best
            if res.gap <= ACCEPT_GAP or target_gap <= MIN_TARGET_GAP:
                return best
            target_gap /= 100.0  # the polish missed: follow the path further and retry
            done = False
        phi0 = phi_last - (t - phi_t) * float(c @ lam)  # phi_t from phi at the last t
        moved = _line_search(A, B, c, lam, y, delta, t, phi0, I_q)
        if moved is None:
            return best
        (lam, phi_last, parts), phi_t = moved, t
        if delta <= CENTERED and not done:
            t = min(t * T_FACTOR, theta / (target_gap * float(c @ lam)))
    return best


def _newton_step(A, B, c, lam, t, I_q, AAt, parts=None) -> tuple | None:
    """``(G, S, y, delta)`` at ``lam``: ``G(lam)``, ``S = (I - G^T G)^{-1}``, the Newton step
    ``y`` of ``phi_t`` in the variable scaled by lam (``lam <- lam (1 + alpha y)``) and the
    Newton decrement ``delta``; None when ``I - G^T G`` or the Newton system is singular.
    ``parts``: ``(G, L)`` of :func:`_phi_parts` at this ``lam``, when already computed."""
    N = c.size
    if parts is None:
        G = A.T @ (lam[:, None] * B)
        L = _cholesky(I_q - G.T @ G)
    else:
        G, L = parts
    if L is None:
        return None
    S = lapack.dpotrs(L, I_q, lower=1)[0]
    AG = A @ G  # (N, q)
    BS = B @ S  # (N, q)
    E = BS @ AG.T  # E_kl = b_k^T S G^T a_l
    g = -t * c - 1.0 / lam + 2.0 * E.diagonal()
    H = 2.0 * (E * E.T + (BS @ B.T) * (AAt + (AG @ S) @ AG.T))
    # Jacobi scaling by lam: the scaled Hessian is I + diag(lam) H diag(lam)
    Hs = lam[:, None] * H * lam[None, :]
    Hs.flat[:: N + 1] += 1.0
    gs = lam * g
    y = _solve(Hs, -gs)
    if y is None:
        return None
    return G, S, y, float(np.sqrt(max(-(gs @ y), 0.0)))


def _line_search(A, B, c, lam, y, delta, t, phi0, I_q) -> tuple | None:
    """Backtracking line search on ``phi_t`` along ``lam (1 + alpha y)``:
    ``(lam, phi, parts)`` with ``parts`` of :func:`_phi_parts` at the new ``lam``.

    Starts from the full Newton step when ``delta <= LS_START`` (far from the centre the full
    step leaves the domain: it starts at ``LS_START / delta``); None when no step of at least
    1e-10 of it decreases phi.
    """
    alpha = min(1.0, LS_START / delta) if delta > 0 else 1.0
    while True:
        new = lam * (1.0 + alpha * y)
        phi, parts = _phi_parts(A, B, c, new, t, I_q)
        # near the centre the Newton step is trusted (quadratic convergence; phi's
        # decrease drowns in rounding at large t): it only has to stay in the domain
        if phi <= phi0 - ARMIJO * alpha * delta * delta or (delta <= CENTERED and np.isfinite(phi)):
            return new, phi, parts
        alpha *= 0.5
        if alpha < 1e-10:
            return None


def _result(A, B, c, lam, G, S, t, steps, swap) -> DualBarrierResult:
    """The best certified pair among the central and the polished primals and duals.

    The certified gap separates: the smallest ``||M||_*`` and the largest dual bound.
    """
    M_pol, lam_pol = polish(A, B, c, lam, G)
    primals = [_primal(A, B, c, G, S, t)] + ([M_pol] if M_pol is not None else [])
    duals = [lam] + ([lam_pol] if lam_pol is not None else [])
    uppers = [float(np.linalg.svd(M, compute_uv=False).sum()) for M in primals]
    lowers = [_dual_bound(A, B, c, y) for y in duals]
    i, j = int(np.argmin(uppers)), int(np.argmax(lowers))
    gap = (uppers[i] - lowers[j]) / uppers[i] if uppers[i] > 0 else float("inf")
    M = primals[i]
    return DualBarrierResult(M.T if swap else M, duals[j], gap, steps, polished=i + j > 0)


def _solve(Hs: np.ndarray, r: np.ndarray) -> np.ndarray | None:
    """``Hs^{-1} r`` by Cholesky, or by least squares when Hs is not numerically PD."""
    Lh = _cholesky(Hs)
    if Lh is not None:
        return lapack.dpotrs(Lh, r, lower=1)[0]
    try:
        return np.linalg.lstsq(Hs, r, rcond=None)[0]
    except np.linalg.LinAlgError:
        return None
