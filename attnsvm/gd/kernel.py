"""The one attention kernel every model trains through (docs/science.md §2-3, §8, §11-12).

Single-head and multi-head attention, the trained head, the regularization path and next-token
prediction all compute their attention here, and their losses from its output:

- :class:`Attention`: the logits ``X_i W z_i`` of every (seed, example) of a batch, the
  attention mask (causal attention) and any transform of the logits, in one place
  (:meth:`Attention.logits`), and the log-softmax relative to the top token
  (:meth:`Attention.log_softmax`);
- :func:`logistic`: the logistic loss ``(1/n) sum_i log(1 + exp(m_i))`` of the margins
  ``m_i = -Y_i f_i`` and ``sigmoid(m_i)`` for its gradient (docs/science.md §2);
- :func:`next_token_loss`: the cross-entropy over the vocabulary of next-token prediction and
  its gradient in the logits (§8);
- :func:`attended_token`: ``r_i = X_i^T s_i`` in the stable form of §3, for the generic heads.

The in-place forms (``inplace=True``, used by the training objectives) run the same kernels
with the operands in the same order as the out-of-place forms (used with autograd), so both
give the same bits.

Numerical form (docs/science.md §3, "Numerical requirement"): the softmax is computed relative
to the top token ``a = argmax_t logits`` (held fixed, no gradient), ``log s = z - log(sum_t
exp(z_t))`` with ``z = logits - logits_a``: from elementwise ops and one last-axis sum, several
times faster than torch.log_softmax on the short rows used here, and a row's bits do not depend
on its batch. Ties go to the first maximal token, as with argmax; a NaN or +inf logit makes the
whole row NaN, as torch.log_softmax does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnsvm.config.settings import Settings


class Attention:
    """The attention of one batch of B independent rows (seeds, or seeds x heads).

    ``X`` (B, n, T, d) tokens, ``Z`` (B, n, d) queries, ``mask`` (B, n, T) bool or None (every
    token attends), ``settings``: the cell's training settings
    (:meth:`attnsvm.config.cell.Cell.settings`), for any transform of the logits a field asks
    for. Everything that does not change between steps is prepared once.
    """

    def __init__(
        self, X: Tensor, Z: Tensor, settings: Any = None, mask: Tensor | None = None
    ) -> None:
        B, n, T, d = X.shape
        self.shape = (B, n, T, d)
        self.X = X
        self.X_rows = X.reshape(B * n, T, d)  # (B n, T, d): logits X_i (W z_i)
        self.Z = Z
        self.masked_out = None if mask is None else ~mask
        self.settings = Settings.of("train", settings)

    def scores(self, W: Tensor) -> Tensor:
        """``X_i W z_i`` (docs/science.md §2) for every row, (B, n, T), a fresh tensor: the
        logits' part linear in W, which alone decides the top token of ``R W`` as R grows."""
        B, n, T, d = self.shape
        Wz = torch.bmm(self.Z, W.transpose(-1, -2))  # (B, n, d): row i is (W z_i)^T
        return torch.bmm(self.X_rows, Wz.view(B * n, d, 1)).view(B, n, T)

    def logits(self, W: Tensor) -> Tensor:
        """The attention logits of every row, (B, n, T), a fresh tensor: :meth:`scores` and
        any transform a field asks for, so that every model, in training and in every
        evaluation, sees it (docs/extending.md).

        Tokens outside the attention set (``mask`` False) get -inf: softmax 0 and no gradient
        (every row needs at least one True).
        """
        logits = self.scores(W)
        # transforms of the logits go here, reading self.settings (docs/extending.md)
        if self.masked_out is not None:
            logits.masked_fill_(self.masked_out, float("-inf"))
        return logits

    def log_softmax(self, W: Tensor, inplace: bool = True) -> tuple[Tensor, Tensor]:
        """Top token ``a`` (B, n, 1) and ``log softmax(logits)`` (B, n, T) (module docstring).

        ``inplace``: the log-softmax overwrites the logits' buffer (training objectives);
        False keeps every intermediate, for autograd.
        """
        return log_softmax_top(self.logits(W), inplace)


def log_softmax_top(logits: Tensor, inplace: bool = False) -> tuple[Tensor, Tensor]:
    """Top token ``a = argmax_t logits`` (..., 1) and ``log_softmax(logits)`` relative to it."""
    top, a = logits.detach().max(dim=-1, keepdim=True)
    if inplace:
        z = logits.sub_(top)  # <= 0, exactly 0 at a
        return a, z.sub_(torch.exp(z).sum(-1, keepdim=True).log_())
    z = logits - top
    return a, z - z.exp().sum(-1, keepdim=True).log()


def reference_token(X: Tensor, a: Tensor, stable: bool = True) -> Tensor:
    """``x_a`` for the top token ``a`` (B, n, 1), or zeros for the textbook form, (B, n, d)."""
    if not stable:
        return torch.zeros_like(X[..., 0, :])
    idx = a.unsqueeze(-1).expand(*a.shape, X.shape[-1])  # (B, n, 1, d)
    return torch.gather(X, -2, idx).squeeze(-2)


def attended_token(X: Tensor, logits: Tensor, *, stable: bool = True) -> tuple[Tensor, Tensor]:
    """Attended token ``r_i = X_i^T s_i`` in the stable form of docs/science.md §3.

    ``r = x_a + sum_t s_t (x_t - x_a)`` with ``a = argmax_t logits`` held fixed and
    ``s = exp(log_softmax(logits))``. Returns ``(r (B, n, d), s (B, n, T))``;
    ``stable=False``: the textbook ``r = sum_t s_t x_t``.
    """
    a, ls = log_softmax_top(logits)
    xa = reference_token(X, a, stable)
    s = ls.exp()
    D = X - xa.unsqueeze(-2)  # (B, n, T, d); row a is exactly 0
    r = xa + (s.unsqueeze(-2) @ D).squeeze(-2)
    return r, s


def logistic(m: Tensor, n: int, grad: bool = True, inplace: bool = True) -> tuple[Tensor, Any]:
    """Logistic loss of the margins ``m = -Y f`` (B, n, 1) and ``sigmoid(m)`` (docs/science.md §2).

    Returns ``(L (B,), sigmoid(m) or None)`` with ``L = (1/n) sum_i log(1 + exp(m_i))``,
    evaluated as ``max(m, 0) + log1p(exp(-|m|))`` (no overflow, no threshold approximation), and
    ``sigmoid(m) = exp(min(m, 0)) / (1 + exp(-|m|))`` from ``exp`` and arithmetic only (torch's
    vectorized and scalar sigmoid kernels differ in the last bit, which would make a seed's
    trajectory depend on how many seeds share its batch). ``inplace``: intermediates reuse
    their buffers (training objectives; ``m`` itself is kept); False for autograd.
    """
    lo, hi = torch.clamp_max(m, 0.0), torch.clamp_min(m, 0.0)
    if inplace:
        em = torch.sub(lo, hi).exp_()  # exp(-|m|)
        sp = torch.log1p(em)
        loss = torch.add(hi, sp, out=sp).sum((-2, -1)).div_(n)
        return loss, lo.exp_().div_(em.add_(1.0)) if grad else None
    em = (lo - hi).exp()
    loss = (hi + torch.log1p(em)).sum((-2, -1)) / n
    return loss, lo.exp() / (em + 1.0) if grad else None


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``, the bits of :func:`logistic`'s sigmoid (without overflow)."""
    return logistic(x.unsqueeze(-1), 1, inplace=False)[1].squeeze(-1)


def next_token_loss(log_s: Tensor, label: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Cross-entropy over the vocabulary of next-token prediction (docs/science.md §8).

    ``log_s`` (B, n, T) log-softmax, ``label`` (B, n, T) bool: the positions holding the
    next-token label. With ``P_i = sum_{t: label} s_it``, returns the loss
    ``(1/n) sum_i -log P_i`` (B,), the softmax ``s`` and the gradient of each example's loss in
    the logits, ``s - q``: on label positions ``-s_t (1 - P_i) / P_i`` with ``1 - P_i`` summed
    over the other positions, so it does not cancel once ``P_i`` rounds to 1.
    """
    s = log_s.exp()
    logP = torch.logsumexp(log_s.masked_fill(~label, -torch.inf), dim=-1)  # log P_i
    rest = torch.where(label, 0.0, s).sum(-1)  # 1 - P_i without cancellation
    ratio = (rest * torch.exp(-logP)).unsqueeze(-1)
    g = torch.where(label, -s * ratio, s)  # (B, n, T): d loss_i / d logits_it
    return -logP.mean(-1), s, g
