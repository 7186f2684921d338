"""Steepest-descent, adaptive and mirror-descent step rules for attention (docs/science.md §10).

For linear models, normalized steepest descent in a norm converges in direction to the
max-margin solution in that norm (sign descent and Adam: the entrywise max norm; spectral
descent: the spectral norm; l_p mirror descent: the l_p norm; Polyak's step size on GD: the
Frobenius norm, as GD). These rules let the batched
loop of :mod:`attnsvm.gd.train` run them on attention, seeds batched on a leading axis and
seeds never interacting (every reduction stays within one seed's matrix).

Each rule is a fresh object per training pass (:func:`make_rule`): it sees the loss and the
current parameters through :meth:`StepRule.observe`, which wraps the objective, so the loop
of :mod:`attnsvm.gd.train` is unchanged. Every rule acts on the last two axes of
:func:`attnsvm.gd.model.pack`'s ``theta``: on W, or on K and Q separately (per-factor steps,
the way normalized GD normalizes K and Q separately). The learning-rate schedule is today's
normalized GD's: a constant ``lr``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from attnsvm.config.fields import DEFAULTS

#: the step rules of this module (Cell.optimizer values; docs/science.md §10)
STEEPEST = ("sign", "adam", "spectral", "mirror1p5", "mirror3", "polyak")
#: longest Polyak step (Frobenius norm over the parameters of a seed): a run heading to a
#: non-optimal selection keeps L - L* > 0 while its gradient vanishes, and its Polyak step
#: would grow without bound (docs/science.md §10)
POLYAK_MAX_STEP = 1e3
#: p of the l_p mirror-descent rules
MIRROR_P = {"mirror1p5": 1.5, "mirror3": 3.0}
#: the norm each rule's linear theory predicts (attnsvm.svm.norms name; fro: Frobenius)
PREDICTED_NORM = {
    "normalized": "fro",
    "plain": "fro",
    "sign": "max",
    "adam": "max",
    "spectral": "spec",
    "mirror1p5": "l1p5",
    "mirror3": "l3",
    "polyak": "fro",
}
#: Adam's default betas (torch.optim.Adam's; a cell's are its fields adam_beta1, adam_beta2)
ADAM_BETAS = (DEFAULTS["adam_beta1"], DEFAULTS["adam_beta2"])
#: Adam's epsilon: far below the gradients of the runs (saturated attention has gradients of
#: 1e-10 and less; torch's default 1e-8 would turn Adam into plain GD there, not sign descent)
ADAM_EPS = 1e-30

Evaluate = Callable[[Tensor, bool], tuple]


def _scaled(G: Tensor) -> tuple[Tensor, Tensor]:
    """``(G / m, m)`` with ``m = max |G|`` per matrix (at least the dtype's smallest normal):
    squares of ``G / m`` neither underflow nor overflow (see train._normalized_step)."""
    m = G.abs().amax(dim=(-2, -1), keepdim=True).clamp_min(torch.finfo(G.dtype).tiny)
    return G / m, m


def unit_frobenius(G: Tensor) -> Tensor:
    """``G / ||G||_F`` per matrix, 0 where G = 0."""
    Gs, _ = _scaled(G)
    nrm = torch.linalg.vector_norm(Gs, dim=(-2, -1), keepdim=True)
    return Gs / torch.where(nrm > 0, nrm, torch.ones_like(nrm))


def polar_factor(G: Tensor) -> Tensor:
    """``U V^T`` of the thin SVD ``G = U diag(s) V^T`` per matrix, over the singular values
    above ``max(d, m) eps s_max`` (the maximizer of ``<G, D>`` over ``||D||_2 <= 1`` of least
    Frobenius norm; 0 for G = 0): the spectral-norm steepest-descent direction (Muon's step)."""
    Gs, _ = _scaled(G)
    U, s, Vh = torch.linalg.svd(Gs, full_matrices=False)
    tol = s[..., :1] * max(G.shape[-2:]) * torch.finfo(G.dtype).eps
    keep = (s > tol).to(G.dtype)
    return (U * keep.unsqueeze(-2)) @ Vh


def mirror_grad(W: Tensor, p: float) -> Tensor:
    """``grad psi(W) = sign(W) |W|^(p-1)`` of ``psi = ||W||_p^p / p`` (entrywise)."""
    return torch.sign(W) * W.abs().pow(p - 1.0)


def mirror_inverse(phi: Tensor, p: float) -> Tensor:
    """The inverse map ``sign(phi) |phi|^(1/(p-1))`` of :func:`mirror_grad`."""
    return torch.sign(phi) * phi.abs().pow(1.0 / (p - 1.0))


class StepRule:
    """One training pass's step rule: ``step(G)`` is ``theta(k) - theta(k+1)``.

    :meth:`observe` wraps the objective so the rule sees the current ``theta`` and per-seed
    ``loss`` of each step (mirror descent needs them); the loop is unchanged. ``betas``:
    Adam's (beta_1, beta_2), each in [0, 1).
    """

    def __init__(self, optimizer: str, lr: float, betas: tuple[float, float] = ADAM_BETAS) -> None:
        if optimizer not in STEEPEST:
            raise ValueError(f"optimizer must be one of {', '.join(STEEPEST)}, got {optimizer!r}")
        if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
            raise ValueError(f"Adam's betas must be two numbers in [0, 1), got {betas!r}")
        self.optimizer, self.lr, self.k = optimizer, float(lr), 0
        self.betas = (float(betas[0]), float(betas[1]))
        self.theta: Tensor | None = None
        self.loss: Tensor | None = None
        self.state: dict[str, Tensor] = {}

    def attach(self, data: tuple, head: str = "linear", mask: Tensor | None = None) -> None:
        """Give the rule its problem before the first step: the Polyak step's per-seed loss
        floor :func:`loss_floor` (the other rules need nothing)."""
        if self.optimizer == "polyak":
            self.state["floor"] = loss_floor(data, head, mask)

    def observe(self, evaluate: Evaluate) -> Evaluate:
        """``evaluate`` that also records ``theta`` and the loss for the next :meth:`step`."""

        def wrapped(theta: Tensor, want_grad: bool) -> tuple:
            out = evaluate(theta, want_grad)
            self.theta, self.loss = theta, out[0]
            return out

        return wrapped

    def __call__(self, G: Tensor) -> Tensor:
        self.k += 1
        name = "mirror" if self.optimizer in MIRROR_P else self.optimizer
        return getattr(self, "_" + name)(G)

    def _sign(self, G: Tensor) -> Tensor:
        return self.lr * torch.sign(G)

    def _spectral(self, G: Tensor) -> Tensor:
        return self.lr * polar_factor(G)

    def _adam(self, G: Tensor) -> Tensor:
        b1, b2 = self.betas
        m = self.state.setdefault("m", torch.zeros_like(G))
        v = self.state.setdefault("v", torch.zeros_like(G))
        m.mul_(b1).add_(G, alpha=1 - b1)
        v.mul_(b2).addcmul_(G, G, value=1 - b2)
        bc1, bc2 = 1 - b1**self.k, 1 - b2**self.k
        denom = (v.sqrt() / bc2**0.5).add_(ADAM_EPS)
        return (self.lr / bc1) * m / denom

    def _polyak(self, G: Tensor) -> Tensor:
        """``lr (L - L*) / ||G||^2 G`` per seed, its length capped at ``POLYAK_MAX_STEP``."""
        floor = self.state.get("floor")
        if floor is None or self.loss is None:
            raise RuntimeError("the Polyak step needs attach() and observe() before a step")
        seed_axis = 1 if G.dim() == 4 else 0  # KQ: (2, S, d, m); W: (S, d, d)
        dims = tuple(i for i in range(G.dim()) if i != seed_axis)
        shape = [1] * G.dim()
        shape[seed_axis] = -1
        # the step is length x unit direction: ||eta G|| = lr (L - L*) / ||G||, computed with
        # G scaled by its largest entry, so that neither a tiny nor a huge G under/overflows
        m = G.abs().amax(dim=dims).clamp_min(torch.finfo(G.dtype).tiny)
        Gs = G / m.reshape(shape)
        unit_norm = torch.sqrt((Gs * Gs).sum(dim=dims))  # ||G|| / m, in [1, sqrt(size)] or 0
        nrm = m * unit_norm
        gap = (self.loss - floor).clamp_min(0.0)
        length = torch.clamp(self.lr * gap / nrm, max=POLYAK_MAX_STEP)  # inf / nan where G = 0
        length = torch.where(unit_norm > 0, length, torch.zeros_like(length))
        safe = torch.where(unit_norm > 0, unit_norm, torch.ones_like(unit_norm))
        return (length / safe).reshape(shape) * Gs

    def _mirror(self, G: Tensor) -> Tensor:
        p = MIRROR_P[self.optimizer]
        W = self.theta
        if "phi" not in self.state:
            self.state["phi"] = mirror_grad(W, p)
        phi = self.state["phi"]
        phi -= self.lr * unit_frobenius(G)
        return W - mirror_inverse(phi, p)


def loss_floor(data: tuple, head: str = "linear", mask: Tensor | None = None) -> Tensor:
    """Per seed, the infimum of the ERM loss over W for the fixed linear head (docs/science.md
    §10): ``L* = mean_i log(1 + exp(-max_t Y_i v^T x_it))``.

    The model's output is a convex combination of the tokens, so ``Y_i f_i <= max_t gamma_it``
    with ``gamma_it = Y_i v^T x_it``, and the logistic loss is decreasing: no W does better,
    and W along the Att-SVM direction of the optimal tokens approaches L* when that SVM is
    feasible. ``data``: (X, Y, Z, v, V) of :mod:`attnsvm.gd.train`, cross or self attention
    (``mask`` None).
    """
    if head != "linear" or mask is not None:
        raise ValueError("the Polyak step needs a linear head and cross or self attention")
    X, Y, _, v, _ = data
    gamma = Y[..., None] * torch.einsum("sntd,sd->snt", X, v)
    return torch.nn.functional.softplus(-gamma.amax(dim=-1)).mean(dim=-1)


def make_rule(settings: Any, lr: float) -> functools.partial:
    """A factory of fresh :class:`StepRule` s of ``settings.optimizer`` (the training settings
    of :meth:`attnsvm.config.cell.Cell.settings`, with Adam's ``adam_beta1``, ``adam_beta2``)
    at step size ``lr``, one per training pass (state starts empty); :mod:`attnsvm.gd.train`
    tells it from a stateless step by its type (a partial)."""
    betas = (settings.adam_beta1, settings.adam_beta2)
    StepRule(settings.optimizer, lr, betas)  # checks the name and the betas now
    return functools.partial(StepRule, settings.optimizer, lr, betas)
