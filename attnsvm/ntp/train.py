"""Batched normalized GD on next-token prediction (docs/science.md §8, "Model and loss"; the
steps of §3): S seeds of one shape train together, float64, seeded, W or W = K Q^T.

``s_i = S(X_i W x_iT)``, ``L = (1/n) sum_i -log sum_{t: x_it = y_i} s_it``: the attention of
the one kernel (:class:`attnsvm.gd.kernel.Attention`) and its next-token loss
(:func:`attnsvm.gd.kernel.next_token_loss`, whose gradient does not cancel once the label's
probability rounds to 1).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.settings import Settings
from attnsvm.gd.device import describe_device, resolve_device
from attnsvm.gd.kernel import Attention, next_token_loss
from attnsvm.gd.model import train_settings


@dataclass
class NTPTrainResult:
    """Checkpointed trajectory of S seeds (C checkpoints), host float64 arrays."""

    iterations: np.ndarray  # (C,)
    W: np.ndarray  # (S, C, d, d): W(k), or K(k) Q(k)^T
    softmax: np.ndarray  # (S, C, n, T)
    loss: np.ndarray  # (S, C)
    wnorm: np.ndarray  # (S, C)
    finite: np.ndarray  # (S,) bool
    nonfinite_iteration: np.ndarray  # (S,) first bad step, -1 if none
    device: str
    seconds: float


def scores_grad(X: Tensor, Z: Tensor, label: Tensor, W: Tensor, attention: Attention | None = None):
    """Loss (S,), softmax (S, n, T) and ``grad_W L`` (S, d, d) of docs/science.md §8.

    ``attention``: the kernel of ``(X, Z)`` prepared once per run (built here if None)."""
    n = X.shape[1]
    attention = Attention(X, Z) if attention is None else attention
    _, log_s = attention.log_softmax(W)
    loss, p, g = next_token_loss(log_s, label)
    G = ((X * g.unsqueeze(-1)).sum(2).transpose(1, 2) @ Z) / n  # sum_i (X_i^T g_i) z_i^T
    return loss, p, G


def _normalized(G: Tensor, lr: float, eps: float) -> Tensor:
    nrm = torch.linalg.matrix_norm(G).clamp_min(0.0)[..., None, None]
    return G * (lr / (nrm + eps))


def train_ntp(
    X: np.ndarray,
    Z: np.ndarray,
    label: np.ndarray,
    init: dict[str, np.ndarray],
    settings: Settings | None = None,
    *,
    device: str = "auto",
    **fields,
) -> NTPTrainResult:
    """Train S seeds at once: X (S, n, T, d), Z (S, n, d), label (S, n, T) bool, init
    ``{"W": (S, d, d)}`` or ``{"K", "Q": (S, d, m)}``; ``settings`` / ``fields``: the training
    settings (checkpoints, lr, optimizer, ridge), as for :func:`attnsvm.gd.train.train_batch`.
    Normalized GD (K and Q each normalized, the settings' vanishing ridge of §3 on KQ) or
    plain GD; checkpoint k is the state after k steps. A seed whose loss or step goes
    non-finite keeps its last finite state (flagged)."""
    o = train_settings(settings, **fields)
    checkpoints, lr, optimizer = o.checkpoints, o.lr, o.optimizer
    t0 = time.perf_counter()
    dev = resolve_device(device)
    f = {"dtype": torch.float64, "device": dev}
    Xt, Zt = torch.as_tensor(X, **f), torch.as_tensor(Z, **f)
    Lt = torch.as_tensor(label, dtype=torch.bool, device=dev)
    P = {k: torch.as_tensor(v, **f).clone() for k, v in init.items()}
    S, n, T, d = Xt.shape
    eps = float(torch.finfo(torch.float64).tiny)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad = torch.full((S,), -1, dtype=torch.int64, device=dev)
    ks = sorted(set(int(k) for k in checkpoints))
    C = len(ks)
    outW, outS = torch.zeros((S, C, d, d), **f), torch.zeros((S, C, n, T), **f)
    outL = torch.zeros((S, C), **f)

    def matrix() -> Tensor:
        return P["W"] if "W" in P else P["K"] @ P["Q"].transpose(-1, -2)

    attention = Attention(Xt, Zt, o)
    c = 0
    for k in range(ks[-1] + 1):
        W = matrix()
        loss, p, G = scores_grad(Xt, Zt, Lt, W, attention)
        if c < C and ks[c] == k:
            outW[:, c], outS[:, c], outL[:, c] = W, p, loss
            c += 1
        if k == ks[-1]:
            break
        grads = {"W": G} if "W" in P else {
            "K": G @ P["Q"] + 2 * o.ridge * P["K"],
            "Q": G.transpose(-1, -2) @ P["K"] + 2 * o.ridge * P["Q"],
        }  # fmt: skip
        steps = {
            name: _normalized(g, lr, eps) if optimizer == "normalized" else lr * g
            for name, g in grads.items()
        }
        ok = torch.isfinite(loss) & torch.stack(
            [torch.isfinite(s).all(dim=(-2, -1)) for s in steps.values()]
        ).all(0)
        bad = torch.where(alive & ~ok, k, bad)
        alive &= ok
        for name, s in steps.items():
            P[name] -= torch.where(alive[:, None, None], s, 0.0)
    wn = torch.linalg.matrix_norm(outW)
    return NTPTrainResult(
        np.asarray(ks, np.int64),
        outW.cpu().numpy(),
        outS.cpu().numpy(),
        outL.cpu().numpy(),
        wn.cpu().numpy(),
        alive.cpu().numpy(),
        bad.cpu().numpy(),
        describe_device(dev),
        time.perf_counter() - t0,
    )
