"""Weight decay and its regularized optimum (docs/science.md §4, "Weight decay").

A cell with ``weight_decay`` lambda > 0 trains on the regularized loss

    L_lambda = L + (lambda / 2) ||W||_F^2            (param W)
    L_lambda = L + (lambda / 2) (||K||_F^2 + ||Q||_F^2)   (param KQ, on top of the ridge of §3)

with L the model's loss: every optimizer descends ``L_lambda`` (for GD this is the decoupled
weight decay ``theta <- (1 - eta lambda) theta - eta G``; for Adam it is the L2 penalty, not
AdamW). :class:`WeightDecay` adds the term to any model of :mod:`attnsvm.gd.model` (the
attention matrices only, never a trained head v).

Since ``min {(||K||_F^2 + ||Q||_F^2) / 2 : K Q^T = W, K, Q in R^{d x m}} = ||W||_*`` for rank(W)
<= m, the factored problem is the nuclear-regularized problem ``min_W L(W) + lambda ||W||_*
(rank(W) <= m)`` (Kobayashi et al., NeurIPS 2024; Boncoraglio et al., arXiv 2509.24914), and the
W problem the Frobenius-regularized ``min_W L(W) + (lambda / 2) ||W||_F^2``. The attention loss
is not convex in W, so neither optimum is a convex program: a trained W is tested for being a
stationary point of each by the fixed point of its proximal-gradient map with step
``1 / lambda`` (:func:`prox_residuals`), which is 0 exactly at a stationary point.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.gd.model import loss_and_grad

#: the per-cell scalars of a cell with weight decay (docs/store.md)
SCALARS = ("prox_residual_nuc", "prox_residual_fro")


def measured(cell: Any) -> bool:
    """Whether a trained single-head cell stores :data:`SCALARS`: weight decay > 0, task train,
    a fixed head, cross or self attention (the loss of :func:`regularized_residuals`)."""
    return (
        cell.weight_decay > 0
        and (cell.task, cell.train_head) == ("train", False)
        and cell.attention in ("cross", "self")
    )


def _sq_per_seed(theta: Tensor) -> Tensor:
    """``||theta||_F^2`` per seed: W (S, ., .) or K and Q stacked (2, S, ., .)."""
    dims = (1, 2) if theta.dim() == 3 else (0, 2, 3)
    return (theta * theta).sum(dims)


class WeightDecay:
    """``model`` with ``(lambda / 2) ||theta||_F^2`` added to its loss and ``lambda theta`` to
    the gradient of its attention block ``theta`` (params[0]: W, or K and Q stacked, every
    head's); the other blocks (a trained head's v) and everything else are the model's."""

    def __init__(self, model: Any, lam: float) -> None:
        self.model, self.lam = model, float(lam)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def select(self, sel: Tensor) -> WeightDecay:
        return WeightDecay(self.model.select(sel), self.lam)

    def __call__(self, params: list[Tensor], grad: bool = True) -> tuple:
        loss, s, W, G = self.model(params, grad)
        theta = params[0]
        loss = loss + (0.5 * self.lam) * _sq_per_seed(theta)
        if G is not None:
            G = [G[0] + self.lam * theta, *G[1:]]
        return loss, s, W, G

    def loss(self, params: list[Tensor]) -> tuple[Tensor, Tensor]:
        """The regularized loss out of place (autograd)."""
        loss, s = self.model.loss(params)
        return loss + (0.5 * self.lam) * _sq_per_seed(params[0]), s


def wrap(model: Any, settings: Any) -> Any:
    """``model`` with the settings' weight decay, or ``model`` itself at 0 (every bit as
    before)."""
    lam = float(settings.weight_decay)
    return model if lam == 0.0 else WeightDecay(model, lam)


def prox_nuclear(A: np.ndarray, tau: float, rank: int | None = None) -> np.ndarray:
    """``argmin_X (1/2) ||X - A||_F^2 + tau ||X||_*`` subject to rank(X) <= ``rank`` (None:
    no bound): the singular values of A soft-thresholded by tau, the largest ``rank`` kept
    (both are spectral functions, so thresholding then truncating is the exact prox)."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    if rank is not None:
        s[rank:] = 0.0
    return (U * s) @ Vt


def prox_residuals(W: np.ndarray, G: np.ndarray, lam: float, rank: int | None) -> dict:
    """How far ``W`` is from a stationary point of each regularized problem (module
    docstring), given ``G = grad L(W)`` and ``lam`` > 0: the fixed-point residual of the
    proximal-gradient map with step ``1 / lam``, relative to the scale of that map's input
    ``s = max(||W||_F, ||G / lam||_F)``,

        prox_residual_nuc = ||W - prox_{||.||_*, rank <= m}(W - G / lam)||_F / s
        prox_residual_fro = ||W - (W - G / lam) / 2||_F / s = ||W + G / lam||_F / (2 s)

    (the prox of ``(1/lam) (lam/2) ||.||_F^2`` halves its argument). Each is 0 exactly where W
    is stationary for its problem (``-G in lam d||W||_*``, ``-G = lam W``), and of order 1
    at the other problem's stationary points (W = U diag(sigma) V^T there: ``||sigma - 1|| /
    ||sigma||`` and the like), whatever lambda; the Frobenius one is at most 1. The scale is
    ``s``, not ``||W||_F`` alone, so that a factorization that decays to W = 0 (a stationary
    point of the nuclear problem when ``||G||_op <= lam``) reads as stationary for the nuclear
    problem and not for the Frobenius one, as it is. NaN when ``s`` is 0 or not finite."""
    if not lam > 0:
        raise ValueError(f"the regularized optimum needs weight_decay > 0, got {lam!r}")
    scale = max(float(np.linalg.norm(W)), float(np.linalg.norm(G)) / lam)
    if not (scale > 0 and np.isfinite(scale)):
        return dict.fromkeys(SCALARS, float("nan"))
    A = W - G / lam
    return {
        "prox_residual_nuc": float(np.linalg.norm(W - prox_nuclear(A, 1.0, rank)) / scale),
        "prox_residual_fro": float(np.linalg.norm(W - A / 2.0) / scale),
    }


def regularized_residuals(data: Any, W: np.ndarray, settings: Any) -> dict:
    """:func:`prox_residuals` of a trained ``W`` (d, d) on one seed's data (a
    :class:`attnsvm.gd.data.Dataset`) with the cell's ``train`` settings: ``G`` is the
    gradient of the unregularized loss at W (the single-head model with param W: no ridge),
    the rank bound the cell's m for KQ (none for W)."""
    one = {k: getattr(data, k) for k in ("X", "Y", "Z", "v", "V")}
    t = {k: None if a is None else torch.as_tensor(np.asarray(a, np.float64))[None]
         for k, a in one.items()}  # fmt: skip
    Wt = torch.as_tensor(np.asarray(W, np.float64))[None]
    with torch.inference_mode():
        _, _, G = loss_and_grad({"W": Wt}, t["X"], t["Y"], t["Z"], t["v"], t["V"], settings,
                                param="W")  # fmt: skip
    rank = settings.inner_dim if settings.param == "KQ" else None
    return prox_residuals(np.asarray(W, np.float64), G["W"][0].numpy(), settings.weight_decay, rank)
