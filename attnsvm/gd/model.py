"""The attention models, one object per variant, each owning its forward, loss and gradient
(docs/science.md §2-3, §8, §11-12).

A model holds one batch of S independent seeds (:class:`Batch`: every tensor has a leading
seed axis; seeds never interact, every reduction stays within a seed) and the cell's training
settings (:meth:`attnsvm.config.cell.Cell.settings`, taken whole). All of them compute their
attention with the one kernel of :mod:`attnsvm.gd.kernel`:

- :class:`SingleHead`: ``f(X_i) = h(X_i^T S(X_i W z_i))`` with the linear, relu or lambda head,
  W trained directly or as ``W = K Q^T`` with the ridge of §3 (§2-3);
- :class:`TrainedHead`: the linear head v trained with W (§11);
- :class:`MultiHead`: H heads averaged through the linear head (§12);
- :class:`NextToken`: next-token prediction, the cross-entropy over the vocabulary (§8).

What every model offers, and who uses it:

- ``model(params, grad)``: ``(loss (S,), s, W, G)`` with the hand-derived gradient ``G`` (one
  tensor per block of ``params``): the descent loop (:mod:`attnsvm.gd.train`);
- ``model.loss(params)``: the same loss out of place, differentiable by autograd (the
  reference the tests hold the hand gradient to, ``gradient="autograd"``, and the
  regularization path's recorded loss);
- ``model.outputs(W)``, ``model.hard_outputs(W)``: the outputs at given matrices, and at
  infinite norm along them: every evaluation of a trained W (test metrics, §15);
- ``FUSED_FIELDS``: the train fields the fused loop (``fused.c``, ``fused_cuda.cu``) computes
  this model with; a model that declares none never takes it, and a cell with another train
  field away from its default takes the torch loop (:func:`attnsvm.gd.fused.applies`).

``params`` is a list of blocks: ``[theta]``, where ``theta`` is ``W`` (S, d, d) or K and Q
stacked (2, S, d, m) (:func:`pack`), and for the trained head ``[theta, v (S, d, 1)]``. Every
block is moved by its own step rule (:mod:`attnsvm.gd.optimizers`).

Numerical form (docs/science.md §3, "Numerical requirement"): the attended token is computed
relative to the current top token ``a = argmax_t logits`` (held fixed, no gradient),
``r = x_a + sum_t s_t (x_t - x_a)``, so that once ``s_a`` rounds to 1 the gradient keeps the
top token's term; ``stable=False`` gives the textbook ``r = sum_t s_t x_t`` (comparisons only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.fields import CHOICES, DEFAULTS
from attnsvm.config.settings import Settings
from attnsvm.gd.device import to_device
from attnsvm.gd.kernel import (
    Attention,
    attended_token,
    log_softmax_top,
    logistic,
    next_token_loss,
    reference_token,
    sigmoid,
)

RIDGE: float = DEFAULTS["ridge"]
"""The default ridge eps_r = float64 machine epsilon on ``||K||_F^2 + ||Q||_F^2`` for KQ
(docs/science.md §3); a cell's is its field ``ridge``, which a ``ridge`` keyword overrides."""

Params = list[Tensor]


def check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    """Raise ValueError naming ``name``, ``value`` and the allowed values if not allowed."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def param_names(param: str) -> tuple[str, ...]:
    """Names of the trained matrices of a parameterization: ``("W",)`` or ``("K", "Q")``."""
    check_choice("param", param, CHOICES["param"])
    return ("W",) if param == "W" else ("K", "Q")


def pack(params: dict[str, Tensor], param: str) -> Tensor:
    """The trained matrices as one tensor: ``W`` (S, d, d), or K and Q stacked (2, S, d, m),
    so that one op or per-matrix reduction (the separate normalizations of K and Q) serves
    both."""
    check_choice("param", param, CHOICES["param"])
    return params["W"] if param == "W" else torch.stack((params["K"], params["Q"]))


def unpack(theta: Tensor, param: str) -> dict[str, Tensor]:
    """Inverse of :func:`pack` (views into ``theta``)."""
    return {"W": theta} if param == "W" else {"K": theta[0], "Q": theta[1]}


def train_settings(settings: Any = None, **fields: Any) -> Settings:
    """The ``train`` settings of a call: ``settings`` (a cell's, or None for the defaults) with
    the keyword ``fields`` of a library call on top (an unknown name is a TypeError)."""
    return Settings.of("train", settings, **fields)


def head_output(r: Tensor, head: str, v: Tensor, V: Tensor | None, lam: float) -> Tensor:
    """Head ``h(r)`` of docs/science.md §2, shape (S, n): linear ``v^T r``, relu
    ``1^T ReLU(V^T r)``, lambda ``v^T r - lam ||r||^2``."""
    check_choice("head", head, CHOICES["head"])
    if head == "relu" and V is None:
        raise ValueError("head 'relu' needs the value matrix V, got None")
    return _head_and_gradient(r, head, v, V, lam)[0]


def logistic_loss(Y: Tensor, f: Tensor) -> Tensor:
    """``L = (1/n) sum_i log(1 + exp(-Y_i f_i))`` (docs/science.md §2), stable, shape (S,)."""
    return logistic((-Y * f).unsqueeze(-1), f.shape[-1], grad=False, inplace=False)[0]


@dataclass(frozen=True)
class Batch:
    """The data of S seeds on one device: tokens ``X`` (S, n, T, d), labels ``Y`` (S, n),
    queries ``Z`` (S, n, d), head ``v`` (S, d), value matrix ``V`` (S, d, d) of the relu head,
    ``mask`` (S, n, T) bool (the attended tokens of causal attention; None: all) and
    ``label`` (S, n, T) bool (next-token prediction: the positions holding the label)."""

    X: Tensor
    Y: Tensor | None = None
    Z: Tensor | None = None
    v: Tensor | None = None
    V: Tensor | None = None
    mask: Tensor | None = None
    label: Tensor | None = None

    @classmethod
    def of(cls, device: torch.device, dtype: torch.dtype, **arrays: Any) -> Batch:
        """Host arrays as a batch on ``device`` (floats in ``dtype`` through float64)."""
        out = {}
        for k, a in arrays.items():
            if a is None or isinstance(a, Tensor):
                out[k] = a
            elif k in ("mask", "label"):
                out[k] = torch.as_tensor(np.asarray(a, dtype=bool)).to(device=device)
            else:
                out[k] = to_device(a, device, dtype)
        return cls(**out)

    def select(self, sel: Tensor) -> Batch:
        """The seeds ``sel`` of the batch."""
        return Batch(**{f.name: _take(getattr(self, f.name), sel) for f in fields(self)})

    def repeat(self, count: int) -> Batch:
        """One seed's data ``count`` times, to evaluate ``count`` matrices at once."""
        grown = {f.name: getattr(self, f.name) for f in fields(self)}
        return Batch(**{k: None if t is None else t.expand(count, *t.shape[1:])
                        for k, t in grown.items()})  # fmt: skip


def _take(t: Tensor | None, sel: Tensor) -> Tensor | None:
    return None if t is None else t[sel]


class Model:
    """What the models share (module docstring): the batch, the settings, the kernel.

    ``settings``: the cell's training settings (param, head, lam, ridge, ...; keyword
    ``fields`` of a library call on top); ``ridge``: overrides the settings' ridge (None:
    theirs); ``stable``: the attended token of §3.
    """

    #: the train fields the fused loop computes this model with (none: never fused)
    FUSED_FIELDS: ClassVar[frozenset[str]] = frozenset()
    #: the step rule a name of ``optimizer`` means for this model (attnsvm.gd.optimizers)
    STEP_RULES: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        batch: Batch,
        settings: Any = None,
        *,
        ridge: float | None = None,
        stable: bool = True,
        **fields: Any,
    ) -> None:
        o = train_settings(settings, **fields)
        check_choice("param", o.param, CHOICES["param"])
        self.batch, self.settings, self.param = batch, o, o.param
        self.ridge = float(o.ridge if ridge is None else ridge)
        self.stable = stable
        self.seeds = batch.X.shape[0]
        self.shape = tuple(batch.X.shape)  # (S, n, T, d)
        if batch.Y is not None:  # dL/df_i = -Y_i sigmoid(-Y_i f_i) / n
            self.negY = (-batch.Y).unsqueeze(-1)  # (S, n, 1)
            self.negY_n = self.negY / self.shape[1]
        self._options = {"ridge": ridge, "stable": stable}

    def select(self, sel: Tensor) -> Model:
        """The same model on the seeds ``sel`` (seeds never interact)."""
        return type(self)(self.batch.select(sel), self.settings, **self._options)

    def combined(self, theta: Tensor) -> Tensor:
        """``W``, or ``W = K Q^T`` (docs/science.md §2), shape (S, d, d)."""
        return theta if self.param == "W" else torch.bmm(theta[0], theta[1].transpose(-1, -2))

    def params(self, init: dict[str, Tensor]) -> Params:
        """The trained blocks from the initial matrices (``{"W"}`` or ``{"K", "Q"}``)."""
        names = param_names(self.param)
        if set(init) != set(names):
            raise ValueError(f"init for param {self.param!r} needs keys {names}, got "
                             f"{sorted(init)}")  # fmt: skip
        return [pack(init, self.param)]

    def extras(self, params: Params) -> dict[str, Tensor]:
        """What a checkpoint records besides W, softmax and loss (the trained head's v)."""
        return {}

    def _ridge_term(self, theta: Tensor) -> Tensor | float:
        if self.param != "KQ":
            return 0.0
        K, Q = theta[0], theta[1]
        return self.ridge * ((K * K).sum((-2, -1)) + (Q * Q).sum((-2, -1)))

    def _kq_gradient(self, theta: Tensor, GW: Tensor) -> Tensor:
        """``G_K = G_W Q + 2 ridge K``, ``G_Q = G_W^T K + 2 ridge Q`` (docs/science.md §3)."""
        G = torch.empty_like(theta)
        torch.bmm(GW, theta[1], out=G[0])
        torch.bmm(GW.transpose(-1, -2), theta[0], out=G[1])
        G += (2.0 * self.ridge) * theta
        return G


class SingleHead(Model):
    """One attention head with a fixed head (docs/science.md §2-3).

    Everything that does not change between steps is prepared once (the kernel's reshaped
    tokens, ``-Y``, for the linear head the token scores ``c_it = v^T x_it``), so a step is a
    short sequence of kernels: at the experiments' shapes a step costs per-kernel overhead
    rather than arithmetic.

    Linear head: with ``e_it = c_it - c_ia`` (``e_ia = 0``) the stable form reads
    ``f_i = c_ia + sum_t s_it e_it`` and ``dL/dl_it = g_i s_it (e_it - sum_tau s_itau
    e_itau)``, so the (S, n, T, d) differences ``x_it - x_ia`` are never formed. Other heads:
    with ``u_i = g_i grad h(r_i)`` and ``q_it = u_i^T (x_it - x_ia)``, ``dL/dl_it = s_it (q_it
    - sum_tau s_itau q_itau)``. Then ``G_W = sum_i X_i^T (dL/dl_i) z_i^T`` and for KQ
    :meth:`Model._kq_gradient`.
    """

    FUSED_FIELDS = frozenset({
        "head", "lam", "param", "m", "attention", "init", "optimizer", "lr", "iterations",
        "checkpoint_spacing", "checkpoint_count", "dtype", "train", "seed", "ridge", "adam_beta1",
        "adam_beta2", "init_scale",
    })  # fmt: skip
    """The train fields that fused.c and fused_cuda.cu compute with, check before they apply
    (:func:`attnsvm.gd.fused.applies`) or that act before training (data, initialization):
    a field added later reaches the fused loop only when its name is added here and the loop
    computes with it (docs/extending.md, "The fused loop")."""

    #: (S, n, 1) weights of ``dL/df_i`` for the next gradient (a mini-batch's, set by
    #: :class:`attnsvm.gd.minibatch.MiniBatch`); None: every example counts once
    example_weights: Tensor | None = None

    def __init__(self, batch: Batch, settings: Any = None, **options: Any) -> None:
        super().__init__(batch, settings, **options)
        o = self.settings
        self.head, self.lam = o.head, float(o.lam)
        check_choice("head", self.head, CHOICES["head"])
        if self.head == "relu" and batch.V is None:
            raise ValueError("head 'relu' needs the value matrix V, got None")
        X, Z = batch.X, batch.Z
        S, n, T, d = X.shape
        self.attention = Attention(X, Z, o, batch.mask)
        self.X_cols = X.transpose(-1, -2).reshape(S * n, d, T)  # (S n, d, T): X_i^T dl_i
        self.c = None
        if self.head == "linear":
            self.c = self._scores(batch.v)

    def _scores(self, v: Tensor) -> Tensor:
        # elementwise and a last-axis sum, not a matmul: with S = 1 matmul would take a
        # different BLAS path and the bits would depend on the batch
        return (self.batch.X * v[:, None, None, :]).sum(-1)

    def _forward(self, W: Tensor, v: Tensor) -> tuple:
        """``(m = -Y f (S, n, 1), s, and what the gradient reuses)`` at the matrices W."""
        S, n, T, d = self.shape
        a, ls = self.attention.log_softmax(W)
        s = ls.exp_()
        if self.c is not None:  # linear head, scores relative to the top token
            if self.stable:
                ca = self.c.gather(-1, a)
                e = self.c - ca
                sse = (s * e).sum(-1, keepdim=True)
                f = ca.add_(sse)  # (S, n, 1)
                return torch.mul(self.negY, f, out=f), s, (e, sse)
            e = self.c
            sse = (s * e).sum(-1, keepdim=True)
            return self.negY * sse, s, (e, sse)
        X = self.batch.X
        xa = reference_token(X, a, self.stable)
        D = X - xa.unsqueeze(-2)  # (S, n, T, d); row a is exactly 0
        sD = torch.bmm(s.view(S * n, 1, T), D.view(S * n, T, d)).view(S, n, d)
        r = torch.add(xa, sD, out=sD)  # (S, n, d)
        f, dh = _head_and_gradient(r, self.head, v, self.batch.V, self.lam)
        return self.negY * f.unsqueeze(-1), s, (D, dh)

    def __call__(self, params: Params, grad: bool = True) -> tuple:
        # Every intermediate is a fresh tensor of this call, so most ops run in place (the
        # kernel's in-place forms): the same bits as the out-of-place forms, fewer
        # allocations. The returned loss, s, W and G are never written again.
        S, n, T, d = self.shape
        theta = params[0]
        W = self.combined(theta)
        m, s, saved = self._forward(W, self.batch.v)
        loss, sig = logistic(m, n, grad)
        if self.param == "KQ":
            sq = (theta * theta).sum((-2, -1))  # (2, S): ||K||_F^2, ||Q||_F^2
            loss += self.ridge * (sq[0] + sq[1])
        if not grad:
            return loss, s, W, None
        g = torch.mul(self.negY_n, sig, out=sig)  # dL/df_i, (S, n, 1)
        if self.example_weights is not None:  # a mini-batch (attnsvm.gd.minibatch)
            g.mul_(self.example_weights)
        if self.c is not None:
            e, sse = saved
            dl = (e.sub_(sse) if self.stable else e - sse).mul_(s * g)
        else:
            D, dh = saved
            u = g * dh  # (S, n, d)
            q = torch.bmm(D.view(S * n, T, d), u.view(S * n, d, 1)).view(S, n, T)
            q.sub_((s * q).sum(-1, keepdim=True))
            dl = torch.mul(s, q, out=q)
        P = torch.bmm(self.X_cols, dl.view(S * n, T, 1)).view(S, n, d)  # X_i^T dl_i
        GW = torch.bmm(P.transpose(-1, -2), self.batch.Z)  # (S, d, d)
        return loss, s, W, [GW if self.param == "W" else self._kq_gradient(theta, GW)]

    def loss(self, params: Params) -> tuple[Tensor, Tensor]:
        """Loss (S,) and softmax out of place, differentiable by autograd: the attended token
        through :func:`attnsvm.gd.kernel.attended_token` and :func:`head_output`."""
        b, theta = self.batch, params[0]
        W = self.combined(theta)
        r, s = attended_token(b.X, self.attention.logits(W), stable=self.stable)
        v = params[1][..., 0] if len(params) > 1 else b.v
        loss = logistic_loss(b.Y, head_output(r, self.head, v, b.V, self.lam))
        return loss + self._ridge_term(theta), s

    def outputs(self, W: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(f (S, n), s (S, n, T), loss (S,))`` at the matrices ``W`` (S, d, d), the forward
        of training (docs/science.md §2; no ridge): what the test metrics evaluate (§15)."""
        m, s, _ = self._forward(W, self.batch.v)
        loss, _ = logistic(m, self.shape[1], grad=False)
        return torch.mul(self.negY, m).squeeze(-1), s, loss

    def hard_outputs(self, W: Tensor) -> Tensor:
        """The limit of ``f_i(R W)`` as R grows (docs/science.md §15), (S, n): the head at the
        token of the largest logit, ``v^T x_{i, argmax_t x_it^T W z_i}`` (linear head)."""
        top = self.attention.scores(W).argmax(-1, keepdim=True)
        return self.c.gather(-1, top).squeeze(-1)


def _head_and_gradient(
    r: Tensor, head: str, v: Tensor, V: Tensor | None, lam: float
) -> tuple[Tensor, Tensor]:
    """Head output ``h(r)`` (S, n) and its gradient ``grad h(r)`` (S, n or 1, d)."""
    if head == "linear":
        return (r @ v.unsqueeze(-1)).squeeze(-1), v.unsqueeze(-2)
    if head == "lambda":
        f = (r @ v.unsqueeze(-1)).squeeze(-1) - lam * (r * r).sum(-1)
        return f, v.unsqueeze(-2) - (2.0 * lam) * r
    pre = r @ V  # (S, n, d): (V^T r_i)^T
    return torch.relu(pre).sum(-1), (pre > 0).to(r.dtype) @ V.transpose(-1, -2)


class TrainedHead(SingleHead):
    """The linear head v trained with W or (K, Q) (docs/science.md §11): ``params`` is
    ``[theta, v (S, d, 1)]``, each block moved by its own step (per-block normalized GD).

    The loss and the gradient in theta are :class:`SingleHead`'s at the current v (the same
    kernels, so the same bits for the same v); with ``g_i = dL/df_i`` and the attended token
    ``r_i = x_ia + sum_t s_it (x_it - x_ia)``, ``grad_v L = sum_i g_i r_i``.
    """

    FUSED_FIELDS = frozenset()  # the fused loop does not train v

    def __init__(self, batch: Batch, settings: Any = None, **options: Any) -> None:
        super().__init__(batch, settings, **options)
        if self.head != "linear":
            raise ValueError(f"a trained head needs head 'linear', got {self.head!r}")

    def params(self, init: dict[str, Tensor]) -> Params:
        return [*super().params(init), self.batch.v.unsqueeze(-1)]

    def extras(self, params: Params) -> dict[str, Tensor]:
        return {"v": params[1][..., 0]}

    def __call__(self, params: Params, grad: bool = True) -> tuple:
        v = params[1][..., 0]
        self.c = self._scores(v)  # token scores v^T x_it, (S, n, T)
        loss, s, W, G = super().__call__(params, grad)
        if not grad:
            return loss, s, W, None
        X = self.batch.X
        a = s.argmax(-1, keepdim=True)  # the top token (softmax is monotone in the logits)
        xa = reference_token(X, a) if self.stable else 0.0 * X[..., 0, :]
        r = xa + (s.unsqueeze(-2) @ (X - xa.unsqueeze(-2))).squeeze(-2)  # (S, n, d)
        f = (r * v.unsqueeze(-2)).sum(-1)
        Y, n = self.batch.Y, self.shape[1]
        g = -Y * sigmoid(-Y * f) / n  # (S, n)
        return loss, s, W, [*G, (g.unsqueeze(-1) * r).sum(-2).unsqueeze(-1)]


class MultiHead(Model):
    """H attention heads through one fixed linear head (docs/science.md §12; Deora, Ghaderi,
    Taheri, Thrampoulidis, TMLR 2024): ``s_ih = S(X_i W_h z_i)``, ``f(X_i) = v^T (1/H)
    sum_h X_i^T s_ih``, each head's attended token in the stable form relative to its own top
    token.

    ``theta`` is ``(S, H d, d)`` for W (row block h is ``W_h``) and ``(2, S, H d, m)`` for KQ,
    so that a norm over its last two axes is the stacked norm of normalized GD. The logit
    gradient of head h is ``(g_i / H) s_iht (e_iht - sum_tau s_ihtau e_ihtau)``: the single
    head's with ``g_i / H``. With H = 1 the layout, the kernels and their operand order are
    :class:`SingleHead`'s: the same bits.
    """

    def __init__(self, batch: Batch, settings: Any = None, **options: Any) -> None:
        super().__init__(batch, settings, **options)
        X, Z, v = batch.X, batch.Z, batch.v
        S, n, T, d = X.shape
        H = self.H = int(self.settings.heads)
        self.Xh, Zh = _per_head(X, H), _per_head(Z, H)
        self.attention = Attention(self.Xh, Zh, self.settings)  # the heads as S H rows
        Xc = X.transpose(-1, -2).reshape(S, 1, n * d, T).expand(S, H, n * d, T)
        self.X_cols = Xc.reshape(S * H * n, d, T)
        c = (X * v[:, None, None, :]).sum(-1)  # token scores c_it = v^T x_it
        self.c = c.unsqueeze(1).expand(S, H, n, T)

    def params(self, init: dict[str, Tensor]) -> Params:
        """``init``: ``{"W": (S, H, d, d)}`` or ``{"K", "Q": (S, H, d, m)}``."""
        return super().params({k: t.reshape(t.shape[0], -1, t.shape[-1]) for k, t in init.items()})

    def _heads(self, theta: Tensor) -> Tensor:
        """``theta`` with the heads as rows: (S H, d, d), or (2, S H, d, m) for KQ (a view)."""
        S, _, _, d = self.shape
        return theta.view(*theta.shape[:-3], S * self.H, d, theta.shape[-1])

    def combined(self, theta: Tensor) -> Tensor:
        """``W_h`` (or ``K_h Q_h^T``) of every head, shape (S H, d, d)."""
        return super().combined(self._heads(theta))

    def __call__(self, params: Params, grad: bool = True) -> tuple:
        S, n, T, d = self.shape
        H, theta = self.H, params[0]
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
        GW = torch.bmm(P.transpose(-1, -2), self.attention.Z)  # (S H, d, d)
        if self.param == "W":
            return loss, s, Wh, [GW.view(S, H * d, d)]
        return loss, s, Wh, [self._kq_gradient(self._heads(theta), GW).view(theta.shape)]

    def loss(self, params: Params) -> tuple[Tensor, Tensor]:
        """Loss (S,) and per-head softmax (S, H, n, T) out of place, for autograd."""
        S, n, T, d = self.shape
        theta, H = params[0], self.H
        r, s = attended_token(self.Xh, self.attention.logits(self.combined(theta)))
        r = r.view(S, H, n, d).sum(1) / H
        f = (r @ self.batch.v.unsqueeze(-1)).squeeze(-1)
        return logistic_loss(self.batch.Y, f) + self._ridge_term(theta), s.view(S, H, n, T)


def _per_head(t: Tensor, H: int) -> Tensor:
    """Every seed's rows once per head: (S, ...) -> (S H, ...)."""
    S = t.shape[0]
    return t.unsqueeze(1).expand(S, H, *t.shape[1:]).reshape(S * H, *t.shape[1:])


class NextToken(Model):
    """Next-token prediction with self-attention (docs/science.md §8): ``s_i = S(X_i W x_iT)``,
    ``L = (1/n) sum_i -log sum_{t: x_it = y_i} s_it`` (:func:`attnsvm.gd.kernel.next_token_loss`,
    whose gradient does not cancel once the label's probability rounds to 1); the batch's
    ``label`` marks the label positions, ``Z`` holds the queries (last tokens)."""

    #: the normalized step of next-token training is the textbook ``G lr / (||G||_F + eps)``
    #: (attnsvm.gd.optimizers; the single head's scales G first: the same step to rounding)
    STEP_RULES = {"normalized": "normalized-textbook"}

    def __init__(self, batch: Batch, settings: Any = None, **options: Any) -> None:
        super().__init__(batch, settings, **options)
        self.attention = Attention(batch.X, batch.Z, self.settings)

    def __call__(self, params: Params, grad: bool = True) -> tuple:
        theta = params[0]
        W = self.combined(theta)
        X, Z, n = self.batch.X, self.batch.Z, self.batch.X.shape[1]
        _, log_s = self.attention.log_softmax(W)
        loss, p, g = next_token_loss(log_s, self.batch.label)
        if not grad:
            return loss, p, W, None
        GW = ((X * g.unsqueeze(-1)).sum(2).transpose(1, 2) @ Z) / n  # sum_i (X_i^T g_i) z_i^T
        return loss, p, W, [GW if self.param == "W" else self._kq_gradient(theta, GW)]

    def loss(self, params: Params) -> tuple[Tensor, Tensor]:
        """Loss (S,) and softmax out of place, for autograd."""
        theta = params[0]
        _, ls = log_softmax_top(self.attention.logits(self.combined(theta)))
        logP = torch.logsumexp(ls.masked_fill(~self.batch.label, -torch.inf), dim=-1)
        return -logP.mean(-1) + self._ridge_term(theta), ls.exp()


def loss_and_grad(
    params: dict[str, Tensor], X: Tensor, Y: Tensor, Z: Tensor, v: Tensor, V: Tensor | None,
    settings: Any = None, *, mask: Tensor | None = None, **options: Any,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:  # fmt: skip
    """Loss (S,), softmax and the hand-derived gradients by name of one :class:`SingleHead`
    call at ``params`` (``{"W"}`` or ``{"K", "Q"}``), a one-shot form for library callers."""
    model = SingleHead(Batch(X, Y, Z, v, V, mask), settings, **options)
    loss, s, _, (G,) = model([pack(params, model.param)])
    return loss, s, unpack(G, model.param)


def loss_fn(
    params: dict[str, Tensor], X: Tensor, Y: Tensor, Z: Tensor, v: Tensor, V: Tensor | None,
    settings: Any = None, *, mask: Tensor | None = None, **options: Any,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """:meth:`SingleHead.loss` at ``params``: loss (S,) and softmax, differentiable by autograd
    (in ``params`` and the data)."""
    model = SingleHead(Batch(X, Y, Z, v, V, mask), settings, **options)
    return model.loss([pack(params, model.param)])


#: the model of each kind of training (the task's choice; docs/extending.md)
MODELS: dict[str, type[Model]] = {
    "single_head": SingleHead,
    "trained_head": TrainedHead,
    "multi_head": MultiHead,
    "next_token": NextToken,
}


#: checkpoints evaluated at once by :func:`evaluate` (bounds its memory)
EVALUATE_CHUNK = 64


def evaluate(data: Any, W: np.ndarray, settings: Any = None) -> tuple[np.ndarray, ...]:
    """The single-head model of ``settings`` (a cell's training settings, so that every field
    of the model counts) at the matrices ``W`` (C, d, d) on one seed's data (a
    :class:`attnsvm.gd.data.Dataset`): ``(f (C, n), loss (C,), f at infinite norm along each
    W (C, n))`` (docs/science.md §2, §15): every evaluation of a trained W."""
    W = torch.as_tensor(np.asarray(W, dtype=np.float64))
    arrays = {k: getattr(data, k) for k in ("X", "Y", "Z", "v", "V")}
    one = Batch.of(torch.device("cpu"), torch.float64,
                   **{k: None if a is None else a[None] for k, a in arrays.items()})  # fmt: skip
    out: list[list[np.ndarray]] = [[], [], []]
    with torch.inference_mode():
        for W_c in W.split(EVALUATE_CHUNK):
            model = SingleHead(one.repeat(W_c.shape[0]), settings)
            f, _, loss = model.outputs(W_c)
            for part, t in zip(out, (f, loss, model.hard_outputs(W_c)), strict=True):
                part.append(t.numpy())
    return tuple(np.concatenate(p) for p in out)


__all__ = [
    "MODELS",
    "RIDGE",
    "Batch",
    "Model",
    "MultiHead",
    "NextToken",
    "SingleHead",
    "TrainedHead",
    "check_choice",
    "evaluate",
    "head_output",
    "logistic_loss",
    "loss_and_grad",
    "loss_fn",
    "pack",
    "param_names",
    "train_settings",
    "unpack",
]
