"""Primal-dual interior-point method (NT, Mehrotra) for nuclear Att-SVMs with many rows.

Implements docs/science.md §4, Att-SVM_* (``W_mm_*``), on the reduced
rows of :mod:`attnsvm.svm.nuclear`, for instances with more rows than the dual barrier method
of :mod:`attnsvm.svm.nuclear_ipm` handles well (E3 has 90-210 rows at n, T >= 10).

The pair of conic problems (``n = p + q``, ``F_k = [[0, a_k b_k^T], [b_k a_k^T, 0]]``)::

    (D)  max c^T lam   s.t.  Z = I - sum_k lam_k F_k >= 0,  lam >= 0
    (P)  min tr X      s.t.  <F_k, X> - x_k = c_k,  X >= 0,  x >= 0

(D) is the dual of the nuclear-norm SVM that :func:`attnsvm.svm.nuclear.duality_gap`
certifies with (``Z >= 0`` iff ``||G(lam)||_2 <= 1``), and (P) is the SVM itself with
``M = 2 X_12`` (``tr X >= ||M||_*``, equality at the optimum).

Why not the dual barrier with many rows: measured at n = T = 15 (N = 210 rows), its path
takes 90-210 Newton steps (~100 at 135-140 rows, 45-50 up to 60), most of them after a long
step that lands next to the boundary ``||G||_2 = 1`` (the Newton decrement then stays at
~1.7 for dozens of full steps while ``1 - sigma_1(G)`` recovers by a few per cent per step);
a step costs ~0.6 ms (an N x N Hessian and its Cholesky). This method takes the
Nesterov-Todd direction with Mehrotra's predictor-corrector, whose iteration count hardly
grows with N (15-22 from 20 to 950 rows). Its Schur
complement has the same structure as the barrier's Hessian::

    H_kl = 2 [(a_k^T W_11 a_l)(b_k^T W_22 b_l) + (a_k^T W_12 b_l)(a_l^T W_12 b_k)] + x_k/lam_k

(W the NT scaling, ``W Z W = X``): three N x N products with inner dimension p or q, one
N x N Cholesky and two solves per iteration; everything else is n x n.

Nothing here is trusted. Near the end the answer goes through the optimality-condition
polish of :mod:`attnsvm.svm.nuclear_ipm` (tight singular subspace of G, active rows), and the
best pair of primal and dual candidates is returned with its certified gap
``(||M||_* - c^T lam / ||G(lam)||_2) / ||M||_*``; the caller accepts it only below
``attnsvm.svm.nuclear.GAP_TOL`` and checks every row, else it refines the pair
(:mod:`attnsvm.svm.nuclear_kkt`) and then falls back to Clarabel / SCS.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack

from attnsvm.svm.nuclear_ipm import (
    ACCEPT_GAP,
    MIN_TARGET_GAP,
    TARGET_GAP,
    DualBarrierResult,
    _dual_bound,
    polish,
)

#: fraction of the step to the boundary of the cones that an iteration takes
STEP_FRACTION = 0.98
#: primal residual ``||c - A(X) + x||_inf / (1 + ||c||_inf)`` below which the gap test applies
#: (the residual levels off at 1e-9..1e-8 relative: the Schur complement's conditioning)
FEAS_TOL = 1e-8
#: iterations before the method gives up (the caller then uses a conic solver)
MAX_ITER = 100


def _chol(K: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor (LAPACK potrf), or None when K is not numerically PD."""
    L, info = lapack.dpotrf(K, lower=1, clean=1)
    return L if info == 0 else None


def _max_step(Li: np.ndarray, D: np.ndarray) -> float:
    """Largest a with ``L L^T + a D >= 0`` (``Li = L^{-1}``; inf when D is PSD)."""
    K = Li @ D @ Li.T
    w = lapack.dsyevr(K, compute_v=0, range="I", il=1, iu=1)[0]
    return float(-1.0 / w[0]) if w[0] < 0 else float("inf")


def _max_step_vec(v: np.ndarray, dv: np.ndarray) -> float:
    neg = dv < 0
    return float(np.min(-v[neg] / dv[neg])) if neg.any() else float("inf")


class _Problem:
    """The operators of (P) and (D) on the reduced rows (module docstring)."""

    def __init__(self, A: np.ndarray, B: np.ndarray, c: np.ndarray) -> None:
        self.A, self.B, self.c = A, B, c
        self.N, self.p = c.size, A.shape[1]
        self.n = self.p + B.shape[1]
        self.nu = self.n + self.N
        self.I_n = np.eye(self.n)

    def a_op(self, Y: np.ndarray) -> np.ndarray:
        """``<F_k, Y>`` for every k (Y symmetric n x n)."""
        p = self.p
        return 2.0 * np.einsum("kp,kp->k", self.A @ Y[:p, p:], self.B)

    def z_of(self, lam: np.ndarray) -> np.ndarray:
        """``I - sum_k lam_k F_k`` (``-dZ`` of a step is this minus I for the step's lam)."""
        p = self.p
        G = self.A.T @ (lam[:, None] * self.B)
        Z = self.I_n.copy()
        Z[:p, p:] = -G
        Z[p:, :p] = -G.T
        return Z


def solve_primal_dual(
    A: np.ndarray,
    B: np.ndarray,
    c: np.ndarray,
    *,
    target_gap: float = TARGET_GAP,
    max_iter: int = MAX_ITER,
) -> DualBarrierResult | None:
    """Att-SVM_* on reduced rows ``a_k`` (rows of A, N x p) and ``b_k`` (rows of B, N x q).

    Iterates until the relative gap estimate ``(tr(XZ) + x^T lam) / c^T lam`` is below
    ``target_gap`` with a primal residual below ``FEAS_TOL``, then takes the best certified
    pair of the iterate's primal (``M = 2 X_12``, scaled to meet every row) and dual and their
    polished versions; when it certifies only above ``ACCEPT_GAP`` the iteration goes on to
    a 100x smaller target (down to ``MIN_TARGET_GAP``) and the best pair so far is returned.
    When the method breaks down first (a factorization fails, no progress, ``max_iter``) the
    last iterate's pair is returned, or None before any iterate. Requires ``c > 0``. The
    result's ``newton_steps`` counts iterations; the caller certifies whatever comes back.
    """
    A, B, c = (np.asarray(v, dtype=np.float64) for v in (A, B, c))
    if c.size == 0 or np.any(c <= 0):
        return None
    s1 = float(np.linalg.norm(A.T @ B, 2))
    if s1 <= 0:
        return None
    pr = _Problem(A, B, c)
    lam = np.full(c.size, 0.5 / s1)  # ||G(lam)||_2 = 0.5: strictly inside (D)
    X, x = pr.I_n.copy(), np.ones(c.size)
    c_inf = 1.0 + float(np.abs(c).max())
    best = None
    for it in range(1, max_iter + 1):
        Z = pr.z_of(lam)
        LZ, LX = _chol(Z), _chol(X)
        if LZ is None or LX is None:
            break
        mu = (float(np.sum(X * Z)) + float(x @ lam)) / pr.nu
        rp = c - pr.a_op(X) + x
        dual_obj = float(c @ lam)
        if (
            dual_obj > 0
            and pr.nu * mu <= target_gap * dual_obj
            and np.abs(rp).max() <= FEAS_TOL * c_inf
        ):
            res = _result(A, B, c, X, lam, it)
            best = res if best is None or res.gap < best.gap else best
            if res.gap <= ACCEPT_GAP or target_gap <= MIN_TARGET_GAP:
                return best
            target_gap /= 100.0
        step = _step(pr, X, x, lam, Z, LX, LZ, mu, rp)
        if step is None:
            break
        X, x, lam = step
    else:
        it += 1
    if best is None and it > 1:  # broke down: still offer the last iterate's pair
        best = _result(A, B, c, X, lam, it - 1)
    return best


def _step(pr: _Problem, X, x, lam, Z, LX, LZ, mu, rp):
    """One Mehrotra predictor-corrector step along the NT direction, or None (breakdown)."""
    N, n, p = pr.N, pr.n, pr.p
    # Nesterov-Todd scaling W = Gs Gs^T with Gs^T Z Gs = Gs^{-1} X Gs^{-T} = diag(sig)
    U, sig, _ = np.linalg.svd(LX.T @ LZ)
    if sig.min() <= 0:
        return None
    Gs = LX @ (U / np.sqrt(sig))
    W = Gs @ Gs.T
    # products with inner dimension p or q (the blocks of W), not n = p + q
    A_, B_ = pr.A, pr.B
    E = (A_ @ W[:p, p:]) @ B_.T
    H = ((A_ @ W[:p, :p]) @ A_.T) * ((B_ @ W[p:, p:]) @ B_.T)
    H += E * E.T
    H *= 2.0
    H.flat[:: N + 1] += x / lam
    LH = _chol(H)
    if LH is None:
        return None

    def direction(RX: np.ndarray, Rx: np.ndarray):
        """Solves ``dX + W dZ W = RX``, ``x dlam + lam dx = lam Rx``, the primal rows."""
        dlam = lapack.dpotrs(LH, rp - pr.a_op(RX) + Rx, lower=1)[0]
        dZ = pr.z_of(dlam) - pr.I_n
        dX = RX - W @ dZ @ W
        dx = Rx - (x / lam) * dlam
        return 0.5 * (dX + dX.T), dx, dlam, dZ

    LXi = lapack.dtrtri(LX, lower=1)[0]
    LZi = lapack.dtrtri(LZ, lower=1)[0]

    def lengths(dX, dx, dlam, dZ) -> tuple[float, float]:
        ap = min(_max_step(LXi, dX), _max_step_vec(x, dx))
        ad = min(_max_step(LZi, dZ), _max_step_vec(lam, dlam))
        return ap, ad

    # predictor (affine scaling direction)
    dXa, dxa, dla, dZa = direction(-X, -x)
    ap, ad = (min(1.0, a) for a in lengths(dXa, dxa, dla, dZa))
    cross = float(np.sum((X + ap * dXa) * (Z + ad * dZa)))
    mu_aff = (cross + float((x + ap * dxa) @ (lam + ad * dla))) / pr.nu
    sigma = min(1.0, max(0.0, mu_aff / mu)) ** 3
    # corrector: Sig K + K Sig = 2 (sigma mu I - Sig^2) - (DX DZ + DZ DX), RX = Gs K Gs^T
    Ginv = (np.sqrt(sig)[:, None] * U.T) @ LXi
    DX = Ginv @ dXa @ Ginv.T
    DZ = Gs.T @ dZa @ Gs
    R = -(DX @ DZ + DZ @ DX)
    R.flat[:: n + 1] += 2.0 * (sigma * mu - sig * sig)
    RX = Gs @ (R / (sig[:, None] + sig[None, :])) @ Gs.T
    Rx = (sigma * mu - dxa * dla) / lam - x
    dX, dx, dlam, dZ = direction(0.5 * (RX + RX.T), Rx)
    ap, ad = (min(1.0, STEP_FRACTION * a) for a in lengths(dX, dx, dlam, dZ))
    if not (np.isfinite(ap) and np.isfinite(ad)) or max(ap, ad) < 1e-12:
        return None
    return X + ap * dX, x + ap * dx, lam + ad * dlam


def _result(A, B, c, X, lam, it) -> DualBarrierResult:
    """The best certified pair among the iterate's and the polished primals and duals."""
    p = A.shape[1]
    G = A.T @ (lam[:, None] * B)
    M = 2.0 * X[:p, p:]
    ratio = float(np.min(np.einsum("kp,pq,kq->k", A, M, B) / c))
    primals = [M / ratio] if ratio > 0 else []
    M_pol, lam_pol = polish(A, B, c, lam, G)
    primals += [M_pol] if M_pol is not None else []
    duals = [lam] + ([lam_pol] if lam_pol is not None else [])
    if not primals:
        return DualBarrierResult(M, lam, float("inf"), it)
    uppers = [float(np.linalg.svd(P, compute_uv=False).sum()) for P in primals]
    lowers = [_dual_bound(A, B, c, y) for y in duals]
    i, j = int(np.argmin(uppers)), int(np.argmax(lowers))
    gap = (uppers[i] - lowers[j]) / uppers[i] if uppers[i] > 0 else float("inf")
    polished = (ratio <= 0 or i > 0) or j > 0
    return DualBarrierResult(primals[i], duals[j], gap, it, polished=polished)
