"""Mini-batch training (docs/science.md §10, "Mini-batches"): the draws follow the recipe and
depend on the seed alone, a step's gradient is its batch's, and the full batch is the
full-batch run bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.config.errors import CellError
from attnsvm.gd.data import MINIBATCH_STREAM
from attnsvm.gd.minibatch import Sampler, epoch_batches
from attnsvm.gd.model import loss_and_grad
from attnsvm.gd.train import stack_cells, train_batch, train_cells

SMALL = {"n": 5, "T": 4, "d": 4}


def test_the_draws_follow_the_recipe_of_the_docs():
    """Epoch e of seed s is a permutation of default_rng(SeedSequence([s, 4])), drawn in
    epoch order and cut into consecutive batches (the last one smaller); the sampler's
    weights are n / |B| on step k's batch and 0 elsewhere."""
    n, b, seeds = 5, 2, [7, 3]
    assert MINIBATCH_STREAM == 4
    rng = np.random.default_rng(np.random.SeedSequence([7, 4]))
    perms = [rng.permutation(n) for _ in range(3)]
    batches = epoch_batches(7, n, b, 3)
    for perm, epoch in zip(perms, batches, strict=True):
        assert [list(x) for x in epoch] == [list(perm[0:2]), list(perm[2:4]), list(perm[4:5])]
    sampler = Sampler(seeds, n, b, "cpu", torch.float64)
    flat = {s: [x for e in epoch_batches(s, n, b, 3) for x in e] for s in seeds}
    for k in range(9):
        w = sampler.next()[..., 0].numpy()
        for i, s in enumerate(seeds):
            want = np.zeros(n)
            want[flat[s][k]] = n / len(flat[s][k])
            np.testing.assert_array_equal(w[i], want)


def test_a_step_descends_its_batchs_mean_loss():
    """One plain-GD step of size 1 from W0 with batch size b moves W by the gradient of the
    mean loss over the batch alone (the model built on those examples only)."""
    cell = Cell(seed=2, optimizer="plain", lr=1.0, iterations=1, batch_size=2, **SMALL)
    b = stack_cells([cell])
    res = train_batch(b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"], param="W",
                      optimizer="plain", lr=1.0, iterations=1, checkpoints=[0, 1],
                      batch_size=2, seeds=[2], device="cpu")  # fmt: skip
    batch = epoch_batches(2, SMALL["n"], 2, 1)[0][0]
    t = {k: torch.as_tensor(np.asarray(b[k][:, batch], np.float64)) for k in ("X", "Y", "Z")}
    W0 = torch.as_tensor(np.asarray(b["init"]["W"], np.float64))
    v = torch.as_tensor(np.asarray(b["v"], np.float64))
    _, _, G = loss_and_grad({"W": W0}, t["X"], t["Y"], t["Z"], v, None, param="W")
    np.testing.assert_allclose(res.W[0, 0], W0[0].numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(res.W[0, 1], (W0 - G["W"])[0].numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_the_full_batch_is_the_full_batch_run_bit_for_bit(param):
    full = [Cell(seed=s, param=param, optimizer="sign", iterations=60, **SMALL) for s in (0, 1)]
    mini = [c.replace(batch_size=SMALL["n"]) for c in full]
    a, b = train_cells(full, device="cpu"), train_cells(mini, device="cpu")
    assert np.array_equal(a.W, b.W) and np.array_equal(a.loss, b.loss)


def test_a_seeds_draws_do_not_depend_on_its_batch_of_seeds():
    cells = [Cell(seed=s, batch_size=2, optimizer="plain", iterations=80, **SMALL) for s in (4, 9)]
    together = train_cells(cells, device="cpu")
    alone = train_cells(cells[1:], device="cpu")
    assert np.array_equal(together.W[1], alone.W[0])
    other = train_cells([cells[1].replace(batch_size=3)], device="cpu")
    assert not np.array_equal(other.W[0], alone.W[0])


def test_the_default_keeps_every_cell_and_bad_batch_sizes_are_refused():
    cell = Cell(**SMALL)
    assert "batch_size" not in cell.to_dict()
    assert cell.replace(batch_size=None).digest() == cell.digest()
    with pytest.raises(CellError, match=r"batch_size must be an integer in \[1, n=5\]"):
        Cell(batch_size=6, **SMALL)
    with pytest.raises(CellError, match="batch_size must be"):
        Cell(batch_size=0, **SMALL)
    for bad in ({"heads": 2}, {"train_head": True}, {"optimizer": "polyak"},
                {"attention": "causal"}):  # fmt: skip
        with pytest.raises(CellError, match="batch_size needs"):
            Cell(batch_size=2, **bad, **SMALL)
