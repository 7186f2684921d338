"""Batched Frobenius Att-SVM: many dual QPs solved at once in torch (docs/science.md §4).

The per-instance route (:func:`attnsvm.svm.frobenius.solve_frobenius`) solves the dual QP of
``min ||W||_F s.t. left_k^T W right_k >= rhs_k``,

    ``min_{lambda >= 0} 1/2 lambda^T G lambda - rhs^T lambda``,
    ``G_kl = <left_k, left_l> <right_k, right_l>``  (for Att-SVM rows:
    ``<x_ia - x_it, x_ja - x_js> <z_i, z_j>``),

one instance at a time (scipy's NNLS, then an active-set polish). Here every instance of one
shape (N rows, d) is stacked and solved together:

1. **Same routing.** An instance takes the batched route only where the per-instance route
   would solve the same dual with NNLS: inequality rows only, fewer rows than
   ``routes.PRIMAL_RATIO d^2``, and ``G`` numerically positive definite by the same Cholesky pivot
   test (``NNLS_MIN_PIVOT``). A positive-definite ``G`` means the lifted rows are linearly
   independent, so the SVM is feasible; an infeasible SVM always has a singular ``G`` and goes
   to the per-instance route, which recognizes and reports it as today.
2. **Block principal pivoting** (Kim & Park 2011; Judice & Pires 1994) for the linear
   complementarity problem ``w = G lambda - rhs >= 0, lambda >= 0, lambda^T w = 0``: every
   iteration solves the equality system on the current free set of every instance with one
   batched Cholesky factorization, then exchanges all variables that violate the conditions
   (one at a time, largest index first, after three exchanges that did not reduce the number
   of violations, which makes it finite for positive-definite ``G``).
3. **Polish and certificate, as the per-instance route** (``_polish_dual`` there): support
   ``lambda_k > SUPPORT_TOL max(lambda)``, the equality system on the support solved exactly,
   multipliers ``>= -KKT_TOL max(1, max mu)`` (then clipped to 0), ``W = sum_k mu_k left_k
   right_k^T`` satisfying every constraint to a relative ``KKT_TOL``; in addition the relative
   duality gap ``(||W||^2 - rhs^T mu) / ||W||^2`` (weak duality of the QP above) must be at
   most ``GAP_TOL``. A certified W then passes the per-instance route's own certificate
   (:func:`attnsvm.svm.frobenius.certificate` with the polished multipliers: violation
   ``<= VERIFY_TOL`` and certified gap ``<= svm_frobenius.GAP_TOL``) before it is ``optimal``.
   Where the support cut's answer is not certified, the pivoting's own answer on its free set
   (what the per-instance NNLS finds) is tried instead: on nearly infeasible SVMs (cond(G)
   ~ 1e12) the multipliers below the cut are real. An answer that misses the batched
   certificate gets the per-instance route's polish on the active set (``polish_active``),
   as that route's NNLS answer does; only those instances pay for it.
4. **Fallback.** Every instance that is not routed here, whose pivoting does not converge in
   ``MAX_PIVOTS`` iterations, or whose answer is not certified, is solved by
   :func:`~attnsvm.svm.frobenius.solve_frobenius`, so no answer is less exact than today's.

Works on any torch device (float64 throughout; the certificate needs it).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence

import numpy as np
import torch

import attnsvm.svm.routes as R
from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import GAP_TOL as CERTIFIED_GAP_TOL
from attnsvm.svm.frobenius import (
    NNLS_MIN_PIVOT,
    VERIFY_TOL,
    SVMResult,
    certificate,
    certified_canonical,
    polish_active,
    solve_frobenius,
)

SOLVER = "batched-dual"
#: support cut of the polish, relative to the largest multiplier (as ``_polish_dual``)
SUPPORT_TOL = 1e-7
#: multiplier sign and relative constraint tolerance of the polish (as ``_polish_dual``)
KKT_TOL = 1e-9
#: largest relative duality gap ``(||W||^2 - rhs^T mu) / ||W||^2`` of a certified answer
GAP_TOL = 1e-9
#: pivoting iterations before an instance is handed to the per-instance route
MAX_PIVOTS = 100
#: exchanges that may fail to reduce the number of violations before single exchanges
BACKUP_TRIES = 3
#: relative tolerance of the pivoting's sign tests (the polish decides exactness)
PIVOT_TOL = 1e-12
#: free-set solves gather the free variables first when at most this share of N is free
GATHER_RATIO = 0.85
#: finished instances leave the pivoting batch once they are 1 / COMPACT_SHARE of it
COMPACT_SHARE = 4
#: most instances per torch batch on a GPU, and on the CPU (kept cache-sized there; 256 to
#: 4096 were within measurement noise on a loaded machine: BENCHMARKS.md as of commit ca8cfd1)
CHUNK, CPU_CHUNK = 8192, 256
#: bytes of the Gram matrices of one torch batch (a few copies of them are made)
CHUNK_BYTES = 2**28


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """What one :func:`solve_frobenius_batched` call did (for benchmarks and tests)."""

    instances: int
    batched: int  # instances routed to the batched solver
    certified: int  # of those, answers certified here
    fallback: int  # instances solved by the per-instance route
    pivots: int  # largest number of pivoting iterations in any batch


def batchable(cons: Constraints) -> bool:
    """Whether the route table sends ``cons`` to the batched dual when enough instances come
    together (:data:`attnsvm.svm.routes.FROBENIUS`: inequality rows only, at most
    ``WORKING_SET_MIN_ROWS`` of them and fewer than ``PRIMAL_RATIO d^2``; larger systems take
    the working-set route, without an N x N Gram matrix)."""
    return R.APPLIES["batched-dual"](R.Instance.of(cons, batch=2))


def _masked_solve(G: torch.Tensor, b: torch.Tensor, free: torch.Tensor, inplace: bool = False):
    """``G_FF x_F = b_F``, ``x_rest = 0`` with G's rows and columns outside F set to identity.

    ``inplace``: G is a scratch copy and may be overwritten.
    """
    f = free.to(G.dtype)
    outer = f[:, :, None] * f[:, None, :]
    M = G.mul_(outer) if inplace else G * outer
    M.diagonal(dim1=1, dim2=2).add_(1.0 - f)
    L, info = torch.linalg.cholesky_ex(M)
    return _cholesky_solve(L, b * f) * f, info == 0


def _cholesky_solve(L: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(L L^T)^{-1} b`` for a batch of lower-triangular L, (B, N, N) and (B, N)."""
    y = torch.linalg.solve_triangular(L, b.unsqueeze(-1), upper=False)
    return torch.linalg.solve_triangular(L.mT, y, upper=True).squeeze(-1)


def _solve_free(G: torch.Tensor, b: torch.Tensor, free: torch.Tensor):
    """Solve ``G_FF x_F = b_F``, ``x_rest = 0`` per instance (F = ``free``); returns ``(x, ok)``.

    One batched Cholesky of size K = the largest free set in the batch: every instance's free
    variables are gathered first, padded with identity rows.
    """
    B, N = b.shape
    K = int(free.sum(dim=1).max()) if B else 0
    if K > GATHER_RATIO * N:
        x, ok = _masked_solve(G, b, free)
    else:
        perm = torch.argsort((~free).to(torch.int32), dim=1, stable=True)[:, :K]
        flat = (perm[:, :, None] * N + perm[:, None, :]).reshape(B, K * K)
        Gk = G.reshape(B, N * N).gather(1, flat).view(B, K, K)
        xk, ok = _masked_solve(
            Gk, torch.gather(b, 1, perm), torch.gather(free, 1, perm), inplace=True
        )
        x = torch.zeros_like(b).scatter_(1, perm, xk)
    return x, ok & torch.isfinite(x).all(dim=1)


def _violations(G, b, lam, free):
    """Variables that break complementarity: ``lam_F < 0`` or ``w_rest < 0`` (``w = G lam - b``).

    The sign tests are relative: to ``max(1, max |lam|)`` for lam and to the Cauchy-Schwarz
    bound ``sqrt(G_kk lam^T G lam) + |b_k|`` of the terms of ``w_k``.
    """
    Glam = torch.einsum("bkl,bl->bk", G, lam)
    w = Glam - b
    energy = (lam * Glam).sum(dim=1, keepdim=True).clamp_min(0.0)
    scale = torch.sqrt(torch.diagonal(G, dim1=1, dim2=2) * energy) + b.abs()
    lam_scale = lam.abs().amax(dim=1, keepdim=True).clamp_min(1.0)
    return (free & (lam < -PIVOT_TOL * lam_scale)) | (~free & (w < -PIVOT_TOL * scale))


def block_principal_pivoting(
    G: torch.Tensor,
    b: torch.Tensor,
    max_iter: int | None = None,
    chol: torch.Tensor | None = None,
):
    """Solve ``min_{lam >= 0} 1/2 lam^T G lam - b^T lam`` for a batch of positive-definite G.

    ``G`` (B, N, N), ``b`` (B, N). Returns ``(lam (B, N), free (B, N), converged (B,),
    iterations)``: ``lam`` solves the equality system on the free set ``free`` and is zero
    elsewhere; ``converged`` is False where the pivoting did not finish in ``max_iter``
    exchanges (default ``MAX_PIVOTS``) or a free-set system could not be factorized. Starts
    from the unconstrained minimizer (from ``chol``, the Cholesky factors of G, when given);
    instances leave the batch as they finish.
    """
    B, N = b.shape
    dev = G.device
    max_iter = MAX_PIVOTS if max_iter is None else max_iter
    free = torch.ones((B, N), dtype=torch.bool, device=dev)
    if chol is None:
        lam, ok = _solve_free(G, b, free)
    else:
        lam = _cholesky_solve(chol, b)
        ok = torch.isfinite(lam).all(dim=1)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    order = torch.arange(1, N + 1, device=dev)
    # state of the instances still pivoting (compacted as they finish)
    active = torch.nonzero(ok).squeeze(1)
    Ga, ba, la, fa = G[active], b[active], lam[active], free[active]
    best = torch.full((active.numel(),), N + 1, dtype=torch.int64, device=dev)
    tries = torch.full((active.numel(),), BACKUP_TRIES, dtype=torch.int64, device=dev)
    iterations = 0
    while active.numel():
        V = _violations(Ga, ba, la, fa)
        nv = V.sum(dim=1)
        finished = nv == 0
        n_fin = int(finished.sum())
        if n_fin and (n_fin * COMPACT_SHARE >= nv.numel() or iterations == max_iter):
            fin = active[finished]
            done[fin], lam[fin], free[fin] = True, la[finished], fa[finished]
            keep = ~finished
            active, Ga, ba, la, fa, V, nv, best, tries = (
                t[keep] for t in (active, Ga, ba, la, fa, V, nv, best, tries)
            )
        if iterations == max_iter or not active.numel():
            break
        iterations += 1
        better = nv < best
        full = better | (tries >= 1)
        best = torch.where(better, nv, best)
        tries = torch.where(better, BACKUP_TRIES, torch.where(full, tries - 1, tries))
        last = torch.argmax(V * order, dim=1)  # largest violating index
        single = torch.nn.functional.one_hot(last, N).to(torch.bool)
        fa = fa ^ (torch.where(full[:, None], V, single) & (nv > 0)[:, None])
        la, ok = _solve_free(Ga, ba, fa)
        if not bool(ok.all()):  # a free-set system that did not factorize: not converged
            active, Ga, ba, la, fa, best, tries = (
                t[ok] for t in (active, Ga, ba, la, fa, best, tries)
            )
    return lam, free, done, iterations


def certify(left, right, b, G, lam, free=None):
    """Polish ``lam`` on its support and certify the answer (the batched ``_polish_dual``).

    Returns ``(W (B, d, d), mu (B, N), certified (B,))``: the multipliers mu on the support
    ``lam > SUPPORT_TOL max(lam)`` solve the equality system there exactly, are ``>= -KKT_TOL
    max(1, max mu)`` (then clipped to 0), ``W = sum_k mu_k left_k right_k^T`` scaled onto the
    feasible set (its tightest row at equality) satisfies every row to a relative ``KKT_TOL``,
    and the relative duality gap ``(||W|| - b^T mu / ||G(mu)||) / ||W||`` (weak duality, as
    :func:`attnsvm.svm.frobenius.lower_bound`) is at most ``GAP_TOL``.
    Where ``free`` (the set ``lam`` was solved on) equals the support,
    ``lam`` already is that solution and is not solved again. Where it does not and the cut
    answer is not certified, ``lam`` itself (the pivoting's exact solution on ``free``) is
    certified instead: on an ill-conditioned G (a nearly infeasible SVM, cond(G) ~ 1e12) the
    multipliers below the cut are real, and dropping them can leave rows violated (then even
    negative), while ``lam`` is the answer the per-instance route's NNLS finds.
    """
    top = lam.amax(dim=1)
    finite = torch.isfinite(lam).all(dim=1) & (top > 0)
    support = lam > SUPPORT_TOL * top[:, None]
    mu, ok = lam.clone(), finite.clone()
    cut = torch.ones_like(finite) if free is None else (support != free).any(dim=1)
    redo = torch.nonzero(cut & finite).squeeze(1)
    if redo.numel():
        mu[redo], ok[redo] = _solve_free(G[redo], b[redo], support[redo])
    W, mu, certified = _certify_multipliers(left, right, b, mu, ok)
    if free is not None:
        retry = torch.nonzero(cut & finite & ~certified).squeeze(1)
        if retry.numel():
            W[retry], mu[retry], certified[retry] = _certify_multipliers(
                left[retry], right[retry], b[retry], lam[retry], finite[retry]
            )
    return W, mu, certified


def _certify_multipliers(left, right, b, mu, ok):
    """``(W, mu clipped to >= 0, certified)`` for multipliers mu (the checks of :func:`certify`).

    W is scaled onto the feasible set where every row value is positive; elsewhere it is left
    as ``sum_k mu_k left_k right_k^T`` (finite, for the per-instance polish to start from).
    """
    mu_top = mu.amax(dim=1).clamp_min(1.0)
    signs = mu.amin(dim=1) >= -KKT_TOL * mu_top
    mu = mu.clamp_min(0.0)
    W = torch.einsum("bkd,bk,bke->bde", left, mu, right)
    tiny = torch.finfo(W.dtype).tiny
    # scaled onto the feasible set, as the per-instance certificate does (``scale_onto``: every
    # batched row is an inequality with rhs > 0, so W / min_k (values_k / b_k) is feasible)
    ratio = (torch.einsum("bkd,bde,bke->bk", left, W, right) / b).amin(dim=1)
    scalable = torch.isfinite(ratio) & (ratio > 0)
    lifted = torch.linalg.matrix_norm(W)  # ||G(mu)||_F: weak duality bound b^T mu / ||G(mu)||
    W = W / torch.where(scalable, ratio.clamp_min(tiny), 1.0)[:, None, None]
    values = torch.einsum("bkd,bde,bke->bk", left, W, right)
    viol = ((b - values).clamp_min(0.0) / b.abs().clamp_min(1.0)).amax(dim=1)
    norm = torch.linalg.matrix_norm(W)
    bound = (b * mu).sum(dim=1) / lifted.clamp_min(tiny)
    gap = (norm - bound).abs() / norm.clamp_min(tiny)
    certified = ok & signs & scalable & (viol <= KKT_TOL) & (gap <= GAP_TOL)
    return W, mu, certified & torch.isfinite(W).all(dim=(1, 2))


def gram_batched(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Dual Gram matrices ``G_kl = <left_k, left_l> <right_k, right_l>``, (B, N, N)."""
    return torch.bmm(left, left.mT.contiguous()) * torch.bmm(right, right.mT.contiguous())


def positive_definite(G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-instance route's NNLS test (``_nnls_dual``): Cholesky succeeds and the smallest
    pivot exceeds ``NNLS_MIN_PIVOT`` times the largest. Returns ``(passed (B,), factors)``."""
    L, info = torch.linalg.cholesky_ex(G)
    diag = torch.diagonal(L, dim1=-2, dim2=-1).abs()
    return (info == 0) & (diag.amin(dim=1) > NNLS_MIN_PIVOT * diag.amax(dim=1)), L


def _solve_shape(conss: Sequence[Constraints], device: torch.device):
    """Batched solve of instances of one shape.

    Returns ``((W, multipliers, certified) or None per instance, pivots)``: None where G is
    not positive definite or the pivoting did not converge."""
    as_t = dict(dtype=torch.float64, device=device)
    left = torch.as_tensor(np.stack([c.left for c in conss]), **as_t)
    right = torch.as_tensor(np.stack([c.right for c in conss]), **as_t)
    b = torch.as_tensor(np.stack([c.rhs for c in conss]), **as_t)
    G = gram_batched(left, right)
    pd, chol = positive_definite(G)
    idx = torch.nonzero(pd).squeeze(1)
    out: list[tuple[np.ndarray, np.ndarray, bool] | None] = [None] * len(conss)
    if idx.numel() == 0:
        return out, 0
    left, right, b, G, chol = left[idx], right[idx], b[idx], G[idx], chol[idx]
    lam, free, converged, pivots = block_principal_pivoting(G, b, chol=chol)
    W, mu, certified = certify(left, right, b, G, lam, free)
    good, conv = certified.cpu().numpy(), converged.cpu().numpy()
    W, mu = W.cpu().numpy(), mu.cpu().numpy()
    for j, i in enumerate(idx.cpu().numpy()):
        if conv[j]:
            out[int(i)] = (W[j], mu[j], bool(good[j]))
    return out, pivots


def _certified_result(
    cons: Constraints, W0: np.ndarray, mu: np.ndarray, certified: bool
) -> SVMResult | None:
    """The batched answer as an ``optimal`` result if it passes the per-instance certificate
    (:func:`attnsvm.svm.frobenius.certificate`), as it is when :func:`certify` passed it, else
    after the per-instance route's polish on the active set (``polish_active``, as that route
    does with its NNLS answer); None when neither is certified (the caller falls back)."""
    tries = [(W0, mu, "polished")] if certified else []
    for W, lam, how in itertools.chain(tries, _polished(cons, W0)):
        W, viol, gap = certificate(cons, W, lam)
        if viol <= VERIFY_TOL and gap <= CERTIFIED_GAP_TOL:
            msg = f"{SOLVER}, {how}: violation {viol:.1e}, certified gap {gap:.1e}"
            canonical = certified_canonical(cons, lam)
            if canonical is not None:  # the bits of the per-instance route's answer
                W, msg = canonical[0], msg + "; re-solved on its support (canonical_dual)"
            return SVMResult(W, "optimal", float(np.linalg.norm(W)), SOLVER, 0.0, msg)
    return None


def _polished(cons: Constraints, W0: np.ndarray):
    """``polish_active``'s candidates, computed only when asked for (it costs ~ms an instance:
    only the answers that :func:`certify` did not certify need it)."""
    for W, lam in polish_active(cons, W0):
        yield W, lam, "polished on the active set"


def solve_frobenius_batched(
    conss: Sequence[Constraints], device: str | torch.device = "cpu"
) -> tuple[list[SVMResult], BatchStats]:
    """Att-SVM ``W_mm`` for many constraint sets at once (docs/science.md §4).

    Returns one :class:`SVMResult` per input, in order, plus :class:`BatchStats`. Instances of
    the same shape that the per-instance route solves through its dual are solved together on
    ``device`` and certified (module docstring); a certified answer has solver
    ``"batched-dual"`` and passed the per-instance route's certificate; every other
    instance gets exactly :func:`attnsvm.svm.frobenius.solve_frobenius`'s answer. Seconds of a
    batched answer are its share of its batch's time.
    """
    dev = torch.device(device)
    results: list[SVMResult | None] = [None] * len(conss)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, c in enumerate(conss):
        if batchable(c):
            shapes.setdefault((c.n_rows, c.d), []).append(i)
    n_batched = n_certified = pivots = 0
    for (N, _), members in shapes.items():
        most = CPU_CHUNK if dev.type == "cpu" else CHUNK
        size = max(1, min(most, CHUNK_BYTES // (8 * N * N)))
        for k in range(0, len(members), size):
            chunk = members[k : k + size]
            t0 = time.perf_counter()
            Ws, piv = _solve_shape([conss[i] for i in chunk], dev)
            pivots = max(pivots, piv)
            share = (time.perf_counter() - t0) / len(chunk)
            n_batched += len(chunk)
            for i, answer in zip(chunk, Ws, strict=True):
                if answer is None:
                    continue
                t1 = time.perf_counter()
                res = _certified_result(conss[i], *answer)
                if res is not None:
                    results[i] = dataclasses.replace(res, seconds=share + time.perf_counter() - t1)
                    n_certified += 1
    fallback = 0
    for i, c in enumerate(conss):
        if results[i] is None:
            results[i] = solve_frobenius(c)
            fallback += 1
    stats = BatchStats(len(conss), n_batched, n_certified, fallback, pivots)
    return results, stats  # type: ignore[return-value]


def solve_many(
    conss: Sequence[Constraints],
    device: str | torch.device = "cpu",
    min_batch: int | None = None,
    route: str = "auto",
) -> list[SVMResult]:
    """:func:`solve_frobenius` for every constraint set, batched where the route table says
    (:data:`attnsvm.svm.routes.FROBENIUS`: from ``routes.BATCH_MIN`` batchable instances, or
    ``min_batch``; ``route``: a cell's ``svm_route``), the per-instance routes otherwise."""
    min_batch = R.BATCH_MIN if min_batch is None else min_batch
    batch = sum(batchable(c) for c in conss)
    batch = batch if batch >= min_batch or route == "batched-dual" else 1
    first = [R.frobenius(c, route, batch)[0] for c in conss]
    if "batched-dual" in first:
        return solve_frobenius_batched(conss, device)[0]
    return [solve_frobenius(c, route) for c in conss]
