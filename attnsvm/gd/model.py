"""Cross-attention model, heads and logistic loss (docs/science.md §2-3), batched over seeds.

The attention model and the ERM objective of the paper (arXiv 2308.16898), with W trained
directly or as ``W = K Q^T``.

Every tensor carries a leading seed axis S: tokens ``X (S, n, T, d)``, labels ``Y (S, n)``,
queries ``Z (S, n, d)``, head ``v (S, d)``, value matrix ``V (S, d, d)`` (relu head, else None).
Seeds never interact: every reduction runs within one seed, so the loss of a batch is a vector
``(S,)`` and the gradient of ``loss.sum()`` gives each seed its own gradient.

Numerical form (docs/science.md §3, "Numerical requirement"): the attended token is computed
relative to the current top token ``a = argmax_t logits`` (held fixed, no gradient),

    r = x_a + sum_t s_t (x_t - x_a),   s = exp(log_softmax(logits)),

so that once ``s_a`` rounds to 1 the gradient keeps the top token's term
``-s_a sum_{t != a} s_t u^T (x_t - x_a)`` instead of losing it to cancellation in
``u^T x_a - u^T sum_t s_t x_t``. ``stable=False`` gives the textbook ``r = sum_t s_t x_t``
(reference token 0), for comparisons only.

Two gradient paths give the same numbers: autograd through :func:`loss_fn`, and the
hand-derived :func:`loss_and_grad` (fewer kernels, used by training). Both compute the
attention and the loss with the one kernel of :mod:`attnsvm.gd.kernel`.

The training settings (``param``, ``head``, ``lam``, and whatever a new field adds) come whole,
as the cell's ``train`` settings (:meth:`attnsvm.config.cell.Cell.settings`); library callers
may give the fields as keywords instead (``param="W", head="linear"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from attnsvm.config.fields import CHOICES, DEFAULTS
from attnsvm.config.settings import Settings
from attnsvm.gd.kernel import Attention, attended_token, logistic, reference_token

RIDGE: float = DEFAULTS["ridge"]
"""The default ridge eps_r = float64 machine epsilon on ``||K||_F^2 + ||Q||_F^2`` for KQ
(docs/science.md §3; the official code's "smallest representable number" lambda); a cell's
is its field ``ridge`` (the training settings), which a ``ridge`` keyword overrides."""


def check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    """Raise ValueError naming ``name``, ``value`` and the allowed values if not allowed."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def param_names(param: str) -> tuple[str, ...]:
    """Names of the trained matrices of a parameterization: ``("W",)`` or ``("K", "Q")``."""
    check_choice("param", param, CHOICES["param"])
    return ("W",) if param == "W" else ("K", "Q")


def combined_matrix(params: dict[str, Tensor], param: str) -> Tensor:
    """``W`` itself, or ``W = K Q^T`` (docs/science.md §2), shape (S, d, d)."""
    check_choice("param", param, CHOICES["param"])
    if param == "W":
        return params["W"]
    return params["K"] @ params["Q"].transpose(-1, -2)


def head_output(r: Tensor, head: str, v: Tensor, V: Tensor | None, lam: float) -> Tensor:
    """Head ``h(r)`` of docs/science.md §2, shape (S, n).

    linear: ``v^T r``; relu: ``1^T ReLU(V^T r)``; lambda: ``v^T r - lam ||r||^2``.
    """
    check_choice("head", head, CHOICES["head"])
    if head == "relu":
        if V is None:
            raise ValueError("head 'relu' needs the value matrix V, got None")
        return torch.relu(r @ V).sum(-1)  # (V^T r_i)^T = r_i^T V
    f = (r @ v.unsqueeze(-1)).squeeze(-1)
    return f if head == "linear" else f - lam * (r * r).sum(-1)


def train_settings(settings: Any = None, **fields: Any) -> Settings:
    """The ``train`` settings of a call: ``settings`` (a cell's, or None for the defaults) with
    the keyword ``fields`` of a library call on top (an unknown name is a TypeError)."""
    return Settings.of("train", settings, **fields)


def attention_logits(X: Tensor, W: Tensor, Z: Tensor) -> Tensor:
    """Logits ``X_i W z_i`` of ``s_i = S(X_i W z_i)`` (docs/science.md §2), shape (S, n, T)."""
    return Attention(X, Z).logits(W)


def logistic_loss(Y: Tensor, f: Tensor) -> Tensor:
    """``L = (1/n) sum_i log(1 + exp(-Y_i f_i))`` (docs/science.md §2), stable, shape (S,)."""
    return logistic((-Y * f).unsqueeze(-1), f.shape[-1], grad=False, inplace=False)[0]


def loss_fn(
    params: dict[str, Tensor],
    X: Tensor,
    Y: Tensor,
    Z: Tensor,
    v: Tensor,
    V: Tensor | None,
    settings: Any = None,
    *,
    ridge: float | None = None,
    stable: bool = True,
    mask: Tensor | None = None,
    **fields: Any,
) -> tuple[Tensor, Tensor]:
    """Per-seed training loss (S,) and softmax (S, n, T) (docs/science.md §2-3).

    ``W = params["W"]`` or ``params["K"] @ params["Q"]^T``; for KQ the loss gets the ridge
    ``ridge * (||K||_F^2 + ||Q||_F^2)`` (None: the settings' ``ridge``). Differentiable with
    autograd. ``settings`` / ``fields``: the training settings (:func:`train_settings`:
    ``param``, ``head``, ``lam``, ``ridge``);
    ``stable``: the attended token of §3; ``mask`` (S, n, T) bool: the attended tokens.
    """
    o = train_settings(settings, **fields)
    W = combined_matrix(params, o.param)
    r, s = attended_token(X, Attention(X, Z, o, mask).logits(W), stable=stable)
    loss = logistic_loss(Y, head_output(r, o.head, v, V, o.lam))
    if o.param == "KQ":
        K, Q = params["K"], params["Q"]
        r = o.ridge if ridge is None else ridge
        loss = loss + r * ((K * K).sum((-2, -1)) + (Q * Q).sum((-2, -1)))
    return loss, s


def pack(params: dict[str, Tensor], param: str) -> Tensor:
    """The trained parameters as one tensor: ``W`` (S, d, d), or K and Q stacked (2, S, d, m).

    Stacking K and Q lets one elementwise op or per-seed reduction over the last two axes
    (e.g. the separate normalizations of K and Q, docs/science.md §3) serve both.
    """
    check_choice("param", param, CHOICES["param"])
    if param == "W":
        return params["W"]
    return torch.stack((params["K"], params["Q"]))


def unpack(theta: Tensor, param: str) -> dict[str, Tensor]:
    """Inverse of :func:`pack` (views into ``theta``)."""
    return {"W": theta} if param == "W" else {"K": theta[0], "Q": theta[1]}


class Objective:
    """Training loss of docs/science.md §2-3 and its hand-derived gradient for one batch.

    Everything that does not change between GD steps is prepared once (reshaped and transposed
    tokens, ``-Y``, the negated mask, and for the linear head the token scores
    ``c_it = v^T x_it``), so a step is a short sequence of kernels: at the small shapes of the
    experiments a step costs per-kernel overhead rather than arithmetic.

    ``theta`` is :func:`pack`'s tensor: ``W`` (S, d, d) or K and Q stacked (2, S, d, m). Calling
    the object returns ``(loss (S,), s (S, n, T), W (S, d, d), G)`` with G the gradient of
    ``loss.sum()`` shaped like ``theta`` (None for ``grad=False``). See :func:`loss_and_grad` for
    the formulas.

    Linear head: with ``e_it = c_it - c_ia`` (``e_ia = 0``) the stable form of section 3 reads
    ``f_i = c_ia + sum_t s_it e_it`` and ``dL/dl_it = g_i s_it (e_it - sum_tau s_itau e_itau)``,
    so the (S, n, T, d) differences ``x_it - x_ia`` are never formed. Other heads form them.
    """

    def __init__(
        self,
        X: Tensor,
        Y: Tensor,
        Z: Tensor,
        v: Tensor,
        V: Tensor | None,
        settings: Any = None,
        *,
        ridge: float | None = None,
        stable: bool = True,
        mask: Tensor | None = None,
        **fields: Any,
    ) -> None:
        o = train_settings(settings, **fields)
        param, head = o.param, o.head
        check_choice("param", param, CHOICES["param"])
        check_choice("head", head, CHOICES["head"])
        if head == "relu" and V is None:
            raise ValueError("head 'relu' needs the value matrix V, got None")
        S, n, T, d = X.shape
        self.shape = (S, n, T, d)
        self.settings = o
        self.param, self.head, self.lam = param, head, float(o.lam)
        self.ridge, self.stable = float(o.ridge if ridge is None else ridge), stable
        self.attention = Attention(X, Z, o, mask)
        self.X, self.Z, self.v, self.V = X, Z, v, V
        self.X_cols = X.transpose(-1, -2).reshape(S * n, d, T)  # (S n, d, T): X_i^T dl_i
        self.negY = (-Y).unsqueeze(-1)  # (S, n, 1)
        self.negY_n = self.negY / n  # dL/df_i = -Y_i sigmoid(-Y_i f_i) / n
        self.c = None
        if head == "linear":  # token scores c_it = v^T x_it, (S, n, T)
            # elementwise and a last-axis sum, not a matmul: with S = 1 matmul would take a
            # different BLAS path and the bits would depend on the batch
            self.c = (X * v[:, None, None, :]).sum(-1)

    def combined(self, theta: Tensor) -> Tensor:
        """``W``, or ``W = K Q^T`` (docs/science.md §2), shape (S, d, d)."""
        return theta if self.param == "W" else torch.bmm(theta[0], theta[1].transpose(-1, -2))

    def __call__(
        self, theta: Tensor, grad: bool = True
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        # Every intermediate is a fresh tensor of this call, so most ops run in place (the
        # kernel's in-place forms): the same bits as the out-of-place forms, fewer allocations.
        # The returned loss, s, W and G are never written again.
        S, n, T, d = self.shape
        W = self.combined(theta)
        a, ls = self.attention.log_softmax(W)
        s = ls.exp_()
        if self.c is not None:  # linear head, scores relative to the top token
            if self.stable:
                ca = self.c.gather(-1, a)
                e = self.c - ca
                sse = (s * e).sum(-1, keepdim=True)
                f = ca.add_(sse)  # (S, n, 1)
                m = torch.mul(self.negY, f, out=f)  # -Y_i f_i
            else:
                e = self.c
                sse = (s * e).sum(-1, keepdim=True)
                m = self.negY * sse
        else:
            xa = reference_token(self.X, a, self.stable)
            D = self.X - xa.unsqueeze(-2)  # (S, n, T, d); row a is exactly 0
            sD = torch.bmm(s.view(S * n, 1, T), D.view(S * n, T, d)).view(S, n, d)
            r = torch.add(xa, sD, out=sD)  # (S, n, d)
            f, dh = _head_and_gradient(r, self.head, self.v, self.V, self.lam)
            m = self.negY * f.unsqueeze(-1)  # (S, n, 1)
        loss, sig = logistic(m, n, grad)
        if self.param == "KQ":
            sq = (theta * theta).sum((-2, -1))  # (2, S): ||K||_F^2, ||Q||_F^2
            loss += self.ridge * (sq[0] + sq[1])
        if not grad:
            return loss, s, W, None
        g = torch.mul(self.negY_n, sig, out=sig)  # dL/df_i, (S, n, 1)
        if self.c is not None:
            dl = (e.sub_(sse) if self.stable else e - sse).mul_(s * g)
        else:
            u = g * dh  # (S, n, d)
            q = torch.bmm(D.view(S * n, T, d), u.view(S * n, d, 1)).view(S, n, T)
            q.sub_((s * q).sum(-1, keepdim=True))
            dl = torch.mul(s, q, out=q)
        P = torch.bmm(self.X_cols, dl.view(S * n, T, 1)).view(S, n, d)  # X_i^T dl_i
        GW = torch.bmm(P.transpose(-1, -2), self.Z)  # (S, d, d)
        if self.param == "W":
            return loss, s, W, GW
        G = torch.empty_like(theta)
        torch.bmm(GW, theta[1], out=G[0])  # G_K = G_W Q + 2 ridge K
        torch.bmm(GW.transpose(-1, -2), theta[0], out=G[1])  # G_Q = G_W^T K + 2 ridge Q
        G += (2.0 * self.ridge) * theta
        return loss, s, W, G


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


def loss_and_grad(
    params: dict[str, Tensor], *data: Tensor | None, **options: Any
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Loss (S,), softmax (S, n, T) and hand-derived gradients of :func:`loss_fn`.

    With ``g_i = dL/df_i = -Y_i sigmoid(-Y_i f_i) / n``, ``u_i = g_i grad h(r_i)`` and
    ``q_it = u_i^T (x_it - x_ia)`` (0 for t = a), the logit gradient is
    ``dL/dl_it = s_it (q_it - sum_tau s_itau q_itau)`` (no cancellation when ``s_ia`` rounds
    to 1, docs/science.md §3) and ``G_W = sum_i X_i^T (dL/dl_i) z_i^T``; for KQ,
    ``G_K = G_W Q + 2 ridge K`` and ``G_Q = G_W^T K + 2 ridge Q``. One-shot form of
    :class:`Objective` (training builds the Objective once and calls it every step).
    """
    objective = Objective(*data, **options)  # type: ignore[arg-type]
    loss, s, _, G = objective(pack(params, objective.param))
    return loss, s, unpack(G, objective.param)


__all__ = [
    "RIDGE",
    "Objective",
    "attended_token",
    "attention_logits",
    "check_choice",
    "combined_matrix",
    "head_output",
    "logistic_loss",
    "loss_and_grad",
    "loss_fn",
    "pack",
    "param_names",
    "train_settings",
    "unpack",
]
