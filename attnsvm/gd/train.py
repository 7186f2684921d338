"""Batched full-batch gradient descent on attention (docs/science.md §3).

The paper's training algorithm (normalized GD on the empirical risk of the attention model,
W directly or W = K Q^T with a vanishing ridge on K and Q) for S seeds at once.

S seeds of one shape train together as tensors with a leading seed axis; seeds never interact.
The loop never synchronizes with the host: checkpoints are written into on-device buffers and
each seed's finiteness is tracked on-device, all copied back once at the end. Seeds that went
non-finite are then trained again on their own with the exact freeze (see :func:`train_batch`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.cell import Cell
from attnsvm.config.fields import CHOICES
from attnsvm.config.settings import Settings
from attnsvm.gd import fused
from attnsvm.gd.data import make_dataset, make_init
from attnsvm.gd.device import describe_device, resolve_device, to_device
from attnsvm.gd.model import (
    Objective,
    check_choice,
    combined_matrix,
    loss_fn,
    pack,
    param_names,
    train_settings,
    unpack,
)
from attnsvm.gd.optimizers import make_rule

#: how train_batch computes the gradient: hand-derived (Objective) or autograd (loss_fn)
GRADIENTS = ("analytic", "autograd")
#: torch dtype of each of the Cell's dtype names
TORCH_DTYPES = {name: getattr(torch, name) for name in CHOICES["dtype"]}


@dataclass
class TrainResult:
    """Checkpointed trajectory of a batch of S seeds (C checkpoints), host float64 arrays."""

    iterations: np.ndarray  # (C,) int: checkpoint k is the state after k steps
    W: np.ndarray  # (S, C, d, d): W(k), or K(k) Q(k)^T for KQ
    softmax: np.ndarray  # (S, C, n, T)
    loss: np.ndarray  # (S, C)
    wnorm: np.ndarray  # (S, C): ||W(k)||_F
    finite: np.ndarray  # (S,) bool: False if the seed produced a non-finite loss/step
    nonfinite_iteration: np.ndarray  # (S,) int: first bad k (the seed stays at W(k)), -1 if none
    device: str  # e.g. "cpu", "cpu, fused loop" or "cuda:0 (NVIDIA H100 80GB HBM3)"
    seconds: float  # wall time of the whole batch (transfers included)


def _check_checkpoints(checkpoints: Sequence[int], iterations: int) -> list[int]:
    ks = [int(k) for k in checkpoints]
    if any(k < 0 or k > iterations for k in ks):
        raise ValueError(f"checkpoints must lie in [0, iterations={iterations}], got {ks}")
    if len(set(ks)) != len(ks) or ks != sorted(ks):
        raise ValueError(f"checkpoints must be strictly increasing, got {ks}")
    return ks


def _normalized_step(G: Tensor, lr: float, eps: float) -> Tensor:
    """``lr G / (||G||_F + eps)`` per matrix (docs/science.md §3), over the last two axes.

    Computed in place: the result is G's storage (G itself is not kept).

    Evaluated as ``(G/m) * lr / (||G/m||_F + eps/m)`` with ``m = max |G|`` per matrix, so
    squaring neither underflows (tiny gradients near saturation) nor overflows. ``m`` is raised
    to at least the dtype's smallest normal number: that changes nothing when ``max |G|`` is
    normal, only rounding when it is subnormal (``G/m`` is then exact, a power-of-two scaling),
    and gives exactly 0 where G = 0.
    """
    m = G.abs().amax(dim=(-2, -1), keepdim=True).clamp_min_(torch.finfo(G.dtype).tiny)
    Gs = G.div_(m)  # G, a fresh gradient of this step, is overwritten
    # lr / (nrm + eps / m) in place, with the roundings of Python's ``scalar / tensor``
    # (Tensor.__rtruediv__ is ``reciprocal() * scalar``: two roundings, kept for the bits)
    den = torch.linalg.vector_norm(Gs, dim=(-2, -1), keepdim=True)
    den += m.reciprocal_().mul_(eps)  # m is not needed any more
    return Gs.mul_(den.reciprocal_().mul_(lr))


def _zero_if_finite(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """``sum(0 * t)`` over ``dims``: exactly 0 where every entry is finite, else NaN.

    ``0 * x`` is +-0 for finite x and NaN for inf or NaN, so unlike a plain sum this never
    overflows: a per-seed finiteness test of a whole tensor in two cheap kernels.
    """
    return (t * 0.0).sum(dims)


Evaluate = Callable[[Tensor, bool], tuple[Tensor, Tensor, Tensor, Tensor | None]]


class _Checkpoints:
    """On-device float64 buffers of the checkpoints ``ks`` of a batch of S seeds.

    ``W`` (S, C, d, d), ``softmax`` (S, C, n, T) and ``loss`` (S, C); :meth:`record` writes
    step k's values into its slot when k is a checkpoint (docs/science.md §3, "Record").
    """

    def __init__(self, theta: Tensor, ks: list[int], n: int, T: int) -> None:
        S, d = theta.shape[-3], theta.shape[-2]
        dev, f64 = theta.device, torch.float64
        C = len(ks)
        self.slot = {k: c for c, k in enumerate(ks)}
        self.W = torch.zeros((S, C, d, d), dtype=f64, device=dev)
        self.softmax = torch.zeros((S, C, n, T), dtype=f64, device=dev)
        self.loss = torch.zeros((S, C), dtype=f64, device=dev)

    def record(self, k: int, W: Tensor, s: Tensor, loss: Tensor) -> None:
        c = self.slot.get(k)
        if c is not None:
            self.W[:, c] = W
            self.softmax[:, c] = s
            self.loss[:, c] = loss


def _ticker(iterations: int, progress: Callable[[int], None] | None) -> Callable[[int], None]:
    """``tick(k)``, called before step k: reports the steps done since the last report to
    ``progress``, about 100 times per run (a host-side counter, no device sync)."""
    every = max(1, iterations // 100)

    def tick(k: int) -> None:
        if progress is not None and k and (k % every == 0 or k == iterations):
            progress(every if k % every == 0 else k % every)

    return tick


def _seed_dims(theta: Tensor) -> tuple[int, ...]:
    """All axes of :func:`attnsvm.gd.model.pack`'s ``theta`` but the seed axis."""
    return (1, 2) if theta.dim() == 3 else (0, 2, 3)


@dataclass
class _Loop:
    """What both loops of :func:`_descend` share: the step rule, the checkpoint recorder,
    the progress ticker and the number of steps."""

    step: Callable[[Tensor], Tensor]
    record: Callable[[int, Tensor, Tensor, Tensor], None]
    tick: Callable[[int], None]
    iterations: int


def _descend_free(evaluate: Evaluate, theta: Tensor, loop: _Loop) -> tuple[Tensor, Tensor]:
    """The loop of :func:`_descend` with ``freeze=False``; returns ``(alive, bad_at)``.

    No per-step test: a non-finite loss makes ``loss_sum`` non-finite for good (inf and NaN
    absorb finite terms), and so does a non-finite entry of theta for theta itself (x - step
    is inf or NaN when x is). So "loss_sum and the last theta are finite" is "every loss and
    every theta was": one add per step instead of six kernels. A finite sum that overflows
    would only flag a good seed, which the frozen re-run of train_batch then finds finite,
    with the same bits.
    """
    S, dev = theta.shape[-3], theta.device
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    theta = theta.clone()  # updated in place below; the caller's tensor stays as it is
    loss_sum = torch.zeros(S, dtype=theta.dtype, device=dev)
    for k in range(loop.iterations + 1):
        loop.tick(k)
        last = k == loop.iterations
        loss, s, W, G = evaluate(theta, not last)
        loop.record(k, W, s, loss)
        loss_sum += loss
        if last:
            break
        theta -= loop.step(G)  # W (an alias of theta) was copied out above if it is kept
    probe = loss_sum + _zero_if_finite(theta, _seed_dims(theta))
    alive &= (probe - probe) == 0.0
    return alive, torch.where(alive, -1, torch.zeros(S, dtype=torch.int64, device=dev))


def _descend_frozen(evaluate: Evaluate, theta: Tensor, loop: _Loop) -> tuple[Tensor, Tensor]:
    """The loop of :func:`_descend` with ``freeze=True``; returns ``(alive, bad_at)``."""
    S, dev = theta.shape[-3], theta.device
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    steps_alive = torch.zeros(S, dtype=torch.int64, device=dev)  # = bad_at once a seed fails
    seed_dims = _seed_dims(theta)
    for k in range(loop.iterations + 1):
        loop.tick(k)
        last = k == loop.iterations
        loss, s, W, G = evaluate(theta, not last)
        loop.record(k, W, s, loss)
        probe = loss
        if not last:
            new = theta - loop.step(G)
            probe = loss + _zero_if_finite(new, seed_dims)
        alive &= (probe - probe) == 0.0  # probe is finite
        if last:
            break
        steps_alive += alive
        theta = torch.where(alive.view(S, 1, 1), new, theta)
    return alive, torch.where(alive, -1, steps_alive)


def _descend(
    evaluate: Evaluate,
    theta: Tensor,
    step: Callable[[Tensor], Tensor],
    ks: list[int],
    iterations: int,
    *,
    freeze: bool,
    n: int,
    T: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The GD loop of :func:`train_batch` on :func:`attnsvm.gd.model.pack`'s ``theta``.

    Step k evaluates ``(loss, s, W, G)`` at ``theta(k)``, records checkpoint k, and moves to
    ``theta(k+1) = theta(k) - step(G)``. A seed stays alive while its loss, softmax and new
    parameters are finite. The test is one per-seed scalar, ``loss + sum 0 * theta(k+1)``,
    finite exactly when both are; the softmax needs no term of its own: ``s <= 1``, and a NaN
    anywhere in a row of s makes the whole row NaN (its log-sum-exp is NaN), hence the
    attended token, the output and the loss NaN.

    ``freeze=True``: a seed that fails at step k keeps ``theta(k)`` from then on (one masked
    select per step) and gets ``bad_at = k``. ``freeze=False`` skips the select and the
    per-step test, updates theta in place, and leaves a failed seed's later values
    meaningless (seeds never interact, so the others are unaffected); only ``alive`` is then
    valid, tested once at the end on the sum of the losses and the last theta.

    Returns on-device ``(W (S,C,d,d), softmax (S,C,n,T), loss (S,C), alive (S,), bad_at (S,))``
    with W, softmax and loss in float64.

    ``progress(steps)`` is called with the number of steps done since its last call, about
    100 times per run (a host-side counter: it does not synchronize with the device).
    """
    buffers = _Checkpoints(theta, ks, n, T)
    loop = _Loop(step, buffers.record, _ticker(iterations, progress), iterations)
    alive, bad_at = (_descend_frozen if freeze else _descend_free)(evaluate, theta, loop)
    return buffers.W, buffers.softmax, buffers.loss, alive, bad_at


def _check_arguments(
    settings: Settings, gradient: str, init: dict[str, np.ndarray]
) -> tuple[int, list[int]]:
    """``(iterations, checkpoints)`` of a :func:`train_batch` call, checked.

    A :class:`Cell` validates its own fields; these checks are for direct library callers
    (benchmarks, tests, the regularization path), whose arrays and choices no Cell has seen,
    and they protect the loop's invariants (one buffer slot per checkpoint, in order).
    """
    for name in ("param", "optimizer", "dtype"):
        check_choice(name, settings[name], CHOICES[name])
    check_choice("gradient", gradient, GRADIENTS)
    names = param_names(settings.param)
    if set(init) != set(names):
        raise ValueError(
            f"init for param {settings.param!r} needs keys {names}, got {sorted(init)}"
        )
    iterations = settings.iterations
    if not (isinstance(iterations, int | np.integer) and iterations >= 0):
        raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
    iterations = int(iterations)
    return iterations, _check_checkpoints(settings.checkpoints, iterations)


@dataclass
class _Problem:
    """One :func:`train_batch` call on the device: data, initial parameters, the training
    settings and the other options of :class:`attnsvm.gd.model.Objective` (ridge, stable,
    mask)."""

    data: tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]  # X, Y, Z, v, V
    theta0: Tensor  # attnsvm.gd.model.pack's layout
    settings: Settings
    options: dict[str, Any]
    eps: float = 0.0  # the normalized step's eps (train_batch)

    def seeds(self, sel: Tensor) -> _Problem:
        """The same problem restricted to the seeds ``sel`` (seeds never interact)."""
        data = tuple(None if t is None else t[sel] for t in self.data)
        options = dict(self.options)
        if options.get("mask") is not None:
            options["mask"] = options["mask"][sel]
        theta0 = self.theta0[:, sel] if self.settings.param == "KQ" else self.theta0[sel]
        return _Problem(data, theta0, self.settings, options, self.eps)

    def objective(self, gradient: str) -> Evaluate:
        """The hand-derived :class:`Objective`, or autograd through :func:`loss_fn`."""
        if gradient == "analytic":
            return Objective(*self.data, self.settings, **self.options)
        return _autograd_objective(self.data, self.settings, self.options)


def _autograd_objective(data: tuple, settings: Settings, options: dict[str, Any]) -> Evaluate:
    """:class:`Objective`'s interface computed by autograd through :func:`loss_fn`."""
    param = settings.param

    def evaluate(th: Tensor, want_grad: bool) -> tuple:
        leaves = {k: p.detach().requires_grad_(want_grad) for k, p in unpack(th, param).items()}
        with torch.enable_grad():
            loss, s = loss_fn(leaves, *data, settings, **options)
            G = None
            if want_grad:
                grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
                G = pack(dict(zip(leaves, grads, strict=True)), param)
        W = combined_matrix(leaves, param).detach()
        return loss.detach(), s.detach(), W, G

    return evaluate


def step_rule(settings: Settings, lr: float, eps: float) -> Callable[[Tensor], Tensor]:
    """The step ``theta(k) - theta(k+1)`` from the gradient G of ``settings.optimizer``
    (docs/science.md §3) at step size ``lr``; the rules of docs/science.md §10 are
    :class:`attnsvm.gd.optimizers.StepRule` factories instead."""
    if settings.optimizer == "normalized":
        return lambda G: _normalized_step(G, lr, eps)
    if settings.optimizer == "plain":
        return lambda G: lr * G
    return make_rule(settings, lr)


def _train_all(
    problem: _Problem,
    gradient: str,
    step: Callable[[Tensor], Tensor],
    ks: list[int],
    iterations: int,
    progress: Callable[[int], None] | None,
    use_fused: bool = False,
) -> list[Tensor]:
    """:func:`_descend` on every seed without the freeze, then again with it on the seeds that
    went non-finite; returns ``[W, softmax, loss, alive, bad_at]`` on the device.

    One host sync, after the loop. A seed's trajectory does not depend on its batch, so the
    re-run gives exactly the frozen run; the common all-finite case pays no per-step select.
    With ``use_fused`` (where :func:`attnsvm.gd.fused.applies`), the first pass is the fused
    loop (one compiled call for all steps of all seeds); the frozen re-run is always the torch
    loop.
    """
    n, T = problem.data[0].shape[1:3]

    def descend(p: _Problem, freeze: bool, progress=None) -> tuple[Tensor, ...]:
        evaluate, rule = p.objective(gradient), step
        if isinstance(step, functools.partial):  # a stateful rule: fresh state per pass
            rule = step()
            rule.attach(p.data, p.settings.head, p.options.get("mask"))
            evaluate = rule.observe(evaluate)
        return _descend(evaluate, p.theta0, rule, ks, iterations,
                        freeze=freeze, n=n, T=T, progress=progress)  # fmt: skip

    if use_fused:
        ridge = problem.options.get("ridge")
        ridge = problem.settings.ridge if ridge is None else ridge
        buffers = fused.train(problem.data, problem.theta0, problem.settings, ks, iterations,
                              problem.eps, ridge, progress)  # fmt: skip
    else:
        buffers = list(descend(problem, False, progress))
    alive = buffers[3]
    if not bool(alive.all()):
        sel = torch.nonzero(~alive).squeeze(1)
        for buf, again in zip(buffers, descend(problem.seeds(sel), True), strict=True):
            buf[sel] = again
    return buffers


def host_result(
    iterations: np.ndarray,
    W: Tensor,
    softmax: Tensor,
    loss: Tensor,
    alive: Tensor,
    bad_at: Tensor,
    device: torch.device,
    t0: float,
) -> TrainResult:
    """A :class:`TrainResult` from the on-device buffers (one copy back to the host).

    Shared by training and the regularization path; ``t0`` is the ``time.perf_counter()`` at
    which the call began.
    """
    wnorm = torch.linalg.vector_norm(W, dim=(-2, -1))
    out = [t.cpu().numpy() for t in (W, softmax, loss, wnorm, alive, bad_at)]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    W_np, sm_np, loss_np, wnorm_np, alive_np, bad_np = out
    return TrainResult(
        iterations=iterations,
        W=W_np,
        softmax=sm_np,
        loss=loss_np,
        wnorm=wnorm_np,
        finite=alive_np.astype(bool),
        nonfinite_iteration=bad_np.astype(np.int64),
        device=describe_device(device),
        seconds=time.perf_counter() - t0,
    )


def train_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    V: np.ndarray | None,
    init: dict[str, np.ndarray],
    settings: Settings | None = None,
    *,
    device: str = "auto",
    eps: float | None = None,
    ridge: float | None = None,
    stable: bool = True,
    gradient: str = "analytic",
    mask: np.ndarray | None = None,
    progress: Callable[[int], None] | None = None,
    **fields: Any,
) -> TrainResult:
    """Full-batch GD on S independent seeds (docs/science.md §3; the paper's normalized GD on
    the ERM objective for W and for (K, Q) with a vanishing ridge).

    Inputs are host arrays with a leading seed axis (X (S,n,T,d), Y (S,n), Z (S,n,d), v (S,d),
    V (S,d,d) or None; init ``{"W": (S,d,d)}`` or ``{"K": (S,d,m), "Q": (S,d,m)}``), moved to
    ``device`` in ``settings.dtype``. ``settings``: a cell's ``train`` settings
    (:meth:`attnsvm.config.cell.Cell.settings`: param, head, lam, optimizer, lr, iterations,
    checkpoints, dtype, ...), taken whole; a library call may give them as keyword ``fields``
    instead (``param="W", lr=0.1, checkpoints=[0, 10]``; the rest default). Each step, per seed:

    - normalized: ``W <- W - lr G / (||G||_F + eps)`` (K and Q normalized separately),
    - plain: ``W <- W - lr G``,

    with G the gradient of that seed's loss (KQ adds ``ridge (||K||_F^2 + ||Q||_F^2)``).
    ``eps`` defaults to the dtype's smallest normal number (normalization is exact whenever
    G != 0; a zero gradient gives a zero step). At each checkpoint k (after k steps; 0 = the
    initialization) W(k) (K Q^T for KQ), softmax, loss and ``||W(k)||_F`` are recorded.

    A seed whose loss or step becomes non-finite at W(k) is frozen there and flagged with
    ``nonfinite_iteration = k``; other seeds are unaffected. The batched loop only tracks
    finiteness (on-device, no host sync); after it, the seeds that failed are trained again on
    their own with the per-step freeze (one host sync per call, none per step).

    ``stable=False`` uses the textbook attended token (docs/science.md §3, comparisons only);
    ``gradient="autograd"`` differentiates :func:`attnsvm.gd.model.loss_fn` instead of the
    hand-derived gradient (same numbers to rounding, slower). ``mask`` (S, n, T) bool
    restricts each example's attention to its True tokens (causal attention; None: all).
    ``progress(steps)``: called as the batched loop advances (see :func:`_descend`).
    """
    settings = train_settings(settings, **fields)
    iterations, ks = _check_arguments(settings, gradient, init)
    t0 = time.perf_counter()
    dev = resolve_device(device)
    tdt = TORCH_DTYPES[settings.dtype]
    eps = float(torch.finfo(tdt).tiny) if eps is None else float(eps)
    options: dict[str, Any] = {"ridge": ridge, "stable": stable, "mask": None}
    if mask is not None:
        options["mask"] = torch.as_tensor(np.asarray(mask, dtype=bool)).to(device=dev)
    data = tuple(None if a is None else to_device(a, dev, tdt) for a in (X, Y, Z, v, V))
    param = settings.param
    theta0 = pack({k: to_device(init[k], dev, tdt) for k in param_names(param)}, param)
    problem = _Problem(data, theta0, settings, options, eps)
    # inference mode (no autograd bookkeeping at all) saves ~10% of a small step; the
    # autograd path needs grad mode inside, which inference mode forbids
    no_autograd = torch.inference_mode if gradient == "analytic" else torch.no_grad
    with no_autograd():
        rule = step_rule(settings, settings.lr, eps)
        use_fused = fused.applies(settings, dev, gradient, options, tuple(np.shape(X)[1:4]))
        W, sm, loss, alive, bad_at = _train_all(
            problem, gradient, rule, ks, iterations, progress, use_fused
        )
        res = host_result(np.asarray(ks, dtype=np.int64), W, sm, loss, alive, bad_at, dev, t0)
    if use_fused:
        res.device = fused.describe(res.device)
    return res


def stack_cells(cells: Sequence[Cell]) -> dict:
    """Data and initialization of cells sharing a shape key, stacked on a leading seed axis."""
    if not cells:
        raise ValueError("stack_cells needs at least one cell")
    key = cells[0].shape_key()
    for c in cells[1:]:
        if c.shape_key() != key:
            raise ValueError(
                f"cells must share Cell.shape_key() to train as one batch; seed {c.seed} differs"
            )
    return stack_batch([make_dataset(c) for c in cells], [make_init(c) for c in cells])


def stack_batch(datasets: Sequence, inits: Sequence[dict[str, np.ndarray]]) -> dict:
    """Datasets and initializations stacked on a leading seed axis (keys of train_batch)."""
    V = None if datasets[0].V is None else np.stack([ds.V for ds in datasets])
    return {
        "X": np.stack([ds.X for ds in datasets]),
        "Y": np.stack([ds.Y for ds in datasets]),
        "Z": np.stack([ds.Z for ds in datasets]),
        "v": np.stack([ds.v for ds in datasets]),
        "V": V,
        "init": {k: np.stack([ini[k] for ini in inits]) for k in inits[0]},
    }


def train_cells(cells: Sequence[Cell], device: str = "auto") -> TrainResult:
    """Train cells that share :meth:`Cell.shape_key` as one batch (seed order preserved)."""
    b = stack_cells(cells)
    data = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    return train_batch(*data, cells[0].settings("train"), device=device)
