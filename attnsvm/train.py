"""Batched full-batch gradient descent on attention (SCIENCE.md section 3).

S seeds of one shape train together as tensors with a leading seed axis; seeds never interact.
The loop never synchronizes with the host: checkpoints are written into on-device buffers and a
seed that goes non-finite is frozen by an on-device mask, all copied back once at the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnsvm.cell import Cell
from attnsvm.data import make_dataset, make_init
from attnsvm.device import describe_device, resolve_device
from attnsvm.model import PARAMS, RIDGE, combined_matrix, loss_and_grad, loss_fn

OPTIMIZERS = ("normalized", "plain")
GRADIENTS = ("analytic", "autograd")
_DTYPES = {"float64": torch.float64, "float32": torch.float32}


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
    device: str  # e.g. "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3)"
    seconds: float  # wall time of the whole batch (transfers included)


def _check_checkpoints(checkpoints: Sequence[int], iterations: int) -> list[int]:
    ks = [int(k) for k in checkpoints]
    if any(k < 0 or k > iterations for k in ks):
        raise ValueError(f"checkpoints must lie in [0, iterations={iterations}], got {ks}")
    if len(set(ks)) != len(ks) or ks != sorted(ks):
        raise ValueError(f"checkpoints must be strictly increasing, got {ks}")
    return ks


def _normalized(G: Tensor, eps: float) -> Tensor:
    """``G / (||G||_F + eps)`` per seed, evaluated as ``(G/m) / (||G/m||_F + eps/m)``.

    ``m = max |G|`` per seed, so squaring neither underflows (tiny gradients near saturation)
    nor overflows; exactly 0 where G = 0.
    """
    m = G.abs().amax(dim=(-2, -1), keepdim=True)
    m = torch.where(m > 0, m, torch.ones_like(m))
    Gs = G / m
    nrm = (Gs * Gs).sum(dim=(-2, -1), keepdim=True).sqrt()
    return Gs / (nrm + eps / m)


def _all_finite(t: Tensor) -> Tensor:
    """Per-seed ``all(isfinite)`` over every axis but the first, shape (S,)."""
    return torch.isfinite(t).flatten(1).all(dim=1)


def train_batch(
    X: np.ndarray,
    Y: np.ndarray,
    Z: np.ndarray,
    v: np.ndarray,
    V: np.ndarray | None,
    init: dict[str, np.ndarray],
    *,
    param: str,
    head: str,
    lam: float,
    optimizer: str,
    lr: float,
    iterations: int,
    checkpoints: Sequence[int],
    dtype: str = "float64",
    device: str = "auto",
    eps: float | None = None,
    ridge: float = RIDGE,
    stable: bool = True,
    gradient: str = "analytic",
    mask: np.ndarray | None = None,
) -> TrainResult:
    """Full-batch GD on S independent seeds (SCIENCE.md section 3).

    Inputs are host arrays with a leading seed axis (X (S,n,T,d), Y (S,n), Z (S,n,d), v (S,d),
    V (S,d,d) or None; init ``{"W": (S,d,d)}`` or ``{"K": (S,d,m), "Q": (S,d,m)}``), moved to
    ``device`` in ``dtype``. Each step, per seed:

    - normalized: ``W <- W - lr G / (||G||_F + eps)`` (K and Q normalized separately),
    - plain: ``W <- W - lr G``,

    with G the gradient of that seed's loss (KQ adds ``ridge (||K||_F^2 + ||Q||_F^2)``).
    ``eps`` defaults to the dtype's smallest normal number (normalization is exact whenever
    G != 0; a zero gradient gives a zero step). At each checkpoint k (after k steps; 0 = the
    initialization) W(k) (K Q^T for KQ), softmax, loss and ``||W(k)||_F`` are recorded.

    A seed whose loss or step becomes non-finite at W(k) is frozen there (update masked,
    on-device, no host sync) and flagged with ``nonfinite_iteration = k``; other seeds are
    unaffected. ``stable=False`` uses the textbook attended token (SCIENCE.md §3, comparisons
    only); ``gradient="autograd"`` differentiates :func:`attnsvm.model.loss_fn` instead of
    the hand-derived gradient (same numbers to rounding, slower). ``mask`` (S, n, T) bool
    restricts each example's attention to its True tokens (causal attention; None: all).
    """
    if param not in PARAMS:
        raise ValueError(f"param must be one of {', '.join(PARAMS)}, got {param!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    if gradient not in GRADIENTS:
        raise ValueError(f"gradient must be one of {', '.join(GRADIENTS)}, got {gradient!r}")
    names = ("W",) if param == "W" else ("K", "Q")
    if set(init) != set(names):
        raise ValueError(f"init for param {param!r} needs keys {names}, got {sorted(init)}")
    if not (isinstance(iterations, int | np.integer) and iterations >= 0):
        raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
    iterations = int(iterations)
    ks = _check_checkpoints(checkpoints, iterations)

    t0 = time.perf_counter()
    dev = resolve_device(device)
    tdt = _DTYPES[dtype]
    eps = float(torch.finfo(tdt).tiny) if eps is None else float(eps)

    def put(a: np.ndarray) -> Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64)).to(device=dev, dtype=tdt)

    Xt, Yt, Zt, vt = put(X), put(Y), put(Z), put(v)
    Vt = None if V is None else put(V)
    P = {k: put(init[k]) for k in names}
    S, n, T, d = Xt.shape
    C = len(ks)
    kw = {"param": param, "head": head, "lam": float(lam), "ridge": ridge, "stable": stable}
    if mask is not None:
        kw["mask"] = torch.as_tensor(np.asarray(mask, dtype=bool)).to(device=dev)

    f64 = torch.float64
    W_buf = torch.zeros((S, C, d, d), dtype=f64, device=dev)
    sm_buf = torch.zeros((S, C, n, T), dtype=f64, device=dev)
    loss_buf = torch.zeros((S, C), dtype=f64, device=dev)
    alive = torch.ones(S, dtype=torch.bool, device=dev)
    bad_at = torch.full((S,), -1, dtype=torch.int64, device=dev)
    slot = {k: c for c, k in enumerate(ks)}

    def evaluate(want_grad: bool) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        if gradient == "analytic":
            if want_grad:
                return loss_and_grad(P, Xt, Yt, Zt, vt, Vt, **kw)
            with torch.no_grad():
                loss, s = loss_fn(P, Xt, Yt, Zt, vt, Vt, **kw)
            return loss, s, {}
        if not want_grad:
            with torch.no_grad():
                loss, s = loss_fn(P, Xt, Yt, Zt, vt, Vt, **kw)
            return loss, s, {}
        leaves = {k: p.detach().requires_grad_(True) for k, p in P.items()}
        with torch.enable_grad():
            loss, s = loss_fn(leaves, Xt, Yt, Zt, vt, Vt, **kw)
            grads = torch.autograd.grad(loss.sum(), [leaves[k] for k in names])
        return loss.detach(), s.detach(), dict(zip(names, grads, strict=True))

    with torch.no_grad():
        for k in range(iterations + 1):
            last = k == iterations
            loss, s, G = evaluate(want_grad=not last)
            ok = torch.isfinite(loss) & _all_finite(s)
            c = slot.get(k)
            if c is not None:
                W_buf[:, c] = combined_matrix(P, param).to(f64)
                sm_buf[:, c] = s.to(f64)
                loss_buf[:, c] = loss.to(f64)
            if last:
                newly_bad = alive & ~ok
                bad_at = torch.where(newly_bad, torch.full_like(bad_at, k), bad_at)
                alive = alive & ok
                break
            new = {}
            for name in names:
                step = _normalized(G[name], eps) if optimizer == "normalized" else G[name]
                new[name] = P[name] - lr * step
                ok = ok & _all_finite(new[name])
            newly_bad = alive & ~ok
            bad_at = torch.where(newly_bad, torch.full_like(bad_at, k), bad_at)
            alive = alive & ok
            mask = alive.view(S, 1, 1)
            P = {name: torch.where(mask, new[name], P[name]) for name in names}

        wnorm_buf = torch.linalg.vector_norm(W_buf, dim=(-2, -1))
        out = [t.cpu().numpy() for t in (W_buf, sm_buf, loss_buf, wnorm_buf, alive, bad_at)]
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    W_np, sm_np, loss_np, wnorm_np, alive_np, bad_np = out
    return TrainResult(
        iterations=np.asarray(ks, dtype=np.int64),
        W=W_np,
        softmax=sm_np,
        loss=loss_np,
        wnorm=wnorm_np,
        finite=alive_np.astype(bool),
        nonfinite_iteration=bad_np.astype(np.int64),
        device=describe_device(dev),
        seconds=time.perf_counter() - t0,
    )


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
    return train_stacked(stack_cells(cells), cells[0], device=device)


def train_stacked(batch: dict, cell: Cell, device: str = "auto", **extra) -> TrainResult:
    """:func:`train_batch` on a :func:`stack_batch` batch with ``cell``'s training settings."""
    return train_batch(
        batch["X"],
        batch["Y"],
        batch["Z"],
        batch["v"],
        batch["V"],
        batch["init"],
        param=cell.param,
        head=cell.head,
        lam=cell.lam,
        optimizer=cell.optimizer,
        lr=cell.lr,
        iterations=cell.iterations,
        checkpoints=cell.checkpoints(),
        dtype=cell.dtype,
        device=device,
        **extra,
    )
