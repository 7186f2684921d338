"""Multi-head attention: H heads through one fixed linear head, trained by normalized GD on the
stacked parameters (docs/science.md §12; Deora, Ghaderi, Taheri, Thrampoulidis, TMLR 2024).

Model (linear head only): head h has its own ``W_h`` (or ``W_h = K_h Q_h^T``),

    s_ih = S(X_i W_h z_i),   r_ih = X_i^T s_ih,   f(X_i) = v^T (1/H) sum_h r_ih,

each ``r_ih`` in the stable form of docs/science.md §3 (relative to head h's top token). Normalized
GD treats ``(W_1, ..., W_H)`` as one parameter: one Frobenius norm over all heads (for KQ: one over
the stacked K's and one over the stacked Q's, as K and Q are normalized separately for one head).

Layout: ``theta`` is ``(S, H d, d)`` for W (row block h is ``W_h``) and ``(2, S, H d, m)`` for KQ,
so that :func:`attnsvm.gd.train._normalized_step` (a norm over the last two axes) is the stacked
normalization. With H = 1 the layout, the kernels and their operand order are those of
:class:`attnsvm.gd.model.Objective` and :func:`attnsvm.gd.train.train_batch`: the same bits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.settings import Settings
from attnsvm.gd.device import describe_device, resolve_device, to_device
from attnsvm.gd.kernel import Attention, attended_token, logistic
from attnsvm.gd.model import check_choice, logistic_loss, train_settings
from attnsvm.gd.train import TORCH_DTYPES, _check_checkpoints, _normalized_step, _zero_if_finite

#: stream of the initializations of heads 2..H (head 1 is make_init's, so H = 1 is unchanged)
HEAD_INIT_STREAM = 0x4D48


def head_inits(init: dict[str, np.ndarray], seed: int, heads: int, scheme: str) -> dict:
    """Initializations of H heads from head 1's ``init`` (docs/science.md §12).

    Head 1 is ``init`` itself; heads 2..H are drawn like it (same scheme and scale, see
    docs/science.md §3) from a generator seeded by ``(seed, HEAD_INIT_STREAM, h)``. Returns the
    same keys with a head axis after the matrix's own axes removed: ``W (H, d, d)`` or
    ``K, Q (H, d, m)``.
    """
    out = {k: [np.asarray(v, dtype=np.float64)] for k, v in init.items()}
    for h in range(1, heads):
        rng = np.random.default_rng([seed, HEAD_INIT_STREAM, h])
        for k, v in init.items():
            b = 1.0 / np.sqrt(v.shape[0])
            if scheme == "zero":
                new = 0.1 * rng.standard_normal(v.shape) if k == "K" else np.zeros(v.shape)
            else:
                new = rng.uniform(-b, b, v.shape)
            out[k].append(new)
    return {k: np.stack(v) for k, v in out.items()}


def _per_head(X: Tensor, Z: Tensor, H: int) -> tuple[Tensor, Tensor]:
    """Tokens (S H, n, T, d) and queries (S H, n, d): every seed's data once per head."""
    S = X.shape[0]
    Xh = X.unsqueeze(1).expand(S, H, *X.shape[1:]).reshape(S * H, *X.shape[1:])
    return Xh, Z.unsqueeze(1).expand(S, H, *Z.shape[1:]).reshape(S * H, *Z.shape[1:])


def multi_loss_fn(
    params: dict[str, Tensor], X: Tensor, Y: Tensor, Z: Tensor, v: Tensor,
    settings: Settings | None = None, *, ridge: float | None = None, **fields,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Per-seed loss (S,) and per-head softmax (S, H, n, T), differentiable by autograd.

    ``params``: ``{"W": (S, H, d, d)}`` or ``{"K": (S, H, d, m), "Q": (S, H, d, m)}``;
    ``settings`` / ``fields``: the training settings (``param``). The reference for
    :class:`MultiObjective` (docs/science.md §12).
    """
    o = train_settings(settings, **fields)
    param = o.param
    check_choice("param", param, ("W", "KQ"))
    if param == "W":
        W = params["W"]
    else:
        W = params["K"] @ params["Q"].transpose(-1, -2)
    S, H = W.shape[:2]
    Xh, Zh = _per_head(X, Z, H)
    logits = Attention(Xh, Zh, o).logits(W.reshape(S * H, *W.shape[2:]))
    r, s = attended_token(Xh, logits)  # (S H, n, d), (S H, n, T)
    r = r.view(S, H, *r.shape[1:]).sum(1) / H
    f = (r @ v.unsqueeze(-1)).squeeze(-1)
    loss = logistic_loss(Y, f)
    if param == "KQ":
        K, Q = params["K"], params["Q"]
        r = o.ridge if ridge is None else ridge
        loss = loss + r * ((K * K).sum((-3, -2, -1)) + (Q * Q).sum((-3, -2, -1)))
    return loss, s.view(S, H, *s.shape[1:])


class MultiObjective:
    """Loss and hand-derived gradient of the H-head model (docs/science.md §12), batched.

    ``theta``: the module's layout. Calling returns ``(loss (S,), s (S, H, n, T),
    W (S, H, d, d), G)``, G shaped like theta (None for ``grad=False``). With ``e_iht =
    c_it - c_i,a_h`` and ``g_i = dL/df_i``, the logit gradient of head h is
    ``(g_i / H) s_iht (e_iht - sum_tau s_ihtau e_ihtau)``: the single-head formula of
    :class:`attnsvm.gd.model.Objective` with ``g_i / H``.
    """

    def __init__(
        self, X: Tensor, Y: Tensor, Z: Tensor, v: Tensor, settings: Settings | None = None, *,
        ridge: float | None = None, **fields,
    ) -> None:  # fmt: skip
        o = train_settings(settings, **fields)
        check_choice("param", o.param, ("W", "KQ"))
        S, n, T, d = X.shape
        H = self.H = int(o.heads)
        self.shape, self.param = (S, n, T, d), o.param
        self.ridge = float(o.ridge if ridge is None else ridge)
        self.attention = Attention(*_per_head(X, Z, H), o)  # the heads as S H rows
        Xc = X.transpose(-1, -2).reshape(S, 1, n * d, T).expand(S, H, n * d, T)
        self.X_cols = Xc.reshape(S * H * n, d, T)
        self.Z = self.attention.Z
        self.negY = (-Y).unsqueeze(-1)  # (S, n, 1)
        self.negY_n = self.negY / n
        c = (X * v[:, None, None, :]).sum(-1)  # token scores c_it = v^T x_it (as Objective)
        self.c = c.unsqueeze(1).expand(S, H, n, T)

    def combined(self, theta: Tensor) -> Tensor:
        """``W_h`` (or ``K_h Q_h^T``) of every head, shape (S H, d, d)."""
        S, _, _, d = self.shape
        if self.param == "W":
            return theta.view(S * self.H, d, d)
        m = theta.shape[-1]
        K, Q = theta[0].view(S * self.H, d, m), theta[1].view(S * self.H, d, m)
        return torch.bmm(K, Q.transpose(-1, -2))

    def __call__(self, theta: Tensor, grad: bool = True):
        S, n, T, d = self.shape
        H = self.H
        W = self.combined(theta)
        a, ls = self.attention.log_softmax(W)  # (S H, n, 1), (S H, n, T)
        a, s = a.view(S, H, n, 1), ls.exp_().view(S, H, n, T)
        ca = self.c.gather(-1, a)
        e = self.c - ca
        sse = (s * e).sum(-1, keepdim=True)
        fh = ca.add_(sse)  # (S, H, n, 1): v^T r_ih
        f = fh.sum(1).div_(H)  # (S, n, 1)
        m = torch.mul(self.negY, f, out=f)
        loss, sig = logistic(m, n, grad)
        if self.param == "KQ":
            sq = (theta * theta).sum((-2, -1))  # (2, S) over the stacked heads
            loss += self.ridge * (sq[0] + sq[1])
        Wh = W.view(S, H, d, d)
        if not grad:
            return loss, s, Wh, None
        g = torch.mul(self.negY_n, sig, out=sig).div_(H).unsqueeze(1)  # dL/df_ih, (S,1,n,1)
        dl = e.sub_(sse).mul_(s * g)  # (S, H, n, T)
        P = torch.bmm(self.X_cols, dl.view(S * H * n, T, 1)).view(S * H, n, d)
        GW = torch.bmm(P.transpose(-1, -2), self.Z)  # (S H, d, d)
        if self.param == "W":
            return loss, s, Wh, GW.view(S, H * d, d)
        mm = theta.shape[-1]
        G = torch.empty_like(theta)
        K, Q = theta[0].view(S * H, d, mm), theta[1].view(S * H, d, mm)
        torch.bmm(GW, Q, out=G[0].view(S * H, d, mm))
        torch.bmm(GW.transpose(-1, -2), K, out=G[1].view(S * H, d, mm))
        G += (2.0 * self.ridge) * theta
        return loss, s, Wh, G


@dataclass
class MultiTrainResult:
    """Checkpointed trajectory of S seeds of an H-head model (C checkpoints), host float64."""

    iterations: np.ndarray  # (C,)
    W: np.ndarray  # (S, C, H, d, d): W_h(k), or K_h Q_h^T for KQ
    softmax: np.ndarray  # (S, C, H, n, T)
    loss: np.ndarray  # (S, C)
    wnorm: np.ndarray  # (S, C): ||(W_1(k), ..., W_H(k))||_F, the stacked norm
    finite: np.ndarray  # (S,)
    nonfinite_iteration: np.ndarray  # (S,) first bad k (the seed stays there), -1 if none
    device: str
    seconds: float


def pack_heads(init: dict[str, np.ndarray], param: str) -> np.ndarray:
    """The module's ``theta`` layout from ``W (S, H, d, d)`` or ``K, Q (S, H, d, m)``."""
    if param == "W":
        W = init["W"]
        return W.reshape(W.shape[0], -1, W.shape[-1])
    return np.stack([init[k].reshape(init[k].shape[0], -1, init[k].shape[-1]) for k in "KQ"])


def train_multihead(
    X: np.ndarray, Y: np.ndarray, Z: np.ndarray, v: np.ndarray, init: dict[str, np.ndarray],
    settings: Settings | None = None, *, device: str = "auto", eps: float | None = None,
    ridge: float | None = None, **fields,
) -> MultiTrainResult:  # fmt: skip
    """Full-batch GD on S seeds of the H-head model (docs/science.md §12, §3).

    ``init``: ``{"W": (S, H, d, d)}`` or ``{"K", "Q": (S, H, d, m)}`` (H heads; the settings'
    ``heads`` follows it). ``settings`` / ``fields``: the training settings as for
    :func:`attnsvm.gd.train.train_batch` (param, optimizer, lr, iterations, checkpoints,
    dtype). Each step moves the stacked parameter by ``lr G / (||G||_F + eps)`` (normalized; K
    and Q stacks separately) or ``lr G`` (plain). A seed whose loss or step becomes non-finite
    at step k keeps its parameters of step k (``nonfinite_iteration = k``). With H = 1 the
    trajectory is :func:`attnsvm.gd.train.train_batch`'s, bit for bit.
    """
    o = train_settings(settings, **fields)
    param, optimizer, lr, iterations = o.param, o.optimizer, o.lr, o.iterations
    check_choice("optimizer", optimizer, ("normalized", "plain"))
    ks = _check_checkpoints(o.checkpoints, iterations)
    t0 = time.perf_counter()
    dev, tdt = resolve_device(device), TORCH_DTYPES[o.dtype]
    eps = float(torch.finfo(tdt).tiny) if eps is None else float(eps)
    H = init["W" if param == "W" else "K"].shape[1]
    Xt, Yt, Zt, vt = (to_device(a, dev, tdt) for a in (X, Y, Z, v))
    theta = to_device(pack_heads(init, param), dev, tdt)
    obj = MultiObjective(Xt, Yt, Zt, vt, o.replace(heads=H), ridge=ridge)
    S, n, T, d = X.shape
    slot = {k: c for c, k in enumerate(ks)}
    f64 = torch.float64
    bW = torch.zeros((S, len(ks), H, d, d), dtype=f64, device=dev)
    bs = torch.zeros((S, len(ks), H, n, T), dtype=f64, device=dev)
    bl = torch.zeros((S, len(ks)), dtype=f64, device=dev)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    steps = torch.zeros(S, dtype=torch.int64, device=dev)
    seed_dims = (1, 2) if theta.dim() == 3 else (0, 2, 3)
    shape = (S, 1, 1) if theta.dim() == 3 else (1, S, 1, 1)
    with torch.inference_mode():
        for k in range(iterations + 1):
            last = k == iterations
            loss, s, W, G = obj(theta, not last)
            if k in slot:
                bW[:, slot[k]], bs[:, slot[k]], bl[:, slot[k]] = W, s, loss
            probe = loss
            if not last:
                step = _normalized_step(G, lr, eps) if optimizer == "normalized" else lr * G
                new = theta - step
                probe = loss + _zero_if_finite(new, seed_dims)
            alive &= (probe - probe) == 0.0
            if last:
                break
            steps += alive
            theta = torch.where(alive.view(shape), new, theta)
        wnorm = torch.linalg.vector_norm(bW, dim=(-3, -2, -1))
        out = [t.cpu().numpy() for t in (bW, bs, bl, wnorm, alive, steps)]
    bad = np.where(out[4], -1, out[5]).astype(np.int64)
    return MultiTrainResult(np.asarray(ks, np.int64), *out[:4], out[4].astype(bool), bad,
                            describe_device(dev), time.perf_counter() - t0)  # fmt: skip
