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
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.gd.model import SingleHead
from attnsvm.gd.optimizers import Rule
from attnsvm.gd.train import TrainResult, build, descend, host_result, train_settings


def radii(radius_min: float, radius_max: float, count: int) -> np.ndarray:
    """Geometric grid of ``count`` radii from ``radius_min`` to ``radius_max``."""
    return np.geomspace(radius_min, radius_max, max(int(count), 1))


def path_radii(settings: Any) -> np.ndarray:
    """The radii of a cell's path: ``checkpoint_count`` of them, geometric from
    ``radius_min`` to ``radius_max`` (its ``train`` settings)."""
    return radii(settings.radius_min, settings.radius_max, settings.checkpoint_count)


def _sq(t: Tensor) -> Tensor:
    return (t * t).sum(dim=(-2, -1))


def _blocks(theta: Tensor) -> list[Tensor]:
    """W, or K and Q, of the packed ``theta`` (attnsvm.gd.model.pack)."""
    return [theta] if theta.dim() == 3 else [theta[0], theta[1]]


class _Ball:
    """The constraint set of one parameterization: ``||W||_F^2 <= R^2`` (W) or
    ``||K||_F^2 + ||Q||_F^2 <= 2R`` (KQ), over the joint variable P = W or (K, Q) packed."""

    def __init__(self, param: str, S: int, tiny: float) -> None:
        self.param, self.S, self.tiny = param, S, tiny

    def sqnorm(self, P: Tensor) -> Tensor:
        """``||P||^2`` per seed, (S,)."""
        return sum(_sq(b) for b in _blocks(P))

    def bound(self, R: float) -> float:
        """Squared radius of the ball in the joint variable."""
        return R * R if self.param == "W" else 2.0 * R

    def project(self, P: Tensor, R: float, onto: bool = False) -> Tensor:
        """P rescaled into the ball (``onto=True``: onto its sphere); P = 0 stays 0."""
        nrm2 = self.sqnorm(P)
        f = torch.sqrt(self.bound(R) / torch.clamp(nrm2, min=self.tiny))
        if not onto:
            f = torch.clamp(f, max=1.0)
        return P * torch.where(nrm2 > 0, f, torch.ones_like(f)).view(self.S, 1, 1)

    def direction(self, P: Tensor, G: Tensor, R: float) -> Tensor:
        """G with its outward radial part removed where P lies on the sphere (Riemannian)."""
        nrm2 = self.sqnorm(P)
        inner = sum((g * p).sum(dim=(-2, -1)) for g, p in zip(_blocks(G), _blocks(P), strict=True))
        on_sphere = nrm2 >= self.bound(R) * (1 - 1e-9)
        outward = on_sphere & (inner < 0)  # -G points out of the ball
        coef = torch.where(outward, inner / torch.clamp(nrm2, min=self.tiny), 0.0)
        return G - coef.view(self.S, 1, 1) * P

    def step(self, P: Tensor, D: Tensor, eta: float) -> Tensor:
        """``P - eta D / ||D||`` (a zero D gives a zero step)."""
        dn = torch.sqrt(sum(_sq(b) for b in _blocks(D)))
        scale = eta / torch.clamp(dn, min=self.tiny)
        return P - torch.where(dn > 0, scale, torch.zeros_like(scale)).view(self.S, 1, 1) * D


class Projected(Rule):
    """The regularization path's step at radius R: ``Proj(P - eta_j rho D / ||D||)`` with
    ``eta_j = lr / sqrt(1 + j)`` at its j-th step, D the Riemannian direction of
    :meth:`_Ball.direction` (module docstring)."""

    def __init__(self, lr: float, ball: _Ball, R: float) -> None:
        super().__init__(lr)
        self.ball, self.R, self.rho = ball, R, np.sqrt(ball.bound(R))

    def __call__(self, theta: Tensor, G: Tensor, loss: Tensor) -> Tensor:
        ball, R, j = self.ball, self.R, self.k
        self.k += 1
        D = ball.direction(theta, G, R)
        return ball.project(ball.step(theta, D, (self.lr / np.sqrt(1.0 + j)) * self.rho), R)


def regpath_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    init: dict[str, np.ndarray],
    settings: Any = None,
    *,
    device: str = "auto",
    mask: np.ndarray | None = None,
    **fields,
) -> tuple[TrainResult, np.ndarray]:
    """Regularization path of S seeds (linear head); returns (TrainResult, radii).

    docs/science.md §4, "Regularization path"; the module docstring gives the method: at each
    radius the descent loop of :mod:`attnsvm.gd.train` with the :class:`Projected` step, from
    the last radius's answer scaled onto the sphere. ``settings`` / ``fields``: the training
    settings (param, lr, dtype; ``iterations`` steps per radius; the radii of
    :func:`path_radii`, or ``radii=`` given directly). A seed whose loss or step becomes
    non-finite keeps its last finite P, with ``nonfinite_iteration`` the index of that radius.
    """
    t0 = time.perf_counter()
    o = train_settings(settings, **{k: v for k, v in fields.items() if k != "radii"})
    radii = np.asarray(fields.get("radii", path_radii(o)), dtype=np.float64)
    arrays = {"X": X, "Y": Y, "Z": Z, "v": v, "mask": mask}
    model, init_t = build(SingleHead, arrays, init, o.replace(head="linear", lam=0.0),
                          device=device, ridge=0.0)  # fmt: skip
    (P,) = model.params(init_t)
    S, dev = model.seeds, P.device
    ball = _Ball(model.param, S, float(torch.finfo(P.dtype).tiny))
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad_at = torch.full((S,), -1, dtype=torch.int64, device=dev)
    records: dict[str, list[Tensor]] = {"W": [], "softmax": [], "loss": []}
    with torch.no_grad():
        for c, R in enumerate(radii):
            P = ball.project(P, float(R), onto=True)
            rule = Projected(o.lr, ball, float(R))
            _, now, _, (P,) = descend(model, [P], [rule], [], o.iterations, freeze=True,
                                      alive=alive)  # fmt: skip
            bad_at = torch.where(alive & ~now, c, bad_at)
            alive = now
            loss, s = model.loss([P])
            for name, t in (("W", model.combined(P)), ("softmax", s), ("loss", loss)):
                records[name].append(t.to(torch.float64))
        buffers = {k: torch.stack(v, dim=1) for k, v in records.items()}
        its = np.arange(1, len(radii) + 1, dtype=np.int64)
        return host_result(its, buffers, alive, bad_at, dev, t0), radii
