"""Primal-dual interior-point method (NT, Mehrotra) for nuclear Att-SVMs with many rows.

Implements docs/science.md §4, Att-SVM_* (``W_mm_*``), on the reduced rows of
:mod:`attnsvm.svm.nuclear`: the nuclear route table's interior-point method up to
``routes.PD_MAX_ROWS`` rows (and above them on a working set of rows,
:mod:`attnsvm.svm.nuclear_ws`).
The dual barrier method it replaced at E2's and E6's 42 rows (issue 45: within 1.3x its time
there, and it certifies more instances by itself; BENCHMARKS.md, "The nuclear route table's
interior-point rows against their rivals") is gone.

The pair of conic problems (``n = p + q``, ``F_k = [[0, a_k b_k^T], [b_k a_k^T, 0]]``)::

    (D)  max c^T lam   s.t.  Z = I - sum_k lam_k F_k >= 0,  lam >= 0
    (P)  min tr X      s.t.  <F_k, X> - x_k = c_k,  X >= 0,  x >= 0

(D) is the dual of the nuclear-norm SVM that :func:`attnsvm.svm.nuclear.duality_gap`
certifies with (``Z >= 0`` iff ``||G(lam)||_2 <= 1``), and (P) is the SVM itself with
``M = 2 X_12`` (``tr X >= ||M||_*``, equality at the optimum).

Why not a dual barrier method (Newton on ``-t c^T lam - sum log lam_k - log det(I - G^T G)``,
the route it replaced): measured at n = T = 15 (N = 210 rows), its path
takes 90-210 Newton steps (~100 at 135-140 rows, 45-50 up to 60), most of them after a long
step that lands next to the boundary ``||G||_2 = 1`` (the Newton decrement then stays at
~1.7 for dozens of full steps while ``1 - sigma_1(G)`` recovers by a few per cent per step);
a step costs ~0.6 ms (an N x N Hessian and its Cholesky). This method takes the
Nesterov-Todd direction with Mehrotra's predictor-corrector, whose iteration count hardly
grows with N (15-22 from 20 to 950 rows). Its Schur
complement has the same structure as that barrier's Hessian::

    H_kl = 2 [(a_k^T W_11 a_l)(b_k^T W_22 b_l) + (a_k^T W_12 b_l)(a_l^T W_12 b_k)] + x_k/lam_k

(W the NT scaling, ``W Z W = X``): three N x N products with inner dimension p or q, one
N x N Cholesky and two solves per iteration; everything else is n x n.

Nothing here is trusted. Near the end the answer goes through the optimality-condition
polish (:func:`polish`: tight singular subspace of G, active rows), and the
best pair of primal and dual candidates is returned with its certified gap
``(||M||_* - c^T lam / ||G(lam)||_2) / ||M||_*``; the caller accepts it only below
``attnsvm.svm.nuclear.GAP_TOL`` and checks every row, else it refines the pair
(:mod:`attnsvm.svm.nuclear_kkt`) and then falls back to Clarabel / SCS.

Many instances at once (:func:`solve_primal_dual_many`, issue 28: E3 solves ~1,500 of them,
100 seeds of each shape): the instances of one shape iterate together, the n x n work and
the vectors of an iteration as one array operation for the batch, the N x N Schur complement,
the factorizations and the step lengths' eigenvalues one instance at a time. Every instance
gets the BLAS and LAPACK calls it gets from :func:`solve_primal_dual`, on the same numbers in
the same memory order (LAPACK's Fortran-ordered factors kept as they are:
:func:`fortran_stack`), so its answer is the same, bit for bit, whatever its batch: two
implementations of one method, held together by tests/test_svm_nuclear_batched.py. The batch
saves the per-operation Python and numpy overhead, 25-35% of an instance's time at 90-140
rows, ~10% at 210 (where the N x N arithmetic dominates).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack

#: relative duality-gap estimate at which an interior-point path stops
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
class PrimalDualResult:
    """Primal ``M`` (p x q), dual ``lam`` (N,), certified relative gap, iterations taken."""

    M: np.ndarray
    lam: np.ndarray
    gap: float
    newton_steps: int
    polished: bool = False


#: fraction of the step to the boundary of the cones that an iteration takes
STEP_FRACTION = 0.98
#: primal residual ``||c - A(X) + x||_inf / (1 + ||c||_inf)`` below which the gap test applies
#: (the residual levels off at 1e-9..1e-8 relative: the Schur complement's conditioning)
FEAS_TOL = 1e-8
#: iterations before the method gives up (the caller then uses a conic solver)
MAX_ITER = 100
#: fewest instances of one shape that :func:`solve_primal_dual_many` iterates together (a
#: batch's own overhead per iteration is about that of one or two instances alone)
BATCH_MIN = 4


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
) -> PrimalDualResult | None:
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
    A, B, c = (np.ascontiguousarray(v, dtype=np.float64) for v in (A, B, c))
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


def _result(A, B, c, X, lam, it) -> PrimalDualResult:
    """The best certified pair among the iterate's and the polished primals and duals
    (:func:`best_pair`)."""
    p = A.shape[1]
    G = A.T @ (lam[:, None] * B)
    M = 2.0 * X[:p, p:]
    ratio = float(np.min(np.einsum("kp,pq,kq->k", A, M, B) / c))
    primals = [M / ratio] if ratio > 0 else []
    M_pol, polished_dual = _polish_parts(A, B, c, lam, G)
    primals += [M_pol] if M_pol is not None else []
    if not primals:
        return PrimalDualResult(M, lam, float("inf"), it)
    i, dual, gap, j = best_pair(A, B, c, primals, lam, polished_dual)
    polished = (ratio <= 0 or i > 0) or j
    return PrimalDualResult(primals[i], dual, gap, it, polished=polished)


# ----------------------------------------------------------------------------- many at once
def _dots(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``u_i^T v_i`` of every row pair (K, N) x (K, N): one BLAS dot per row, as ``u @ v``."""
    return (u[:, None, :] @ v[:, :, None])[:, 0, 0]


def _pymin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's ``min(a, b)`` elementwise: ``b`` where ``b < a``, else ``a`` (NaN as Python)."""
    return np.where(b < a, b, a)


def fortran_stack(K: int, rows: int, cols: int) -> np.ndarray:
    """Zeros of shape (K, rows, cols) whose matrices are each Fortran-contiguous, as LAPACK
    returns them through scipy: a product with one of them is then the same BLAS call, with
    the same bits, as with the matrix alone (a C-ordered copy would transpose the call)."""
    return np.zeros((K, cols, rows)).transpose(0, 2, 1)


class _Many:
    """The operators of :class:`_Problem` for K instances of one shape (A (K, N, p), B (K, N,
    q), c (K, N)), each instance with the operations :class:`_Problem` does on it alone."""

    def __init__(self, A: np.ndarray, B: np.ndarray, c: np.ndarray) -> None:
        self.A, self.B, self.c = A, B, c
        self.N, self.p = c.shape[1], A.shape[2]
        self.n = self.p + B.shape[2]
        self.nu = self.n + self.N
        self.I_n = np.eye(self.n)

    def a_op(self, Y: np.ndarray) -> np.ndarray:
        p = self.p
        return 2.0 * np.einsum("bkp,bkp->bk", self.A @ Y[:, :p, p:], self.B)

    def z_of(self, lam: np.ndarray) -> np.ndarray:
        p = self.p
        G = self.A.mT @ (lam[:, :, None] * self.B)
        Z = np.broadcast_to(self.I_n, (lam.shape[0], self.n, self.n)).copy()
        Z[:, :p, p:] = -G
        Z[:, p:, :p] = -G.mT
        return Z


def _chol_each(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_chol` of every matrix of a stack: (factors, ok)."""
    L = fortran_stack(*K.shape)
    ok = np.ones(K.shape[0], dtype=bool)
    for i in range(K.shape[0]):
        Li = _chol(K[i])
        if Li is None:
            ok[i] = False
        else:
            L[i] = Li
    return L, ok


def solve_primal_dual_many(
    problems, *, target_gap: float = TARGET_GAP, max_iter: int = MAX_ITER
) -> list[PrimalDualResult | None]:
    """:func:`solve_primal_dual` of many instances ``(A, B, c)``, the same answers, bit for
    bit (docs/science.md §4, Att-SVM_*).

    The instances of one shape iterate together: the n x n work of an iteration (NT scaling,
    corrector, the products of the step lengths) and the vectors are one array operation for
    all of them, the N x N Schur complement, the factorizations and the eigenvalues of the
    step lengths one per instance; every instance gets exactly the BLAS and LAPACK calls it
    gets alone (operands in the same memory order), so an answer does not depend on the
    batch it was solved in (tests/test_svm_nuclear_batched.py).
    """
    out: list[PrimalDualResult | None] = [None] * len(problems)
    groups: dict[tuple, list] = {}
    for i, (A, B, c) in enumerate(problems):
        A, B, c = (np.ascontiguousarray(v, dtype=np.float64) for v in (A, B, c))
        if c.size == 0 or np.any(c <= 0):
            continue
        groups.setdefault((c.size, A.shape[1], B.shape[1]), []).append((i, A, B, c))
    for items in groups.values():
        if len(items) < BATCH_MIN:  # one by one: the same answers with less overhead
            for i, A, B, c in items:
                out[i] = solve_primal_dual(A, B, c, target_gap=target_gap, max_iter=max_iter)
            continue
        A, B, c = (np.stack([it[k] for it in items]) for k in (1, 2, 3))
        for (i, *_), res in zip(items, _pd_many(A, B, c, target_gap, max_iter), strict=True):
            out[i] = res
    return out


class _Iterates:
    """The live instances of :func:`_pd_many`: their rows, iterates and targets."""

    def __init__(self, idx, pr: _Many, X, x, lam, c_inf, target) -> None:
        self.idx, self.pr, self.X, self.x, self.lam = idx, pr, X, x, lam
        self.c_inf, self.target = c_inf, target

    def keep(self, mask: np.ndarray) -> None:
        """Drop the instances outside ``mask``."""
        if mask.all():
            return
        pr = self.pr
        self.pr = _Many(pr.A[mask], pr.B[mask], pr.c[mask])
        for name in ("idx", "X", "x", "lam", "c_inf", "target"):
            setattr(self, name, getattr(self, name)[mask])


def _pd_many(A, B, c, target_gap, max_iter) -> list[PrimalDualResult | None]:
    """The iteration of :func:`solve_primal_dual` for K instances of one shape, each in its
    own order of operations; instances leave as they return."""
    K, N, _ = A.shape
    best: list[PrimalDualResult | None] = [None] * K
    s1 = np.linalg.svd(A.mT @ B, compute_uv=False).max(axis=1)
    live = s1 > 0
    pr = _Many(A[live], B[live], c[live])
    k = int(live.sum())
    S = _Iterates(
        np.flatnonzero(live), pr, np.broadcast_to(pr.I_n, (k, pr.n, pr.n)).copy(),
        np.ones((k, N)), (0.5 / s1[live])[:, None] * np.ones(N),
        1.0 + np.abs(pr.c).max(axis=1), np.full(k, target_gap),
    )  # fmt: skip

    def broke_down(keep: np.ndarray, it: int) -> None:
        """The instances outside ``keep`` stop at iteration ``it``: those without an answer
        offer the last iterate's pair, as :func:`solve_primal_dual` does."""
        for j in np.flatnonzero(~keep):
            i = S.idx[j]
            if best[i] is None and it > 1:
                best[i] = _result(A[i], B[i], c[i], S.X[j], S.lam[j], it - 1)

    for it in range(1, max_iter + 1):
        if not S.idx.size:
            break
        pr = S.pr
        Z = pr.z_of(S.lam)
        LZ, okz = _chol_each(Z)
        LX, okx = _chol_each(S.X)
        mu = (np.sum((S.X * Z).reshape(S.idx.size, -1), axis=1) + _dots(S.x, S.lam)) / pr.nu
        rp = pr.c - pr.a_op(S.X) + S.x
        dual_obj = _dots(pr.c, S.lam)
        keep = okz & okx
        check = keep & (dual_obj > 0) & (pr.nu * mu <= S.target * dual_obj)
        check &= np.abs(rp).max(axis=1) <= FEAS_TOL * S.c_inf
        for j in np.flatnonzero(check):
            i = S.idx[j]
            res = _result(A[i], B[i], c[i], S.X[j], S.lam[j], it)
            best[i] = res if best[i] is None or res.gap < best[i].gap else best[i]
            if res.gap <= ACCEPT_GAP or S.target[j] <= MIN_TARGET_GAP:
                keep[j] = False
            else:
                S.target[j] /= 100.0
        broke_down(keep, it)  # (those that returned have their answer: nothing is added)
        S.keep(keep)
        if not S.idx.size:
            break
        if not keep.all():
            Z, LX, LZ, mu, rp = Z[keep], LX[keep], LZ[keep], mu[keep], rp[keep]
        X, x, lam, moved = _step_many(S.pr, S.X, S.x, S.lam, Z, LX, LZ, mu, rp)
        broke_down(moved, it)
        S.X, S.x, S.lam = X, x, lam
        S.keep(moved)
    else:
        broke_down(np.zeros(S.idx.size, dtype=bool), max_iter + 1)
    return best


def _step_many(pr: _Many, X, x, lam, Z, LX, LZ, mu, rp):
    """:func:`_step` of K instances: ``(X, x, lam, moved)``, ``moved`` False where the step
    broke down (that instance's new iterate is then undefined)."""
    K, N, n, p = lam.shape[0], pr.N, pr.n, pr.p
    # Nesterov-Todd scaling W = Gs Gs^T with Gs^T Z Gs = Gs^{-1} X Gs^{-T} = diag(sig)
    U, sig, _ = np.linalg.svd(LX.mT @ LZ)
    moved = sig.min(axis=1) > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        Gs = LX @ (U / np.sqrt(sig)[:, None, :])
    W = Gs @ Gs.mT
    A_, B_ = pr.A, pr.B
    LH: list = [None] * K
    for i in np.flatnonzero(moved):  # the N x N Schur complement, one instance at a time
        Wi = W[i]
        E = (A_[i] @ Wi[:p, p:]) @ B_[i].T
        H = ((A_[i] @ Wi[:p, :p]) @ A_[i].T) * ((B_[i] @ Wi[p:, p:]) @ B_[i].T)
        H += E * E.T
        H *= 2.0
        H.flat[:: N + 1] += x[i] / lam[i]
        LH[i] = _chol(H)
        moved[i] = LH[i] is not None
    live = np.flatnonzero(moved)

    def direction(RX: np.ndarray, Rx: np.ndarray):
        """Solves ``dX + W dZ W = RX``, ``x dlam + lam dx = lam Rx``, the primal rows."""
        rhs = rp - pr.a_op(RX) + Rx
        dlam = np.zeros((K, N))
        for i in live:
            dlam[i] = lapack.dpotrs(LH[i], rhs[i], lower=1)[0]
        dZ = pr.z_of(dlam) - pr.I_n
        dX = RX - W @ dZ @ W
        dx = Rx - (x / lam) * dlam
        return 0.5 * (dX + dX.mT), dx, dlam, dZ

    LXi, LZi = fortran_stack(K, n, n), fortran_stack(K, n, n)
    for i in live:
        LXi[i] = lapack.dtrtri(LX[i], lower=1)[0]
        LZi[i] = lapack.dtrtri(LZ[i], lower=1)[0]

    def max_step(Li: np.ndarray, D: np.ndarray) -> np.ndarray:
        """:func:`_max_step` of every instance (inf where the step broke down)."""
        M = Li @ D @ Li.mT
        out = np.full(K, np.inf)
        for i in live:
            w = lapack.dsyevr(M[i], compute_v=0, range="I", il=1, iu=1)[0]
            out[i] = -1.0 / w[0] if w[0] < 0 else np.inf
        return out

    def max_step_vec(v: np.ndarray, dv: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(dv < 0, -v / dv, np.inf).min(axis=1)

    def lengths(dX, dx, dlam, dZ) -> tuple[np.ndarray, np.ndarray]:
        ap = _pymin(max_step(LXi, dX), max_step_vec(x, dx))
        ad = _pymin(max_step(LZi, dZ), max_step_vec(lam, dlam))
        return ap, ad

    one = np.ones(K)
    # predictor (affine scaling direction)
    dXa, dxa, dla, dZa = direction(-X, -x)
    ap, ad = (_pymin(one, a) for a in lengths(dXa, dxa, dla, dZa))
    cross = ((X + ap[:, None, None] * dXa) * (Z + ad[:, None, None] * dZa)).reshape(K, -1)
    mu_aff = np.sum(cross, axis=1) + _dots(x + ap[:, None] * dxa, lam + ad[:, None] * dla)
    mu_aff /= pr.nu
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = mu_aff / mu
    sigma = np.array([min(1.0, max(0.0, r)) ** 3 for r in ratio.tolist()])
    # corrector: Sig K + K Sig = 2 (sigma mu I - Sig^2) - (DX DZ + DZ DX), RX = Gs K Gs^T
    with np.errstate(invalid="ignore"):
        Ginv = (np.sqrt(sig)[:, :, None] * U.mT) @ LXi
    DX = Ginv @ dXa @ Ginv.mT
    DZ = Gs.mT @ dZa @ Gs
    R = -(DX @ DZ + DZ @ DX)
    diag = np.arange(n)
    R[:, diag, diag] += 2.0 * ((sigma * mu)[:, None] - sig * sig)
    with np.errstate(invalid="ignore", divide="ignore"):
        RX = Gs @ (R / (sig[:, :, None] + sig[:, None, :])) @ Gs.mT
    Rx = ((sigma * mu)[:, None] - dxa * dla) / lam - x
    dX, dx, dlam, dZ = direction(0.5 * (RX + RX.mT), Rx)
    ap, ad = (_pymin(one, STEP_FRACTION * a) for a in lengths(dX, dx, dlam, dZ))
    moved &= np.isfinite(ap) & np.isfinite(ad) & ~(np.maximum(ap, ad) < 1e-12)
    return X + ap[:, None, None] * dX, x + ap[:, None] * dx, lam + ad[:, None] * dlam, moved


# ------------------------------------------ the certificate and the optimality-condition polish
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
    the tight subspace and the active rows from the interior-point path, K and the active
    multipliers solve small linear systems, free of its ill-conditioning near the end. Returns
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
