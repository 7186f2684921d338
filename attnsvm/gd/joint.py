"""Joint training of the attention weights and the linear head v (docs/science.md §11).

The fixed-head training of :mod:`attnsvm.gd.train` moves W (or K and Q) only. Here the linear
head v of ``f(X) = v^T X^T S(X W z)`` is a trained parameter too (the paper's open question on
joint training; Tarzanagh et al. arXiv 2306.13596, Vasudeva et al.). Normalized GD normalizes
per block: W (or K and Q, each) by its own Frobenius norm as in §3, and v by its own Euclidean
norm, with step ``head_lr`` (default: ``lr``). With ``head_lr = 0`` v never moves and the run
is the fixed-head run of :func:`attnsvm.gd.train.train_batch`, bit for bit (a test checks it).

The loop freezes a seed at its last finite state at every step (the ``freeze=True`` loop of
:mod:`attnsvm.gd.train`), whose bits are those of the fixed-head training on finite runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.settings import Settings
from attnsvm.gd.device import resolve_device, to_device
from attnsvm.gd.kernel import reference_token, sigmoid
from attnsvm.gd.model import (
    Objective,
    combined_matrix,
    loss_fn,
    pack,
    param_names,
    train_settings,
    unpack,
)
from attnsvm.gd.train import (
    TORCH_DTYPES,
    TrainResult,
    _check_arguments,
    _Checkpoints,
    _seed_dims,
    _ticker,
    _zero_if_finite,
    host_result,
    step_rule,
)

#: ``(theta, v, want_grad) -> (loss (S,), s (S,n,T), W (S,d,d), G like theta, G_v (S,d))``
JointEvaluate = Callable[[Tensor, Tensor, bool], tuple]


class JointObjective(Objective):
    """:class:`attnsvm.gd.model.Objective` of the linear head with v as an argument, and the
    gradient of the loss in v (docs/science.md §11).

    The loss and the gradient in theta are the Objective's (the same kernels, so the same
    bits for the same v). With ``g_i = dL/df_i = -Y_i sigmoid(-Y_i f_i) / n`` and the attended
    token ``r_i = x_ia + sum_t s_it (x_it - x_ia)`` (stable form of §3),
    ``grad_v L = sum_i g_i r_i``.
    """

    def __init__(
        self, X: Tensor, Y: Tensor, Z: Tensor, v: Tensor, settings: Any = None, **options: Any
    ) -> None:
        super().__init__(X, Y, Z, v, None, settings, **options)
        if self.head != "linear":
            raise ValueError(f"a trained head needs head 'linear', got {self.head!r}")
        self.Y = Y

    def evaluate(self, theta: Tensor, v: Tensor, grad: bool = True) -> tuple:
        """``(loss, s, W, G, G_v)`` at ``(theta, v)``; G and G_v None for ``grad=False``."""
        self.v = v
        self.c = (self.X * v[:, None, None, :]).sum(-1)  # token scores v^T x_it, (S, n, T)
        loss, s, W, G = self(theta, grad)
        if not grad:
            return loss, s, W, None, None
        a = s.argmax(-1, keepdim=True)  # the top token (softmax is monotone in the logits)
        xa = reference_token(self.X, a) if self.stable else 0.0 * self.X[..., 0, :]
        r = xa + (s.unsqueeze(-2) @ (self.X - xa.unsqueeze(-2))).squeeze(-2)  # (S, n, d)
        f = (r * v.unsqueeze(-2)).sum(-1)
        n = self.shape[1]
        g = -self.Y * sigmoid(-self.Y * f) / n  # (S, n)
        return loss, s, W, G, (g.unsqueeze(-1) * r).sum(-2)


def _autograd_joint(data: tuple, settings: Settings, options: dict[str, Any]) -> JointEvaluate:
    """:meth:`JointObjective.evaluate` by autograd through :func:`loss_fn` (v a leaf too)."""
    X, Y, Z = data
    param = settings.param

    def evaluate(theta: Tensor, v: Tensor, want: bool) -> tuple:
        leaves = {k: p.detach().requires_grad_(want) for k, p in unpack(theta, param).items()}
        vl = v.detach().requires_grad_(want)
        with torch.enable_grad():
            loss, s = loss_fn(leaves, X, Y, Z, vl, None, settings, **options)
            G = Gv = None
            if want:
                *gs, Gv = torch.autograd.grad(loss.sum(), [*leaves.values(), vl])
                G = pack(dict(zip(leaves, gs, strict=True)), param)
        W = combined_matrix(leaves, param).detach()
        return loss.detach(), s.detach(), W, G, Gv

    return evaluate


@dataclass
class JointResult:
    """A :class:`attnsvm.gd.train.TrainResult` and the head at its checkpoints."""

    train: TrainResult
    v: np.ndarray  # (S, C, d): v(k) at every checkpoint (float64)


def _descend_joint(
    evaluate: JointEvaluate,
    theta: Tensor,
    v: Tensor,
    steps: tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]],
    ks: list[int],
    iterations: int,
    progress: Callable[[int], None] | None,
    nT: tuple[int, int],
) -> tuple[_Checkpoints, Tensor, Tensor, Tensor]:
    """GD on ``(theta, v)`` with the per-step freeze of non-finite seeds (docs/science.md §11).

    ``nT``: (n, T) of the data. Returns the checkpoint buffers, v at the checkpoints
    (S, C, d), ``alive`` and ``bad_at``.
    """
    S, dev = theta.shape[-3], theta.device
    buffers = _Checkpoints(theta, ks, *nT)
    vbuf = torch.zeros((S, len(ks), v.shape[-1]), dtype=torch.float64, device=dev)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    steps_alive = torch.zeros(S, dtype=torch.int64, device=dev)
    tick, seed_dims = _ticker(iterations, progress), _seed_dims(theta)
    step_w, step_v = steps
    for k in range(iterations + 1):
        tick(k)
        last = k == iterations
        loss, s, W, G, Gv = evaluate(theta, v, not last)
        buffers.record(k, W, s, loss)
        if k in buffers.slot:
            vbuf[:, buffers.slot[k]] = v
        probe = loss
        if not last:
            new = theta - step_w(G)
            new_v = v - step_v(Gv.unsqueeze(-1)).squeeze(-1)
            probe = loss + _zero_if_finite(new, seed_dims) + _zero_if_finite(new_v, (1,))
        alive &= (probe - probe) == 0.0  # probe is finite
        if last:
            break
        steps_alive += alive
        theta = torch.where(alive.view(S, 1, 1), new, theta)
        v = torch.where(alive.view(S, 1), new_v, v)
    return buffers, vbuf, alive, torch.where(alive, -1, steps_alive)


def train_joint_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    init: dict[str, np.ndarray],
    settings: Settings | None = None,
    *,
    head_lr: float | None = None,
    device: str = "auto",
    eps: float | None = None,
    ridge: float | None = None,
    stable: bool = True,
    gradient: str = "analytic",
    mask: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
    **fields: Any,
) -> JointResult:
    """Full-batch GD on ``(W or (K, Q), v)`` for S seeds, linear head (docs/science.md §11).

    Arguments as :func:`attnsvm.gd.train.train_batch` (``v`` is the initial head; the settings
    or keyword fields: param, optimizer, lr, iterations, checkpoints, dtype, ...); the head
    moves by ``head_lr`` (default ``lr``) times its normalized gradient (per block, see the
    module docstring) or times its gradient (plain GD). A seed whose loss or step goes
    non-finite at step k keeps its state of step k and gets ``nonfinite_iteration = k``.
    """
    settings = train_settings(settings, **fields)
    iterations, ks = _check_arguments(settings, gradient, init)
    head_lr = float(settings.lr if head_lr is None else head_lr)
    if not (np.isfinite(head_lr) and head_lr >= 0):
        raise ValueError(f"head_lr must be a non-negative finite number, got {head_lr!r}")
    t0 = time.perf_counter()
    dev = resolve_device(device)
    tdt = TORCH_DTYPES[settings.dtype]
    eps = float(torch.finfo(tdt).tiny) if eps is None else float(eps)
    options: dict[str, Any] = {"ridge": ridge, "stable": stable, "mask": None}
    if mask is not None:
        options["mask"] = torch.as_tensor(np.asarray(mask, dtype=bool)).to(device=dev)
    Xt, Yt, Zt, vt = (to_device(a, dev, tdt) for a in (X, Y, Z, v))
    param = settings.param
    theta0 = pack({k: to_device(init[k], dev, tdt) for k in param_names(param)}, param)
    steps = (step_rule(settings, settings.lr, eps), step_rule(settings, head_lr, eps))
    no_autograd = torch.inference_mode if gradient == "analytic" else torch.no_grad
    with no_autograd():
        if gradient == "analytic":
            evaluate = JointObjective(Xt, Yt, Zt, vt, settings, **options).evaluate
        else:
            evaluate = _autograd_joint((Xt, Yt, Zt), settings, options)
        buf, vbuf, alive, bad_at = _descend_joint(evaluate, theta0, vt, steps, ks, iterations,
                                                  progress, X.shape[1:3])  # fmt: skip
        its = np.asarray(ks, dtype=np.int64)
        res = host_result(its, buf.W, buf.softmax, buf.loss, alive, bad_at, dev, t0)
        return JointResult(res, vbuf.cpu().numpy())
