"""The step rules of the descent loop (docs/science.md §3, §10), one registry (:data:`RULES`).

Normalized and plain GD (§3) and, beyond the paper (§10): for linear models, normalized
steepest descent in a norm converges in direction to the max-margin solution in that norm
(sign descent, Signum and Adam: the entrywise max norm; spectral descent and Muon: the
spectral norm; l_p mirror descent: the l_p norm; Polyak's step size on GD: the Frobenius
norm, as GD).

Each rule is a fresh object per training pass (:func:`make_rule`; some keep state) that moves
one block of parameters (:mod:`attnsvm.gd.model`): ``rule(theta, G, loss)`` is the next
``theta``. Every rule acts on the last two axes of a block: on W, or on K and Q separately
(per-factor steps), seeds batched on a leading axis and never interacting. The step size is
constant (the regularization path's projected step, :class:`Projected`, has its own schedule).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.fields import DEFAULTS

#: the step rules of docs/science.md §10 (Cell.optimizer values besides normalized and plain)
STEEPEST = ("sign", "adam", "spectral", "mirror1p5", "mirror3", "polyak", "signum", "muon")
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
    "signum": "max",
    "muon": "spec",
}
#: Adam's default betas (torch.optim.Adam's; a cell's are its fields adam_beta1, adam_beta2)
ADAM_BETAS = (DEFAULTS["adam_beta1"], DEFAULTS["adam_beta2"])
#: Adam's epsilon: far below the gradients of the runs (saturated attention has gradients of
#: 1e-10 and less; torch's default 1e-8 would turn Adam into plain GD there, not sign descent)
ADAM_EPS = 1e-30


def _scaled(G: Tensor) -> tuple[Tensor, Tensor]:
    """``(G / m, m)`` with ``m = max |G|`` per matrix (at least the dtype's smallest normal):
    squares of ``G / m`` neither underflow nor overflow (see normalized_step)."""
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


class Rule:
    """One training pass's step rule for one block of parameters (a fresh object per pass:
    some keep state). ``rule(theta, G, loss)`` is ``theta(k+1)``, ``theta(k) - step(G, theta,
    loss)``; ``lr``: the step size, ``eps``: the normalized steps' (the dtype's smallest normal
    number), ``settings``: the training settings (Adam's betas), ``model``: the batch's model
    (the Polyak step's loss floor)."""

    def __init__(self, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
        self.lr, self.eps, self.k = float(lr), float(eps), 0

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        """``theta(k) - theta(k+1)`` from the gradient G at ``theta`` of per-seed ``loss``."""
        raise NotImplementedError

    def __call__(self, theta: Tensor, G: Tensor, loss: Tensor) -> Tensor:
        self.k += 1
        return theta - self.step(G, theta, loss)


class Normalized(Rule):
    """``lr G / (||G||_F + eps)`` per matrix (docs/science.md §3): K and Q separately, the
    stacked heads together (their matrices are one)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        return normalized_step(G, self.lr, self.eps)


class TextbookNormalized(Rule):
    """``G lr / (||G||_F + eps)`` as written, without :func:`normalized_step`'s scaling
    (next-token prediction's; the same step to rounding)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        nrm = torch.linalg.matrix_norm(G).clamp_min(0.0)[..., None, None]
        return G * (self.lr / (nrm + self.eps))


class Plain(Rule):
    """``lr G`` (plain GD, docs/science.md §3)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        return self.lr * G


class Sign(Rule):
    """``lr sign(G)``: steepest descent in the entrywise max norm (§10)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        return self.lr * torch.sign(G)


class Spectral(Rule):
    """``lr U V^T`` (:func:`polar_factor`): steepest descent in the spectral norm (§10)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        return self.lr * polar_factor(G)


class Adam(Rule):
    """torch.optim.Adam's update with epsilon :data:`ADAM_EPS` and the settings' betas
    (``adam_beta1``, ``adam_beta2``, each in [0, 1)), state per seed (§10)."""

    def __init__(self, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
        super().__init__(lr, eps)
        betas = ADAM_BETAS if settings is None else (settings.adam_beta1, settings.adam_beta2)
        if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
            raise ValueError(f"Adam's betas must be two numbers in [0, 1), got {betas!r}")
        self.betas = (float(betas[0]), float(betas[1]))
        self.m: Tensor | None = None
        self.v: Tensor | None = None

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        b1, b2 = self.betas
        m = self.m = torch.zeros_like(G) if self.m is None else self.m
        v = self.v = torch.zeros_like(G) if self.v is None else self.v
        m.mul_(b1).add_(G, alpha=1 - b1)
        v.mul_(b2).addcmul_(G, G, value=1 - b2)
        bc1, bc2 = 1 - b1**self.k, 1 - b2**self.k
        denom = (v.sqrt() / bc2**0.5).add_(ADAM_EPS)
        return (self.lr / bc1) * m / denom


class _Momentum(Rule):
    """A rule that steps along an average of its gradients: ``m <- beta m + (1 - beta) G``
    per seed (m = 0 at the start), ``beta`` the settings' ``momentum`` (§10)."""

    def __init__(self, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
        super().__init__(lr, eps)
        self.beta, self.m = _momentum(settings), None

    def average(self, G: Tensor) -> Tensor:
        """The updated average m (kept for the next step)."""
        m = self.m = torch.zeros_like(G) if self.m is None else self.m
        return m.mul_(self.beta).add_(G, alpha=1 - self.beta)


class Signum(_Momentum):
    """``lr sign(m)`` (Bernstein et al. 2018, arXiv 1802.04434: Signum), m the momentum
    average of :class:`_Momentum` (§10): sign descent on the momentum; ``beta = 0`` is
    :class:`Sign`."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        return self.lr * torch.sign(self.average(G))


def _momentum(settings: Any) -> float:
    beta = DEFAULTS["momentum"] if settings is None else settings.momentum
    if not 0.0 <= float(beta) < 1.0:
        raise ValueError(f"momentum must be a number in [0, 1), got {beta!r}")
    return float(beta)


#: (a, b, c) of Muon's quintic Newton-Schulz step ``X <- a X + (b A + c A^2) X``, ``A = X
#: X^T`` (Jordan et al. 2024, the reference implementation's coefficients)
NEWTON_SCHULZ = (3.4445, -4.7750, 2.0315)
#: Newton-Schulz steps per Muon step (the reference implementation's)
NEWTON_SCHULZ_STEPS = 5


def newton_schulz(G: Tensor, steps: int = NEWTON_SCHULZ_STEPS) -> Tensor:
    """Muon's approximate orthogonalization of each matrix of ``G`` (§10): ``X = G /
    ||G||_F`` (:func:`unit_frobenius`: 0 for G = 0), transposed to have at most as many rows
    as columns, then ``steps`` times ``X <- a X + (b A + c A A) X`` with ``A = X X^T`` and
    :data:`NEWTON_SCHULZ`. The singular vectors stay G's; singular values in (0, 1] are pushed
    towards 1 (into roughly [0.7, 1.2], not exactly 1: the coefficients trade accuracy for
    speed), so the result approximates the polar factor ``U V^T`` of :func:`polar_factor`."""
    X = unit_frobenius(G)
    tall = X.shape[-2] > X.shape[-1]
    if tall:
        X = X.transpose(-1, -2)
    a, b, c = NEWTON_SCHULZ
    for _ in range(steps):
        A = X @ X.transpose(-1, -2)
        X = a * X + (b * A + c * (A @ A)) @ X
    return X.transpose(-1, -2) if tall else X


class Muon(_Momentum):
    """Muon (Jordan et al. 2024; §10), the reference implementation's step in the cell's
    dtype: the momentum average B of :class:`_Momentum`, the Nesterov update ``U = (1 -
    beta) G + beta B``, and ``lr sqrt(max(1, rows / cols)) newton_schulz(U)``. The reference
    normalizes by ``||U||_F + 1e-7``; here by ``||U||_F`` alone (:func:`unit_frobenius`):
    saturated attention has gradients far below 1e-7, where that epsilon would shrink X below
    the range Newton-Schulz lifts to 1 (as torch's Adam epsilon would turn Adam into plain
    GD, :data:`ADAM_EPS`)."""

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        update = (1 - self.beta) * G + self.beta * self.average(G)
        rows, cols = G.shape[-2:]
        return (self.lr * max(1.0, rows / cols) ** 0.5) * newton_schulz(update)


class Polyak(Rule):
    """``lr (L - L*) / ||G||^2 G`` per seed (||G|| over all blocks of a seed, K and Q
    together), its length capped at :data:`POLYAK_MAX_STEP`; ``L*`` the model's
    :func:`loss_floor` (§10)."""

    def __init__(self, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
        super().__init__(lr, eps)
        self.floor = None
        if model is not None:
            b = model.batch
            self.floor = loss_floor((b.X, b.Y, b.Z, b.v, b.V), model.settings.head, b.mask)

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        if self.floor is None:
            raise RuntimeError("the Polyak step needs its loss floor (the model)")
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
        gap = (loss - self.floor).clamp_min(0.0)
        length = torch.clamp(self.lr * gap / nrm, max=POLYAK_MAX_STEP)  # inf / nan where G = 0
        length = torch.where(unit_norm > 0, length, torch.zeros_like(length))
        safe = torch.where(unit_norm > 0, unit_norm, torch.ones_like(unit_norm))
        return (length / safe).reshape(shape) * Gs


class Mirror(Rule):
    """l_p mirror descent (§10): ``grad psi(W) <- grad psi(W) - lr G / ||G||_F``, ``W =
    (grad psi)^{-1}``; ``p`` of :data:`MIRROR_P`."""

    p = 2.0

    def __init__(self, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
        super().__init__(lr, eps)
        self.phi: Tensor | None = None

    def step(self, G: Tensor, theta: Tensor, loss: Tensor) -> Tensor:
        if self.phi is None:
            self.phi = mirror_grad(theta, self.p)
        self.phi -= self.lr * unit_frobenius(G)
        return theta - mirror_inverse(self.phi, self.p)


class Mirror1p5(Mirror):
    p = MIRROR_P["mirror1p5"]


class Mirror3(Mirror):
    p = MIRROR_P["mirror3"]


def _sq(t: Tensor) -> Tensor:
    return (t * t).sum(dim=(-2, -1))


def _blocks(theta: Tensor) -> list[Tensor]:
    """W, or K and Q, of the packed ``theta`` (attnsvm.gd.model.pack)."""
    return [theta] if theta.dim() == 3 else [theta[0], theta[1]]


class Ball:
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
    """The regularization path's step at radius R (docs/science.md §4; attnsvm.gd.train's
    ``train_path``): ``Proj(P - eta_j rho D / ||D||)`` with ``eta_j = lr / sqrt(1 + j)`` at
    its j-th step, ``rho = R`` (W) or ``sqrt(2R)`` (K and Q, one joint step), D the loss
    gradient with its outward radial part removed where P lies on the sphere (a Riemannian
    step, :meth:`Ball.direction`) and Proj the rescaling onto the ball."""

    def __init__(self, lr: float, ball: Ball, R: float) -> None:
        super().__init__(lr)
        self.ball, self.R, self.rho = ball, R, np.sqrt(ball.bound(R))

    def __call__(self, theta: Tensor, G: Tensor, loss: Tensor) -> Tensor:
        ball, R, j = self.ball, self.R, self.k
        self.k += 1
        D = ball.direction(theta, G, R)
        return ball.project(ball.step(theta, D, (self.lr / np.sqrt(1.0 + j)) * self.rho), R)


#: every step rule by name: the values of the cell field ``optimizer`` and the rules a model
#: may name in its ``STEP_RULES`` (attnsvm.gd.model)
RULES: dict[str, type[Rule]] = {
    "normalized": Normalized,
    "normalized-textbook": TextbookNormalized,
    "plain": Plain,
    "sign": Sign,
    "adam": Adam,
    "spectral": Spectral,
    "mirror1p5": Mirror1p5,
    "mirror3": Mirror3,
    "polyak": Polyak,
    "signum": Signum,
    "muon": Muon,
}


def make_rule(name: str, lr: float, eps: float = 0.0, settings: Any = None, model: Any = None):
    """A fresh :class:`Rule` of ``name`` (:data:`RULES`; the model's ``STEP_RULES`` may say
    what a name means for it) at step size ``lr``."""
    name = getattr(model, "STEP_RULES", {}).get(name, name)
    if name not in RULES:
        raise ValueError(f"optimizer must be one of {', '.join(RULES)}, got {name!r}")
    return RULES[name](lr, eps, settings, model)


def normalized_step(G: Tensor, lr: float, eps: float) -> Tensor:
    """``lr G / (||G||_F + eps)`` per matrix (docs/science.md §3), over the last two axes.

    Computed in place: the result is G's storage (G itself is not kept). Evaluated as ``(G/m)
    * lr / (||G/m||_F + eps/m)`` with ``m = max |G|`` per matrix, so squaring neither
    underflows (tiny gradients near saturation) nor overflows. ``m`` is raised to at least the
    dtype's smallest normal number: that changes nothing when ``max |G|`` is normal, only
    rounding when it is subnormal (``G/m`` is then exact, a power-of-two scaling), and gives
    exactly 0 where G = 0.
    """
    m = G.abs().amax(dim=(-2, -1), keepdim=True).clamp_min_(torch.finfo(G.dtype).tiny)
    Gs = G.div_(m)  # G, a fresh gradient of this step, is overwritten
    # lr / (nrm + eps / m) in place, with the roundings of Python's ``scalar / tensor``
    # (Tensor.__rtruediv__ is ``reciprocal() * scalar``: two roundings, kept for the bits)
    den = torch.linalg.vector_norm(Gs, dim=(-2, -1), keepdim=True)
    den += m.reciprocal_().mul_(eps)  # m is not needed any more
    return Gs.mul_(den.reciprocal_().mul_(lr))


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
