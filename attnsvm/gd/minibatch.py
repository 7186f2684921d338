"""Mini-batch training: which examples each step of the descent loop uses (docs/science.md
§10, "Mini-batches").

A cell with ``batch_size`` b (< n, or = n) trains by random reshuffling: for each seed, epoch e
is a permutation of the n examples, ``numpy.random.default_rng(numpy.random.SeedSequence([seed,
MINIBATCH_STREAM])).permutation(n)`` (stream 4, :data:`attnsvm.gd.data.MINIBATCH_STREAM`),
one draw per epoch in epoch order; it is cut into ``B = ceil(n / b)`` consecutive batches (the
last one smaller when b does not divide n), and step k (k = 0, 1, ...) uses batch ``k mod B``
of epoch ``k // B``. The draws depend on the seed alone, never on the batch of seeds a cell
trains in or on its block, so a cell regenerates bit for bit.

The step's gradient is that of the mean loss over its batch, ``(1/|B|) sum_{i in B} l_i`` (plus
the ridge and the weight decay, which are not per example): the full-batch gradient with the
example weights ``w_i = n / |B|`` on the batch and 0 elsewhere, applied to ``dL/df_i``
(:attr:`attnsvm.gd.model.SingleHead.example_weights`). With b = n every weight is exactly 1,
so the trajectory is the full batch's in the same loop, bit for bit (a cell with a batch size
trains in the torch loop, whose rounding differs from the fused loop's). The checkpoints
record the full-batch loss and softmax (what the metrics of §5 measure). A step costs the
full batch's (every example is evaluated): at the paper's sizes a step is per-operation
overhead, not arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.gd.data import MINIBATCH_STREAM


def epoch_batches(seed: int, n: int, batch_size: int, epochs: int) -> list[list[np.ndarray]]:
    """The batches (index arrays, in step order) of the first ``epochs`` epochs of one seed:
    the recipe of the module docstring, for tests and readers regenerating a cell."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), MINIBATCH_STREAM]))
    out = []
    for _ in range(epochs):
        perm = rng.permutation(n)
        out.append([perm[j : j + batch_size] for j in range(0, n, batch_size)])
    return out


class Sampler:
    """The example weights of every step of S seeds (module docstring), drawn one epoch at a
    time: ``sampler.next()`` is step k's (S, n, 1) weights for k = 0, 1, ... in turn."""

    def __init__(
        self, seeds: Sequence[int], n: int, batch_size: int, device: Any, dtype: torch.dtype
    ) -> None:
        if not 1 <= batch_size <= n:
            raise ValueError(f"batch_size must be an integer in [1, n={n}], got {batch_size!r}")
        self.seeds, self.n, self.b = [int(s) for s in seeds], n, int(batch_size)
        self.device, self.dtype = device, dtype
        self.rngs = [
            np.random.default_rng(np.random.SeedSequence([s, MINIBATCH_STREAM])) for s in self.seeds
        ]
        self.per_epoch = -(-n // self.b)
        self.k = 0
        self.epoch: Tensor | None = None

    def _draw_epoch(self) -> Tensor:
        """(B, S, n, 1) weights of the next epoch's batches."""
        w = np.zeros((self.per_epoch, len(self.seeds), self.n), dtype=np.float64)
        for s, rng in enumerate(self.rngs):
            perm = rng.permutation(self.n)
            for j in range(self.per_epoch):
                batch = perm[j * self.b : (j + 1) * self.b]
                w[j, s, batch] = self.n / len(batch)
        return torch.as_tensor(w[..., None]).to(self.device, self.dtype)

    def next(self) -> Tensor:
        """Step k's example weights (S, n, 1); advances k."""
        j = self.k % self.per_epoch
        if j == 0:
            self.epoch = self._draw_epoch()
        self.k += 1
        return self.epoch[j]

    def select(self, sel: Tensor) -> Sampler:
        """A fresh sampler (from step 0) of the seeds ``sel``."""
        idx = [int(i) for i in sel.tolist()]
        return Sampler([self.seeds[i] for i in idx], self.n, self.b, self.device, self.dtype)


class MiniBatch:
    """A model whose gradient at step k is that of step k's batch (module docstring); loss,
    softmax and W are the full batch's. Everything else is the model's."""

    def __init__(self, model: Any, sampler: Sampler) -> None:
        self.model, self.sampler = model, sampler

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def select(self, sel: Tensor) -> MiniBatch:
        return MiniBatch(self.model.select(sel), self.sampler.select(sel))

    def __call__(self, params: list[Tensor], grad: bool = True) -> tuple:
        if not grad:
            return self.model(params, grad)
        self.model.example_weights = self.sampler.next()
        try:
            return self.model(params, grad)
        finally:
            self.model.example_weights = None

    def loss(self, params: list[Tensor]) -> Any:
        raise ValueError(
            "mini-batch training computes its gradient by hand (gradient='analytic'): the "
            "batch weights enter dL/df_i, not the autograd loss"
        )


def wrap(model: Any, settings: Any, seeds: Sequence[int] | None) -> Any:
    """``model`` trained on the settings' mini-batches (``batch_size``), or ``model`` itself at
    the full batch (None): the default leaves every bit unchanged."""
    b = settings.batch_size
    if b is None:
        return model
    if seeds is None or len(seeds) != model.seeds:
        raise ValueError(
            f"mini-batch training needs the seed of each of the {model.seeds} trained seeds "
            f"(their draws, docs/science.md 10), got {seeds!r}"
        )
    if not hasattr(model, "example_weights"):
        raise ValueError(f"batch_size needs a model with example weights, got {type(model)}")
    X = model.batch.X
    return MiniBatch(model, Sampler(seeds, X.shape[1], b, X.device, X.dtype))
