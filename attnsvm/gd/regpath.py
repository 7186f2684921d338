"""Regularization path of attention (docs/science.md §4, "Regularization path").

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

The result has the layout of :class:`attnsvm.gd.train.TrainResult` with one "checkpoint" per
radius (``iterations`` = 1..C), so stores, metrics and curves reuse the training code; the
radii are returned separately.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.settings import Settings
from attnsvm.gd.device import resolve_device, to_device
from attnsvm.gd.model import combined_matrix, loss_and_grad, loss_fn, param_names, train_settings
from attnsvm.gd.train import TORCH_DTYPES, TrainResult, host_result


def radii(radius_min: float, radius_max: float, count: int) -> np.ndarray:
    """Geometric grid of ``count`` radii from ``radius_min`` to ``radius_max``."""
    return np.geomspace(radius_min, radius_max, max(int(count), 1))


def path_radii(settings: Settings) -> np.ndarray:
    """The radii of a cell's path: ``checkpoint_count`` of them, geometric from
    ``radius_min`` to ``radius_max`` (its ``train`` settings)."""
    return radii(settings.radius_min, settings.radius_max, settings.checkpoint_count)


def _sq(t: Tensor) -> Tensor:
    return (t * t).sum(dim=(-2, -1))


class _Ball:
    """The constraint set of one parameterization: ``||W||_F^2 <= R^2`` (W) or
    ``||K||_F^2 + ||Q||_F^2 <= 2R`` (KQ), over the joint variable P = W or (K, Q)."""

    def __init__(self, param: str, S: int, tiny: float) -> None:
        self.param, self.names, self.S, self.tiny = param, param_names(param), S, tiny

    def sqnorm(self, p: dict[str, Tensor]) -> Tensor:
        """``||P||^2`` per seed, (S,)."""
        return sum(_sq(p[k]) for k in self.names)

    def bound(self, R: float) -> float:
        """Squared radius of the ball in the joint variable."""
        return R * R if self.param == "W" else 2.0 * R

    def project(self, p: dict[str, Tensor], R: float, onto: bool = False) -> dict[str, Tensor]:
        """P rescaled into the ball (``onto=True``: onto its sphere); P = 0 stays 0."""
        nrm2 = self.sqnorm(p)
        f = torch.sqrt(self.bound(R) / torch.clamp(nrm2, min=self.tiny))
        if not onto:
            f = torch.clamp(f, max=1.0)
        f = torch.where(nrm2 > 0, f, torch.ones_like(f)).view(self.S, 1, 1)
        return {k: p[k] * f for k in self.names}

    def direction(self, P: dict[str, Tensor], G: dict[str, Tensor], R: float) -> dict[str, Tensor]:
        """G with its outward radial part removed where P lies on the sphere (Riemannian)."""
        S, tiny = self.S, self.tiny
        nrm2 = self.sqnorm(P)
        inner = sum((G[k] * P[k]).sum(dim=(-2, -1)) for k in self.names)  # <G, P>
        on_sphere = nrm2 >= self.bound(R) * (1 - 1e-9)
        outward = on_sphere & (inner < 0)  # -G points out of the ball
        coef = torch.where(outward, inner / torch.clamp(nrm2, min=tiny), 0.0)
        return {k: G[k] - coef.view(S, 1, 1) * P[k] for k in self.names}

    def step(self, P: dict[str, Tensor], D: dict[str, Tensor], eta: float) -> dict[str, Tensor]:
        """``Proj(P - eta D / ||D||)`` (a zero D gives a zero step)."""
        dn = torch.sqrt(sum(_sq(D[k]) for k in self.names))
        scale = eta / torch.clamp(dn, min=self.tiny)
        scale = torch.where(dn > 0, scale, torch.zeros_like(scale)).view(self.S, 1, 1)
        return {k: P[k] - scale * D[k] for k in self.names}


def _follow_radius(P, R, c, ball, data, kw, steps, lr, alive, bad_at):
    """``steps`` projected steps at radius R (the c-th), from P scaled onto the sphere.

    A seed whose loss or step becomes non-finite keeps its last finite P and gets
    ``bad_at = c``. Returns ``(P, alive, bad_at)``.
    """
    S, names = ball.S, ball.names
    rho = np.sqrt(ball.bound(R))
    P = ball.project(P, R, onto=True)
    for j in range(steps):
        loss, s, G = loss_and_grad(P, *data, **kw)
        D = ball.direction(P, G, R)
        new = ball.project(ball.step(P, D, (lr / np.sqrt(1.0 + j)) * rho), R)
        ok = torch.isfinite(loss) & alive
        for k in names:
            ok = ok & torch.isfinite(new[k]).flatten(1).all(dim=1)
        newly_bad = alive & ~ok
        bad_at = torch.where(newly_bad, torch.full_like(bad_at, c), bad_at)
        alive = alive & ok
        m3 = alive.view(S, 1, 1)
        P = {k: torch.where(m3, new[k], P[k]) for k in names}
    return P, alive, bad_at


def regpath_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    init: dict[str, np.ndarray],
    settings: Settings | None = None,
    *,
    device: str = "auto",
    mask: np.ndarray | None = None,
    **fields,
) -> tuple[TrainResult, np.ndarray]:
    """Regularization path of S seeds (linear head); returns (TrainResult, radii).

    docs/science.md §4, "Regularization path"; the module docstring gives the method.
    ``settings`` / ``fields``: the training settings (param, lr, dtype; ``iterations`` steps
    per radius; the radii of :func:`path_radii`, or ``radii=`` given directly).
    """
    o = train_settings(settings, **{k: v for k, v in fields.items() if k != "radii"})
    radii = np.asarray(fields.get("radii", path_radii(o)), dtype=np.float64)
    param, steps, lr = o.param, o.iterations, o.lr
    t0 = time.perf_counter()
    dev = resolve_device(device)
    tdt = TORCH_DTYPES[o.dtype]
    data = tuple(to_device(a, dev, tdt) for a in (X, Y, Z, v)) + (None,)
    P = {k: to_device(init[k], dev, tdt) for k in param_names(param)}
    S, n, T, d = data[0].shape
    kw = {"settings": o.replace(head="linear", lam=0.0), "ridge": 0.0, "mask": None}
    if mask is not None:
        kw["mask"] = torch.as_tensor(np.asarray(mask, dtype=bool)).to(device=dev)
    C = len(radii)
    W_buf = torch.zeros((S, C, d, d), dtype=torch.float64, device=dev)
    sm_buf = torch.zeros((S, C, n, T), dtype=torch.float64, device=dev)
    loss_buf = torch.zeros((S, C), dtype=torch.float64, device=dev)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad_at = torch.full((S,), -1, dtype=torch.int64, device=dev)
    ball = _Ball(param, S, float(torch.finfo(tdt).tiny))
    with torch.no_grad():
        for c, R in enumerate(radii):
            P, alive, bad_at = _follow_radius(P, float(R), c, ball, data, kw, steps, lr,
                                              alive, bad_at)  # fmt: skip
            loss, s = loss_fn(P, *data, **kw)
            W_buf[:, c] = combined_matrix(P, param).to(torch.float64)
            sm_buf[:, c] = s.to(torch.float64)
            loss_buf[:, c] = loss.to(torch.float64)
        its = np.arange(1, C + 1, dtype=np.int64)
        return host_result(its, W_buf, sm_buf, loss_buf, alive, bad_at, dev, t0), radii
