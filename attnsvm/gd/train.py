"""The one descent loop: every model's training, batched over seeds (docs/science.md §3, §4
regularization path, §8, §10-12).

:func:`train` runs a model of :mod:`attnsvm.gd.model` from its initialization: each step
evaluates ``(loss, s, W, G) = model(params)``, records checkpoint k (W, softmax, loss and the
model's extras) and moves every block of ``params`` by its step rule
(:mod:`attnsvm.gd.optimizers`). S seeds train together as tensors with a leading seed axis;
seeds never interact. The loop never synchronizes with the host: checkpoints go into
on-device buffers, finiteness is tracked on the device, all copied back once at the end.
Seeds that went non-finite are then trained again on their own with the exact freeze
(:func:`descend`). Where the model declares it (``FUSED_FIELDS``, :func:`attnsvm.gd.fused.applies`)
the first pass is the fused loop, one compiled call for all steps of all seeds.

:func:`train_arrays` is the same call from host arrays, for every model and the
regularization path (:func:`train_path`: the loop with a projected step at each radius);
:func:`train_batch` the fixed head's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.cell import Cell
from attnsvm.config.fields import CHOICES
from attnsvm.gd import fused, minibatch, weight_decay
from attnsvm.gd.data import path_radii, stack_cells
from attnsvm.gd.device import describe_device, resolve_device, to_device
from attnsvm.gd.model import (
    MODELS,
    Batch,
    Model,
    Params,
    SingleHead,
    check_choice,
    train_settings,
)
from attnsvm.gd.optimizers import RULES, Ball, Projected, Rule, make_rule

#: how the gradient is computed: hand-derived (the model's call) or autograd (``model.loss``)
GRADIENTS = ("analytic", "autograd")
#: torch dtype of each of the Cell's dtype names
TORCH_DTYPES = {name: getattr(torch, name) for name in CHOICES["dtype"]}


@dataclass
class TrainResult:
    """Checkpointed trajectory of a batch of S seeds (C checkpoints), host float64 arrays."""

    iterations: np.ndarray  # (C,) int: checkpoint k is the state after k steps
    W: np.ndarray  # (S, C, d, d): W(k), or K(k) Q(k)^T for KQ; (S, C, H, d, d) for H heads
    softmax: np.ndarray  # (S, C, n, T), or (S, C, H, n, T)
    loss: np.ndarray  # (S, C)
    wnorm: np.ndarray  # (S, C): ||W(k)||_F (the stacked norm for H heads)
    finite: np.ndarray  # (S,) bool: False if the seed produced a non-finite loss/step
    nonfinite_iteration: np.ndarray  # (S,) int: first bad k (the seed stays at W(k)), -1 if none
    device: str  # e.g. "cpu", "cpu, fused loop" or "cuda:0 (NVIDIA H100 80GB HBM3)"
    seconds: float  # wall time of the whole batch (transfers included)
    v: np.ndarray | None = None  # (S, C, d): v(k) of a trained head


def _check_checkpoints(checkpoints: Sequence[int], iterations: int) -> list[int]:
    ks = [int(k) for k in checkpoints]
    if any(k < 0 or k > iterations for k in ks):
        raise ValueError(f"checkpoints must lie in [0, iterations={iterations}], got {ks}")
    if len(set(ks)) != len(ks) or ks != sorted(ks):
        raise ValueError(f"checkpoints must be strictly increasing, got {ks}")
    return ks


def _seed_dims(block: Tensor) -> tuple[int, ...]:
    """All axes of a block but its seed axis (K and Q stacked: (2, S, d, m); else (S, ...))."""
    return (1, 2) if block.dim() == 3 else (0, 2, 3)


def _zero_if_finite(blocks: Sequence[Tensor]) -> Tensor:
    """``sum(0 * block)`` per seed over every block: exactly 0 where every entry is finite,
    else NaN. ``0 * x`` is +-0 for finite x and NaN for inf or NaN, so unlike a plain sum
    this never overflows: a per-seed finiteness test in two cheap kernels per block."""
    return sum((b * 0.0).sum(_seed_dims(b)) for b in blocks)


def _freeze(alive: Tensor, new: Tensor, old: Tensor) -> Tensor:
    return torch.where(alive.view(-1, 1, 1), new, old)


class _Checkpoints:
    """On-device float64 buffers of the checkpoints ``ks`` of a batch: W, softmax, loss and
    the model's extras, each ``(S, C, ...)``; :meth:`record` writes step k's values into its
    slot when k is a checkpoint (docs/science.md §3, "Record")."""

    def __init__(self, ks: list[int]) -> None:
        self.slot = {k: c for c, k in enumerate(ks)}
        self.buffers: dict[str, Tensor] = {}

    def record(self, k: int, **values: Tensor) -> None:
        if not self.buffers:  # shaped by the first values
            C = len(self.slot)
            self.buffers = {
                name: torch.zeros(
                    (t.shape[0], C, *t.shape[1:]), dtype=torch.float64, device=t.device
                )  # fmt: skip
                for name, t in values.items()
            }
        c = self.slot.get(k)
        if c is not None:
            for name, t in values.items():
                self.buffers[name][:, c] = t


def _ticker(iterations: int, progress: Callable[[int], None] | None) -> Callable[[int], None]:
    """``tick(k)``, called before step k: reports the steps done since the last report to
    ``progress``, about 100 times per run (a host-side counter, no device sync)."""
    every = max(1, iterations // 100)

    def tick(k: int) -> None:
        if progress is not None and k and (k % every == 0 or k == iterations):
            progress(every if k % every == 0 else k % every)

    return tick


def descend(
    model: Any,
    params: Params,
    rules: Sequence[Rule],
    ks: list[int],
    iterations: int,
    *,
    freeze: bool,
    progress: Callable[[int], None] | None = None,
    alive: Tensor | None = None,
) -> tuple[dict[str, Tensor], Tensor, Tensor, Params]:
    """The descent loop: ``iterations`` steps of ``model`` from ``params`` (docs/science.md §3).

    Step k evaluates ``(loss, s, W, G) = model(params(k))``, records checkpoint k and moves
    every block to ``rules[b](params(k)[b], G[b], loss)``. A seed stays alive while its loss,
    softmax and new parameters are finite. The test is one per-seed scalar, ``loss + sum 0 *
    params(k+1)``, finite exactly when both are; the softmax needs no term of its own: ``s <=
    1``, and a NaN anywhere in a row of s makes the whole row NaN, hence the output and the
    loss NaN.

    ``freeze=True``: a seed that fails at step k keeps ``params(k)`` from then on (one masked
    select per step) and gets ``bad_at = k``; ``alive``: the seeds alive before (the others
    stay frozen). ``freeze=False`` skips the select and the per-step test and leaves a failed
    seed's later values meaningless (seeds never interact, so the others are unaffected);
    only ``alive`` is then valid, tested once at the end on the sum of the losses and the
    last parameters: a non-finite loss makes the sum non-finite for good (inf and NaN absorb
    finite terms), and so does a non-finite entry for the parameters. A finite sum that
    overflows would only flag a good seed, which the frozen re-run of :func:`train` then finds
    finite, with the same bits.

    Returns the checkpoint buffers (``W``, ``softmax``, ``loss``, extras; float64), ``alive``,
    ``bad_at`` (-1 where alive) and the last parameters. ``progress(steps)`` is called about
    100 times per run (a host-side counter: it does not synchronize with the device).
    """
    S, dev = model.seeds, params[0].device
    alive = torch.ones(S, dtype=torch.bool, device=dev) if alive is None else alive.clone()
    steps_alive = torch.zeros(S, dtype=torch.int64, device=dev)  # = bad_at once a seed fails
    loss_sum = torch.zeros(S, dtype=params[0].dtype, device=dev)
    buffers, tick = _Checkpoints(ks), _ticker(iterations, progress)
    for k in range(iterations + 1):
        tick(k)
        last = k == iterations
        loss, s, W, G = model(params, not last)
        buffers.record(k, W=W, softmax=s, loss=loss, **model.extras(params))
        if not freeze:
            loss_sum += loss
            if last:
                break
            params = [rule(p, g, loss) for rule, p, g in zip(rules, params, G, strict=True)]
            continue
        probe = loss
        if not last:
            new = [rule(p, g, loss) for rule, p, g in zip(rules, params, G, strict=True)]
            probe = loss + _zero_if_finite(new)
        alive &= (probe - probe) == 0.0  # probe is finite
        if last:
            break
        steps_alive += alive
        params = [_freeze(alive, n, p) for n, p in zip(new, params, strict=True)]
    if not freeze:
        probe = loss_sum + _zero_if_finite(params)
        alive &= (probe - probe) == 0.0
        steps_alive.zero_()
    return buffers.buffers, alive, torch.where(alive, -1, steps_alive), params


class _Autograd:
    """A model whose gradient is autograd's through ``model.loss`` (comparisons only)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def select(self, sel: Tensor) -> _Autograd:
        return _Autograd(self.model.select(sel))

    def __call__(self, params: Params, grad: bool = True) -> tuple:
        leaves = [p.detach().requires_grad_(grad) for p in params]
        with torch.enable_grad():
            loss, s = self.model.loss(leaves)
            G = list(torch.autograd.grad(loss.sum(), leaves)) if grad else None
        return loss.detach(), s.detach(), self.model.combined(leaves[0]).detach(), G


def _seeds(block: Tensor, sel: Tensor) -> Tensor:
    return block[:, sel] if block.dim() == 4 else block[sel]


def _check_arguments(settings: Any, gradient: str) -> tuple[int, list[int]]:
    """``(iterations, checkpoints)`` of a :func:`train` call, checked.

    A :class:`Cell` validates its own fields; these checks are for direct library callers
    (benchmarks, tests), whose arrays and choices no Cell has seen, and they protect the
    loop's invariants (one buffer slot per checkpoint, in order)."""
    for name in ("param", "optimizer", "dtype"):
        check_choice(name, settings[name], CHOICES[name])
    check_choice("gradient", gradient, GRADIENTS)
    iterations = settings.iterations
    if not (isinstance(iterations, int | np.integer) and iterations >= 0):
        raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
    iterations = int(iterations)
    return iterations, _check_checkpoints(settings.checkpoints, iterations)


def train(
    model: Model,
    init: dict[str, Any],
    *,
    gradient: str = "analytic",
    eps: float | None = None,
    head_lr: float | None = None,
    progress: Callable[[int], None] | None = None,
    t0: float | None = None,
    seeds: Sequence[int] | None = None,
) -> TrainResult:
    """Train ``model`` from ``init`` (``{"W"}`` or ``{"K", "Q"}`` tensors on its device) with
    its settings' optimizer, step size, iterations and checkpoints (docs/science.md §3).

    Every block moves by its rule of ``settings.optimizer`` (:data:`attnsvm.gd.optimizers.RULES`)
    at step size ``lr``, a trained head's v at ``head_lr`` (default ``lr``); ``eps``: the
    normalized step's (default the dtype's smallest normal number: normalization is exact
    whenever G != 0, a zero gradient gives a zero step). At each checkpoint k (after k steps;
    0 = the initialization) W(k) (K Q^T for KQ), softmax, loss, ``||W(k)||_F`` and the
    model's extras are recorded. A seed whose loss or step becomes non-finite at step k is
    frozen there and flagged with ``nonfinite_iteration = k``; other seeds are unaffected.
    The first pass only tracks finiteness (on the device, no host sync); after it, the seeds
    that failed are trained again on their own with the per-step freeze (one host sync per
    call, none per step). ``gradient="autograd"`` differentiates ``model.loss`` instead (same
    numbers to rounding, slower); ``progress(steps)`` is called as the first pass advances.
    The settings' ``init_scale`` multiplies the initial matrices, ``weight_decay`` adds its
    penalty to the loss (:mod:`attnsvm.gd.weight_decay`; docs/science.md §3, §4 "Weight
    decay") and ``batch_size`` makes each step's gradient a mini-batch's
    (:mod:`attnsvm.gd.minibatch`, whose draws need each trained seed's cell ``seeds``;
    §10 "Mini-batches"); at their defaults nothing changes.
    """
    t0 = time.perf_counter() if t0 is None else t0
    o = model.settings
    iterations, ks = _check_arguments(o, gradient)
    if o.optimizer not in RULES:
        raise ValueError(f"optimizer must be one of {', '.join(RULES)}, got {o.optimizer!r}")
    params0 = model.params(init)
    if o.init_scale != 1.0:  # before either loop: the fused loop computes with it
        params0 = [params0[0] * o.init_scale, *params0[1:]]
    dev = params0[0].device
    eps = float(torch.finfo(params0[0].dtype).tiny) if eps is None else float(eps)
    lrs = [o.lr, o.lr if head_lr is None else head_lr][: len(params0)]

    def rules(m: Any) -> list[Rule]:  # fresh per pass: some rules keep state
        return [make_rule(o.optimizer, lr, eps, o, m) for lr in lrs]

    use_fused, left_out = fused.decide(model, gradient)
    objective = weight_decay.wrap(minibatch.wrap(model, o, seeds), o)
    no_autograd = torch.inference_mode if gradient == "analytic" else torch.no_grad
    with no_autograd():
        m = objective if gradient == "analytic" else _Autograd(objective)
        if use_fused:
            bufs, alive, bad_at = fused.train(model, params0[0], ks, iterations, eps, progress)
        else:
            bufs, alive, bad_at, _ = descend(m, params0, rules(m), ks, iterations,
                                             freeze=False, progress=progress)  # fmt: skip
        if not bool(alive.all()):
            sel = torch.nonzero(~alive).squeeze(1)
            sub = m.select(sel)
            again, a2, b2, _ = descend(sub, [_seeds(p, sel) for p in params0], rules(sub), ks,
                                       iterations, freeze=True)  # fmt: skip
            for name, buf in bufs.items():
                buf[sel] = again[name]
            alive[sel], bad_at[sel] = a2, b2
        res = host_result(np.asarray(ks, dtype=np.int64), bufs, alive, bad_at, dev, t0)
    if use_fused:
        res.device = fused.describe(res.device)
    elif left_out:
        res.device = fused.describe_left_out(res.device, left_out)
    return res


def host_result(
    iterations: np.ndarray,
    buffers: dict[str, Tensor],
    alive: Tensor,
    bad_at: Tensor,
    device: torch.device,
    t0: float,
) -> TrainResult:
    """A :class:`TrainResult` from the on-device buffers (one copy back to the host); ``t0``
    is the ``time.perf_counter()`` at which the call began."""
    W = buffers["W"]
    wnorm = torch.linalg.vector_norm(W, dim=tuple(range(2, W.dim())))
    host = {k: t.cpu().numpy() for k, t in buffers.items()}
    alive_np, bad_np, wnorm_np = alive.cpu().numpy(), bad_at.cpu().numpy(), wnorm.cpu().numpy()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return TrainResult(
        iterations=iterations,
        W=host["W"],
        softmax=host["softmax"],
        loss=host["loss"],
        wnorm=wnorm_np,
        finite=alive_np.astype(bool),
        nonfinite_iteration=bad_np.astype(np.int64),
        device=describe_device(device),
        seconds=time.perf_counter() - t0,
        v=host.get("v"),
    )


def train_path(model: SingleHead, init: dict[str, Tensor], radii: np.ndarray, t0: float):
    """The regularization path of docs/science.md §4: at each radius R (one "checkpoint"
    each, ``iterations`` 1..C) ``iterations`` steps of the descent loop with the projected
    step (:class:`attnsvm.gd.optimizers.Projected`), from the last radius's answer scaled
    onto the sphere; ``W_R / R -> W_mm / ||W_mm||_F`` (K Q^T: the nuclear SVM) as R grows.

    No ridge (the ball bounds the norm); each radius ends at its last iterate (the loss
    cannot rank iterates at large R: its changes fall below float64 rounding long before the
    direction has converged, while the gradient, computed relative to the top token, stays
    accurate). A seed whose loss or step becomes non-finite keeps its last finite P, with
    ``nonfinite_iteration`` the index of that radius."""
    (P,) = model.params(init)
    S, dev = model.seeds, P.device
    ball = Ball(model.param, S, float(torch.finfo(P.dtype).tiny))
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad_at = torch.full((S,), -1, dtype=torch.int64, device=dev)
    records: dict[str, list[Tensor]] = {"W": [], "softmax": [], "loss": []}
    with torch.no_grad():
        for c, R in enumerate(radii):
            P = ball.project(P, float(R), onto=True)
            rule = Projected(model.settings.lr, ball, float(R))
            _, now, _, (P,) = descend(model, [P], [rule], [], model.settings.iterations,
                                      freeze=True, alive=alive)  # fmt: skip
            bad_at = torch.where(alive & ~now, c, bad_at)
            alive = now
            loss, s = model.loss([P])
            for name, t in (("W", model.combined(P)), ("softmax", s), ("loss", loss)):
                records[name].append(t.to(torch.float64))
        buffers = {k: torch.stack(v, dim=1) for k, v in records.items()}
        its = np.arange(1, len(radii) + 1, dtype=np.int64)
        return host_result(its, buffers, alive, bad_at, dev, t0)


#: what :func:`train_arrays` trains: a model of :data:`attnsvm.gd.model.MODELS`, or the
#: regularization path of the single head
KINDS = (*MODELS, "path")


def train_arrays(
    kind: str,
    arrays: dict[str, Any],
    init: dict[str, np.ndarray],
    settings: Any = None,
    *,
    device: str = "auto",
    eps: float | None = None,
    ridge: float | None = None,
    stable: bool = True,
    gradient: str = "analytic",
    head_lr: float | None = None,
    progress: Callable[[int], None] | None = None,
    seeds: Sequence[int] | None = None,
    **fields: Any,
) -> TrainResult:
    """:func:`train` of a ``kind`` of model (:data:`KINDS`) from host ``arrays`` with a leading
    seed axis (the :class:`attnsvm.gd.model.Batch` fields: X (S,n,T,d), Y (S,n), Z (S,n,d),
    v (S,d), V (S,d,d) of the relu head, mask (S,n,T) of causal attention, label (S,n,T) of
    next-token prediction), moved to ``device`` in the settings' dtype. ``init``: ``{"W":
    (S,d,d)}`` or ``{"K", "Q": (S,d,m)}``, with a head axis after S for multi-head
    attention (whose ``heads`` follows it). ``settings``: a cell's ``train`` settings, taken
    whole; a library call may give fields as keywords instead (``param="W", lr=0.1,
    checkpoints=[0, 10]``). ``head_lr``: the trained head's step (default ``lr``; 0: the
    fixed head's run, bit for bit); ``stable=False``: the textbook attended token
    (comparisons only); ``seeds``: each trained seed's cell seed (the mini-batch draws); the
    rest as :func:`train`."""
    t0 = time.perf_counter()
    check_choice("kind", kind, KINDS)
    o = train_settings(settings, **fields)
    if kind == "multi_head":
        o = o.replace(heads=next(iter(init.values())).shape[1])
    if kind == "path":
        o, ridge = o.replace(head="linear", lam=0.0), 0.0
    if head_lr is not None and not (np.isfinite(head_lr) and head_lr >= 0):
        raise ValueError(f"head_lr must be a non-negative finite number, got {head_lr!r}")
    check_choice("dtype", o.dtype, CHOICES["dtype"])
    dev, dtype = resolve_device(device), TORCH_DTYPES[o.dtype]
    model_cls = SingleHead if kind == "path" else MODELS[kind]
    model = model_cls(Batch.of(dev, dtype, **arrays), o, ridge=ridge, stable=stable)
    init_t = {k: to_device(a, dev, dtype) for k, a in init.items()}
    if kind == "path":
        return train_path(model, init_t, path_radii(o), t0)
    return train(model, init_t, gradient=gradient, eps=eps, head_lr=head_lr, progress=progress,
                 t0=t0, seeds=seeds)  # fmt: skip


def train_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    V: np.ndarray | None,
    init: dict[str, np.ndarray],
    settings: Any = None,
    *,
    mask: np.ndarray | None = None,
    **options: Any,
) -> TrainResult:
    """:func:`train_arrays` of the fixed-head model (:class:`attnsvm.gd.model.SingleHead`,
    docs/science.md §2-3): the paper's normalized GD on W or (K, Q)."""
    arrays = {"X": X, "Y": Y, "Z": Z, "v": v, "V": V, "mask": mask}
    return train_arrays("single_head", arrays, init, settings, **options)


def train_cells(cells: Sequence[Cell], device: str = "auto") -> TrainResult:
    """Train cells that share :meth:`Cell.shape_key` as one batch (seed order preserved)."""
    b = stack_cells(cells)
    data = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    return train_batch(*data, cells[0].settings("train"), device=device,
                       seeds=[c.seed for c in cells])  # fmt: skip
