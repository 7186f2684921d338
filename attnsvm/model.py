"""Cross-attention model, heads and logistic loss (SCIENCE.md sections 2-3), batched over seeds.

Every tensor carries a leading seed axis S: tokens ``X (S, n, T, d)``, labels ``Y (S, n)``,
queries ``Z (S, n, d)``, head ``v (S, d)``, value matrix ``V (S, d, d)`` (relu head, else None).
Seeds never interact: every reduction runs within one seed, so the loss of a batch is a vector
``(S,)`` and the gradient of ``loss.sum()`` gives each seed its own gradient.

Numerical form (SCIENCE.md section 3, "Numerical requirement"): the attended token is computed
relative to the current top token ``a = argmax_t logits`` (held fixed, no gradient),

    r = x_a + sum_t s_t (x_t - x_a),   s = exp(log_softmax(logits)),

so that once ``s_a`` rounds to 1 the gradient keeps the top token's term
``-s_a sum_{t != a} s_t u^T (x_t - x_a)`` instead of losing it to cancellation in
``u^T x_a - u^T sum_t s_t x_t``. ``stable=False`` gives the textbook ``r = sum_t s_t x_t``
(reference token 0), for comparisons only.

Two gradient paths give the same numbers: autograd through :func:`loss_fn`, and the
hand-derived :func:`loss_and_grad` (fewer kernels, used by training).
"""

from __future__ import annotations

import torch
from torch import Tensor

HEADS = ("linear", "relu", "lambda")
PARAMS = ("W", "KQ")
RIDGE = 2.220446049250313e-16
"""Ridge eps_r = float64 machine epsilon on ``||K||_F^2 + ||Q||_F^2`` for KQ (SCIENCE.md §3)."""


def combined_matrix(params: dict[str, Tensor], param: str) -> Tensor:
    """``W`` itself, or ``W = K Q^T`` (SCIENCE.md section 2), shape (S, d, d)."""
    if param == "W":
        return params["W"]
    if param == "KQ":
        return params["K"] @ params["Q"].transpose(-1, -2)
    raise ValueError(f"param must be one of {', '.join(PARAMS)}, got {param!r}")


def attention_logits(X: Tensor, W: Tensor, Z: Tensor) -> Tensor:
    """Logits ``X_i W z_i`` of ``s_i = S(X_i W z_i)`` (SCIENCE.md section 2), shape (S, n, T)."""
    Wz = Z @ W.transpose(-1, -2)  # (S, n, d): row i is (W z_i)^T
    return (X @ Wz.unsqueeze(-1)).squeeze(-1)


def _masked(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Logits with tokens outside the attention set (``mask`` False) at -inf (causal attention).

    ``mask`` (S, n, T) bool, or None (every token attends; the logits are returned as they are).
    A masked token gets softmax 0 and no gradient; every row needs at least one True.
    """
    if mask is None:
        return logits
    return logits.masked_fill(~mask, float("-inf"))


def _reference_token(X: Tensor, logits: Tensor, stable: bool) -> Tensor:
    """``x_a`` with ``a = argmax_t logits`` (detached), or zeros for the textbook form."""
    if not stable:
        return torch.zeros_like(X[..., 0, :])
    a = logits.detach().argmax(dim=-1)  # (S, n)
    idx = a[..., None, None].expand(*a.shape, 1, X.shape[-1])
    return torch.gather(X, -2, idx).squeeze(-2)  # (S, n, d)


def attended_token(X: Tensor, logits: Tensor, *, stable: bool = True) -> tuple[Tensor, Tensor]:
    """Attended token ``r_i = X_i^T s_i`` in the stable form of SCIENCE.md section 3.

    ``r = x_a + sum_t s_t (x_t - x_a)`` with ``a = argmax_t logits`` held fixed and
    ``s = exp(log_softmax(logits))``. Returns ``(r (S, n, d), s (S, n, T))``.
    ``stable=False``: the textbook ``r = sum_t s_t x_t``.
    """
    xa = _reference_token(X, logits, stable)
    s = torch.log_softmax(logits, dim=-1).exp()
    D = X - xa.unsqueeze(-2)  # (S, n, T, d); row a is exactly 0
    r = xa + (s.unsqueeze(-2) @ D).squeeze(-2)
    return r, s


def head_output(r: Tensor, head: str, v: Tensor, V: Tensor | None, lam: float) -> Tensor:
    """Head ``h(r)`` of SCIENCE.md section 2, shape (S, n).

    linear: ``v^T r``; relu: ``1^T ReLU(V^T r)``; lambda: ``v^T r - lam ||r||^2``.
    """
    if head == "linear":
        return (r @ v.unsqueeze(-1)).squeeze(-1)
    if head == "lambda":
        return (r @ v.unsqueeze(-1)).squeeze(-1) - lam * (r * r).sum(-1)
    if head == "relu":
        if V is None:
            raise ValueError("head 'relu' needs the value matrix V, got None")
        return torch.relu(r @ V).sum(-1)  # (V^T r_i)^T = r_i^T V
    raise ValueError(f"head must be one of {', '.join(HEADS)}, got {head!r}")


def _softplus(x: Tensor) -> Tensor:
    """``log(1 + exp(x))`` without overflow and without torch's threshold approximation."""
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))


def _sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` from ``exp`` and arithmetic only, without overflow.

    torch.sigmoid's vectorized and scalar CPU kernels differ in the last bit, which would make
    a seed's trajectory depend on how many seeds share its batch; exp does not.
    """
    e = torch.exp(-x.abs())
    return torch.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logistic_loss(Y: Tensor, f: Tensor) -> Tensor:
    """``L = (1/n) sum_i log(1 + exp(-Y_i f_i))`` (SCIENCE.md section 2), stable, shape (S,)."""
    return _softplus(-Y * f).mean(-1)


def loss_fn(
    params: dict[str, Tensor],
    X: Tensor,
    Y: Tensor,
    Z: Tensor,
    v: Tensor,
    V: Tensor | None,
    *,
    param: str,
    head: str,
    lam: float,
    ridge: float = RIDGE,
    stable: bool = True,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-seed training loss (S,) and softmax (S, n, T) (SCIENCE.md sections 2-3).

    ``W = params["W"]`` or ``params["K"] @ params["Q"]^T``; for KQ the loss gets the ridge
    ``ridge * (||K||_F^2 + ||Q||_F^2)``. Differentiable with autograd.
    """
    W = combined_matrix(params, param)
    logits = _masked(attention_logits(X, W, Z), mask)
    r, s = attended_token(X, logits, stable=stable)
    loss = logistic_loss(Y, head_output(r, head, v, V, lam))
    if param == "KQ":
        K, Q = params["K"], params["Q"]
        loss = loss + ridge * ((K * K).sum((-2, -1)) + (Q * Q).sum((-2, -1)))
    return loss, s


def loss_and_grad(
    params: dict[str, Tensor],
    X: Tensor,
    Y: Tensor,
    Z: Tensor,
    v: Tensor,
    V: Tensor | None,
    *,
    param: str,
    head: str,
    lam: float,
    ridge: float = RIDGE,
    stable: bool = True,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Loss (S,), softmax (S, n, T) and hand-derived gradients of :func:`loss_fn`.

    With ``g_i = dL/df_i = -Y_i sigmoid(-Y_i f_i) / n``, ``u_i = g_i grad h(r_i)`` and
    ``q_it = u_i^T (x_it - x_ia)`` (0 for t = a), the logit gradient is
    ``dL/dl_it = s_it (q_it - sum_tau s_itau q_itau)`` (no cancellation when ``s_ia`` rounds
    to 1, SCIENCE.md section 3) and ``G_W = sum_i X_i^T (dL/dl_i) z_i^T``; for KQ,
    ``G_K = G_W Q + 2 ridge K`` and ``G_Q = G_W^T K + 2 ridge Q``.
    """
    W = combined_matrix(params, param)
    logits = _masked(attention_logits(X, W, Z), mask)
    xa = _reference_token(X, logits, stable)
    s = torch.log_softmax(logits, dim=-1).exp()
    D = X - xa.unsqueeze(-2)
    r = xa + (s.unsqueeze(-2) @ D).squeeze(-2)  # (S, n, d)
    if head == "linear":
        f = (r @ v.unsqueeze(-1)).squeeze(-1)
        dh = v.unsqueeze(-2)  # (S, 1, d), broadcast over n
    elif head == "lambda":
        f = (r @ v.unsqueeze(-1)).squeeze(-1) - lam * (r * r).sum(-1)
        dh = v.unsqueeze(-2) - (2.0 * lam) * r
    elif head == "relu":
        if V is None:
            raise ValueError("head 'relu' needs the value matrix V, got None")
        pre = r @ V  # (S, n, d): (V^T r_i)^T
        f = torch.relu(pre).sum(-1)
        dh = (pre > 0).to(r.dtype) @ V.transpose(-1, -2)  # V 1[V^T r > 0]
    else:
        raise ValueError(f"head must be one of {', '.join(HEADS)}, got {head!r}")
    m = -Y * f
    loss = _softplus(m).mean(-1)
    g = (-Y * _sigmoid(m)) / Y.shape[-1]  # (S, n)
    u = g.unsqueeze(-1) * dh  # (S, n, d)
    q = (D @ u.unsqueeze(-1)).squeeze(-1)  # (S, n, T)
    sq = (s * q).sum(-1, keepdim=True)
    dl = s * (q - sq)  # (S, n, T)
    P = (dl.unsqueeze(-2) @ X).squeeze(-2)  # (S, n, d): X_i^T dl_i
    GW = P.transpose(-1, -2) @ Z  # (S, d, d)
    if param == "W":
        return loss, s, {"W": GW}
    K, Q = params["K"], params["Q"]
    loss = loss + ridge * ((K * K).sum((-2, -1)) + (Q * Q).sum((-2, -1)))
    gK = GW @ Q + (2.0 * ridge) * K
    gQ = GW.transpose(-1, -2) @ K + (2.0 * ridge) * Q
    return loss, s, {"K": gK, "Q": gQ}
