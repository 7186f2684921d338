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

Many instances at once (:func:`solve_dual_barrier_many`, issue 28: E3 solves ~2,700 of
them): up to ``BATCH_MAX_ROWS`` rows, where an instance's Newton step costs more in Python and
numpy overhead than in arithmetic, the instances of one shape follow their paths together in
batches, every array operation of a Newton step and of its line search one call for the
batch, the factorizations one per instance. Every instance gets the BLAS and LAPACK calls of
:func:`solve_dual_barrier`, on the same numbers, so its answer is the same, bit for bit,
whatever its batch (tests/test_svm_nuclear_batched.py); larger instances are solved one by
one. Only where the central dual misses ``ACCEPT_GAP`` is the polished dual computed
(:func:`best_pair`): a pair that certifies with the central dual is accepted either way, so
the primal, the answer, is the one the polished dual would have come with.
"""

from __future__ import annotations

from collections.abc import Callable
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
    M, dual = _polish_parts(A, B, c, lam, G)
    return M, dual()


def _polish_parts(A, B, c, lam, G) -> tuple[np.ndarray | None, Callable[[], np.ndarray | None]]:
    """:func:`polish`'s primal, and its dual as a function computed on demand (its least
    squares problem costs more than the rest of the polish: :func:`best_pair` asks for it
    only where the unpolished dual misses ``ACCEPT_GAP``)."""
    U, V, r = _tight_subspace(G)
    if r == 0:
        return None, lambda: None
    active = lam >= ACTIVE_LAM * lam.max()
    ua, vb = A[active] @ U, B[active] @ V  # (n_a, p), (n_a, q)
    M = _polish_primal(A, B, c, active, ua[:, :r], vb[:, :r], U[:, :r], V[:, :r])
    return M, lambda: _polish_dual(lam, active, ua, vb, r)


def best_pair(A, B, c, primals: list, lam: np.ndarray, polished_dual) -> tuple:
    """``(i, dual, gap, polished_dual_used)``: the primal of least nuclear norm
    (``primals[i]``) and the dual of the largest bound ``c^T y / ||G(y)||_2`` among ``lam``
    and the polished dual, with their certified relative gap. ``polished_dual()`` is called
    only where ``lam``'s bound misses ``ACCEPT_GAP``: a pair that certifies with ``lam`` is
    accepted whatever the polished dual's bound, so the primal, the only answer the caller
    keeps after its own certificate, is the same either way."""
    uppers = [float(np.linalg.svd(M, compute_uv=False).sum()) for M in primals]
    i = int(np.argmin(uppers))
    upper, duals = uppers[i], [lam]
    lowers = [_dual_bound(A, B, c, lam)]
    if not (upper > 0 and (upper - lowers[0]) / upper <= ACCEPT_GAP):
        lam_pol = polished_dual()
        if lam_pol is not None:
            duals.append(lam_pol)
            lowers.append(_dual_bound(A, B, c, lam_pol))
    j = int(np.argmax(lowers))
    gap = (upper - lowers[j]) / upper if upper > 0 else float("inf")
    return i, duals[j], gap, j > 0


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
    A, B, c = (np.ascontiguousarray(x, dtype=np.float64) for x in (A, B, c))
    N = c.size
    if N == 0 or np.any(c <= 0):
        return None
    swap = B.shape[1] > A.shape[1]
    if swap:  # keep the Schur complement on the smaller side q
        A, B = B, A
    return _barrier_one(A, B, c, swap, target_gap, max_steps)


def _barrier_one(A, B, c, swap: bool, target_gap: float, max_steps: int):
    """The path of :func:`solve_dual_barrier` on checked rows (``c > 0``; A, B swapped when
    ``swap``, so that ``q <= p``)."""
    N = c.size
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
    # H = 2 (E o E^T + (B S B^T) o (A A^T + A G S G^T A^T)), formed in place (the same
    # operations on the same numbers as the expression, without its N x N temporaries)
    Hs = (AG @ S) @ AG.T
    Hs += AAt
    Hs *= BS @ B.T
    Hs += E * E.T
    Hs *= 2.0
    # Jacobi scaling by lam: the scaled Hessian is I + diag(lam) H diag(lam)
    Hs *= lam[:, None]
    Hs *= lam[None, :]
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
    """The best certified pair among the central and the polished primals and duals
    (:func:`best_pair`: the smallest ``||M||_*`` and the largest dual bound)."""
    M_pol, polished_dual = _polish_parts(A, B, c, lam, G)
    primals = [_primal(A, B, c, G, S, t)] + ([M_pol] if M_pol is not None else [])
    i, dual, gap, j = best_pair(A, B, c, primals, lam, polished_dual)
    M = primals[i]
    return DualBarrierResult(M.T if swap else M, dual, gap, steps, polished=i > 0 or j)


def _solve(Hs: np.ndarray, r: np.ndarray) -> np.ndarray | None:
    """``Hs^{-1} r`` by Cholesky, or by least squares when Hs is not numerically PD."""
    Lh = _cholesky(Hs)
    if Lh is not None:
        return lapack.dpotrs(Lh, r, lower=1)[0]
    try:
        return np.linalg.lstsq(Hs, r, rcond=None)[0]
    except np.linalg.LinAlgError:
        return None


# ----------------------------------------------------------------------------- many at once
#: instances of one shape per batch at most (their N x N Newton systems are formed together:
#: larger batches spill the cache), at least (a batch's own overhead per step is about that
#: of two instances solved alone), and rows at most: from ~60 rows an instance's Newton step
#: costs more in arithmetic than in Python overhead. Measured on E3's opt tokens, 100 seeds
#: (CPU ms per instance, alone vs batches of 25-32): 2.3-2.7 vs 1.4-1.7 at 20 rows, 3.7-4.1
#: vs 2.6-3.4 at 40-45, but 6.2-7.1 vs 6.0-8.0 at 60-70 rows ((15, 5, d), (5, 15, d))
BATCH_SIZE = 32
BATCH_MIN = 4
BATCH_MAX_ROWS = 48


def _dots(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``u_i^T v_i`` of every row pair (K, N) x (K, N): one BLAS dot per row, as ``u @ v``."""
    return (u[:, None, :] @ v[:, :, None])[:, 0, 0]


def _take(keep: np.ndarray | None, *arrays):
    """The rows ``keep`` of every array (the arrays themselves where ``keep`` is None)."""
    return arrays if keep is None else tuple(a[keep] for a in arrays)


def _phi_many(A, B, c, lam, t, I_q) -> tuple[np.ndarray, np.ndarray, list]:
    """:func:`_phi_parts` of K instances: ``(phi (K,), G (K, p, q), [L or None])``, phi
    ``inf`` and L None outside the domain; each instance's arithmetic is the one
    :func:`_phi_parts` does on it alone."""
    K = lam.shape[0]
    phi = np.full(K, np.inf)
    G = A.mT @ (lam[:, :, None] * B)
    Kq = I_q - G.mT @ G
    inside = lam.min(axis=1) > 0
    L = [_cholesky(Kq[i]) if inside[i] else None for i in range(K)]
    k = np.array([Li is not None for Li in L])
    if k.any():
        logdet = np.array([np.log(Li.diagonal()).sum() for Li in L if Li is not None])
        lk, tk, ck = lam[k], t[k], c[k]
        phi[k] = -tk * _dots(ck, lk) - np.log(lk).sum(axis=1) - 2.0 * logdet
    return phi, G, L


def _newton_many(A, B, c, lam, t, I_q, AAt, G, L) -> tuple:
    """:func:`_newton_step` of K instances at ``(G, L)`` of :func:`_phi_many`: ``(S, y,
    delta, ok)``, ``ok`` False where the Newton system could not be solved. The N x N arrays
    are updated in place, with the operations of :func:`_newton_step` in its order."""
    K, N = lam.shape
    S = np.stack([lapack.dpotrs(Li, I_q, lower=1)[0] for Li in L])
    AG = A @ G
    BS = B @ S
    E = BS @ AG.mT
    g = -t[:, None] * c - 1.0 / lam + 2.0 * np.diagonal(E, axis1=1, axis2=2)
    H = (AG @ S) @ AG.mT
    H += AAt
    H *= BS @ B.mT
    H += E * E.mT
    H *= 2.0
    H *= lam[:, :, None]  # Jacobi scaling: Hs = I + diag(lam) H diag(lam)
    H *= lam[:, None, :]
    diag = np.arange(N)
    H[:, diag, diag] += 1.0
    gs = lam * g
    y = np.zeros((K, N))
    ok = np.ones(K, dtype=bool)
    for i in range(K):
        yi = _solve(H[i], -gs[i])
        if yi is None:
            ok[i] = False
        else:
            y[i] = yi
    delta = np.sqrt(np.maximum(-_dots(gs, y), 0.0))
    return S, y, delta, ok


def _line_search_many(A, B, c, lam, y, delta, t, phi0, I_q) -> tuple:
    """:func:`_line_search` of K instances: ``(lam, phi, G, L, ok)`` at the accepted steps,
    ``ok`` False where no step of at least 1e-10 of the Newton step decreases phi."""
    K = lam.shape[0]
    with np.errstate(divide="ignore"):
        alpha = np.where(delta > 0, np.minimum(1.0, LS_START / delta), 1.0)
    new_lam, phi = lam.copy(), np.full(K, np.inf)
    G = np.zeros((K, A.shape[2], B.shape[2]))
    L: list = [None] * K
    ok = np.zeros(K, dtype=bool)
    pending = np.arange(K)
    while pending.size:
        sel = None if pending.size == K else pending
        Ap, Bp, cp, lp, yp, tp, p0, a, d = _take(sel, A, B, c, lam, y, t, phi0, alpha, delta)
        trial = lp * (1.0 + a[:, None] * yp)
        with np.errstate(invalid="ignore", divide="ignore"):
            f, Gt, Lt = _phi_many(Ap, Bp, cp, trial, tp, I_q)
        accept = (f <= p0 - ARMIJO * a * d * d) | ((d <= CENTERED) & np.isfinite(f))
        k = pending[accept]
        new_lam[k], phi[k], G[k], ok[k] = trial[accept], f[accept], Gt[accept], True
        for i, Li in zip(k, (Li for Li, acc in zip(Lt, accept, strict=True) if acc), strict=True):
            L[i] = Li
        rejected = pending[~accept]
        alpha[rejected] *= 0.5
        pending = rejected[alpha[rejected] >= 1e-10]
    return new_lam, phi, G, L, ok


def solve_dual_barrier_many(
    problems, *, target_gap: float = TARGET_GAP, max_steps: int = 300
) -> list[DualBarrierResult | None]:
    """:func:`solve_dual_barrier` of many instances ``(A, B, c)``, the same answers, bit for
    bit (docs/science.md §4, Att-SVM_*).

    Instances of one shape with at most ``BATCH_MAX_ROWS`` rows run together in batches of
    ``BATCH_MIN`` to ``BATCH_SIZE``: every array operation of a Newton step and of its line
    search is one call for the batch, the factorizations and solves one per instance, each
    with the operations it has alone (the same BLAS and LAPACK calls on the same numbers), so
    an answer does not depend on its batch; the others are solved one by one.
    """
    out: list[DualBarrierResult | None] = [None] * len(problems)
    groups: dict[tuple, list] = {}
    for i, (A, B, c) in enumerate(problems):
        A, B, c = (np.ascontiguousarray(x, dtype=np.float64) for x in (A, B, c))
        if c.size == 0 or np.any(c <= 0):
            continue
        swap = B.shape[1] > A.shape[1]
        if swap:  # keep the Schur complement on the smaller side q
            A, B = B, A
        groups.setdefault((c.size, A.shape[1], B.shape[1]), []).append((i, A, B, c, swap))
    for items in groups.values():
        for chunk in _chunks(items):
            if len(chunk) < BATCH_MIN or chunk[0][3].size > BATCH_MAX_ROWS:  # one by one
                for i, A, B, c, swap in chunk:
                    out[i] = _barrier_one(A, B, c, swap, target_gap, max_steps)
                continue
            A, B, c = (np.stack([it[k] for it in chunk]) for k in (1, 2, 3))
            answers = _barrier_many(A, B, c, [it[4] for it in chunk], target_gap, max_steps)
            for (i, *_), res in zip(chunk, answers, strict=True):
                out[i] = res
    return out


def _chunks(items: list) -> list[list]:
    """``items`` in consecutive chunks of at most ``BATCH_SIZE``, of sizes as equal as can be
    (the last chunk of a path is its slowest instance's: small chunks pay the overhead)."""
    count = -(-len(items) // BATCH_SIZE)
    size = -(-len(items) // max(1, count))
    return [items[k : k + size] for k in range(0, len(items), size)]


class _Path:
    """The state of :func:`solve_dual_barrier`'s path for the live instances of a batch:
    ``idx`` (their places in the batch), their rows ``A``, ``B``, ``c``, ``AAt``, and per
    instance ``lam``, ``t``, ``target``, ``phi_t``, ``phi_last``, ``G`` and ``L`` (the
    Cholesky factor of ``I - G^T G``, a list: LAPACK's own arrays)."""

    FIELDS = ("idx", "A", "B", "c", "AAt", "lam", "t", "target", "phi_t", "phi_last", "G")

    def __init__(self, **arrays) -> None:
        self.__dict__.update(arrays)

    def keep(self, mask: np.ndarray) -> None:
        """Drop the instances outside ``mask``."""
        if not mask.all():
            for name in self.FIELDS:
                setattr(self, name, getattr(self, name)[mask])
            self.L = [Li for Li, m in zip(self.L, mask, strict=True) if m]


def _barrier_many(A, B, c, swap, target_gap, max_steps) -> list[DualBarrierResult | None]:
    """The path of :func:`solve_dual_barrier` for K instances of one shape (``A`` (K, N, p),
    ``B`` (K, N, q), ``c`` (K, N), every ``c > 0``, ``q <= p``), each in its own order of
    operations; instances leave the batch as they finish."""
    K, N, p = A.shape
    q = B.shape[2]
    I_q = np.eye(q)
    best: list[DualBarrierResult | None] = [None] * K
    s1 = np.linalg.svd(A.mT @ B, compute_uv=False).max(axis=1)
    live = s1 > 0
    A, B, c, s1 = A[live], B[live], c[live], s1[live]
    lam = (0.5 / s1)[:, None] * np.ones(N)
    theta = N + p + q
    t = theta / _dots(c, lam)
    phi_last, G, L = _phi_many(A, B, c, lam, t, I_q)
    path = _Path(
        idx=np.flatnonzero(live), A=A, B=B, c=c, AAt=A @ A.mT, lam=lam, t=t,
        target=np.full(t.size, target_gap), phi_t=t.copy(), phi_last=phi_last, G=G, L=L,
    )  # fmt: skip
    path.keep(np.array([Li is not None for Li in L], dtype=bool))
    steps = 0
    while steps < max_steps and path.idx.size:
        P = path
        S, y, delta, ok = _newton_many(P.A, P.B, P.c, P.lam, P.t, I_q, P.AAt, P.G, P.L)
        steps += 1
        cl = _dots(P.c, P.lam)
        done = theta / (P.t * cl) <= P.target
        keep = ok.copy()
        for j in np.flatnonzero(ok & done & (delta <= FINAL_CENTERED)):
            i = P.idx[j]
            res = _result(P.A[j], P.B[j], P.c[j], P.lam[j], P.G[j], S[j], P.t[j], steps, swap[i])
            best[i] = res if best[i] is None or res.gap < best[i].gap else best[i]
            if res.gap <= ACCEPT_GAP or P.target[j] <= MIN_TARGET_GAP:
                keep[j] = False
            else:
                P.target[j] /= 100.0  # the polish missed: follow the path further and retry
                done[j] = False
        path.keep(keep)
        y, delta, done, cl = y[keep], delta[keep], done[keep], cl[keep]
        if not P.idx.size:
            break
        phi0 = P.phi_last - (P.t - P.phi_t) * cl
        lam, phi, G, L, ok = _line_search_many(P.A, P.B, P.c, P.lam, y, delta, P.t, phi0, I_q)
        P.lam, P.phi_last, P.G, P.L = lam, phi, G, L
        P.phi_t = P.t.copy()
        grow = (delta <= CENTERED) & ~done
        longer = P.t[grow] * T_FACTOR
        last = theta / (P.target[grow] * _dots(P.c[grow], P.lam[grow]))
        P.t[grow] = np.where(last < longer, last, longer)  # Python's min(longer, last)
        path.keep(ok)
    return best
