"""Regularization path of attention (SCIENCE.md section 4, "Regularization path").

For radii ``R_1 < ... < R_C`` (geometric from ``radius_min`` to ``radius_max``) it solves

    W_R = argmin_{||W||_F <= R} L(W)                      (param W)
    (K_R, Q_R) = argmin_{||K||_F^2 + ||Q||_F^2 <= 2R} L(K, Q)   (param KQ)

by projected normalized gradient descent, batched over seeds like training: at each radius,
``steps`` iterations of

    P <- Proj(P - eta_j * rho * D / ||D||_F),   eta_j = lr / sqrt(1 + j),

with P = W (rho = R) or the pair (K, Q) (rho = sqrt(2R), one joint step), D the loss gradient
with its outward radial part removed when P lies on the sphere (a Riemannian step), and Proj
the rescaling onto the ball. Each radius starts from the previous solution scaled onto its
sphere (path following) and ends at the last iterate (the loss itself cannot rank iterates at
large R: its changes fall below float64 rounding long before the direction has converged,
while the gradient, computed relative to the top token, stays accurate). No ridge is added:
the ball bounds the norm. Theory: ``W_R / R -> W_mm / ||W_mm||_F`` and
``K_R Q_R^T / R -> W_mm_* / ||W_mm_*||_*`` as R grows (both correlations -> 1).

The result has the layout of :class:`attnsvm.train.TrainResult` with one "checkpoint" per
radius (``iterations`` = 1..C), so stores, metrics and curves reuse the training code; the
radii are returned separately.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from attnsvm.device import describe_device, resolve_device
from attnsvm.model import combined_matrix, loss_and_grad, loss_fn
from attnsvm.train import _DTYPES, TrainResult


def radii(radius_min: float, radius_max: float, count: int) -> np.ndarray:
    """Geometric grid of ``count`` radii from ``radius_min`` to ``radius_max``."""
    return np.geomspace(radius_min, radius_max, max(int(count), 1))


def _sq(t: Tensor) -> Tensor:
    return (t * t).sum(dim=(-2, -1))


def regpath_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    init: dict[str, np.ndarray],
    *,
    param: str,
    radii: np.ndarray,
    steps: int,
    lr: float,
    dtype: str = "float64",
    device: str = "auto",
    mask: np.ndarray | None = None,
) -> tuple[TrainResult, np.ndarray]:
    """Regularization path of S seeds (linear head); returns (TrainResult, radii)."""
    t0 = time.perf_counter()
    dev = resolve_device(device)
    tdt = _DTYPES[dtype]

    def put(a: np.ndarray) -> Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(device=dev, dtype=tdt)

    Xt, Yt, Zt, vt = put(X), put(Y), put(Z), put(v)
    names = ("W",) if param == "W" else ("K", "Q")
    P = {k: put(init[k]) for k in names}
    S, n, T, d = Xt.shape
    kw = {"param": param, "head": "linear", "lam": 0.0, "ridge": 0.0}
    if mask is not None:
        kw["mask"] = torch.as_tensor(np.asarray(mask, dtype=bool)).to(device=dev)
    radii = np.asarray(radii, dtype=np.float64)
    C = len(radii)
    W_buf = torch.zeros((S, C, d, d), dtype=torch.float64, device=dev)
    sm_buf = torch.zeros((S, C, n, T), dtype=torch.float64, device=dev)
    loss_buf = torch.zeros((S, C), dtype=torch.float64, device=dev)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad_at = torch.full((S,), -1, dtype=torch.int64, device=dev)
    tiny = float(torch.finfo(tdt).tiny)

    def sqnorm(p: dict[str, Tensor]) -> Tensor:  # (S,)
        return sum(_sq(p[k]) for k in names)

    def bound(R: float) -> float:  # squared radius of the ball in the joint variable
        return R * R if param == "W" else 2.0 * R

    def project(p: dict[str, Tensor], R: float, onto: bool = False) -> dict[str, Tensor]:
        nrm2 = sqnorm(p)
        f = torch.sqrt(bound(R) / torch.clamp(nrm2, min=tiny))
        if not onto:
            f = torch.clamp(f, max=1.0)
        f = torch.where(nrm2 > 0, f, torch.ones_like(f)).view(S, 1, 1)
        return {k: p[k] * f for k in names}

    with torch.no_grad():
        for c, R in enumerate(radii):
            R = float(R)
            rho = np.sqrt(bound(R))
            P = project(P, R, onto=True)
            for j in range(steps):
                loss, s, G = loss_and_grad(P, Xt, Yt, Zt, vt, None, **kw)
                nrm2 = sqnorm(P)
                inner = sum((G[k] * P[k]).sum(dim=(-2, -1)) for k in names)  # <G, P>
                on_sphere = nrm2 >= bound(R) * (1 - 1e-9)
                outward = on_sphere & (inner < 0)  # -G points out of the ball
                coef = torch.where(outward, inner / torch.clamp(nrm2, min=tiny), 0.0)
                D = {k: G[k] - coef.view(S, 1, 1) * P[k] for k in names}
                dn = torch.sqrt(sum(_sq(D[k]) for k in names))
                scale = (lr / np.sqrt(1.0 + j)) * rho / torch.clamp(dn, min=tiny)
                scale = torch.where(dn > 0, scale, torch.zeros_like(scale)).view(S, 1, 1)
                new = project({k: P[k] - scale * D[k] for k in names}, R)
                ok = torch.isfinite(loss) & alive
                for k in names:
                    ok = ok & torch.isfinite(new[k]).flatten(1).all(dim=1)
                newly_bad = alive & ~ok
                bad_at = torch.where(newly_bad, torch.full_like(bad_at, c), bad_at)
                alive = alive & ok
                m3 = alive.view(S, 1, 1)
                P = {k: torch.where(m3, new[k], P[k]) for k in names}
            loss, s = loss_fn(P, Xt, Yt, Zt, vt, None, **kw)
            W_buf[:, c] = combined_matrix(P, param).to(torch.float64)
            sm_buf[:, c] = s.to(torch.float64)
            loss_buf[:, c] = loss.to(torch.float64)
        wnorm = torch.linalg.vector_norm(W_buf, dim=(-2, -1))
        out = [t.cpu().numpy() for t in (W_buf, sm_buf, loss_buf, wnorm, alive, bad_at)]
    W_np, sm_np, loss_np, wnorm_np, alive_np, bad_np = out
    res = TrainResult(
        iterations=np.arange(1, C + 1, dtype=np.int64),
        W=W_np,
        softmax=sm_np,
        loss=loss_np,
        wnorm=wnorm_np,
        finite=alive_np.astype(bool),
        nonfinite_iteration=bad_np.astype(np.int64),
        device=describe_device(dev),
        seconds=time.perf_counter() - t0,
    )
    return res, radii
