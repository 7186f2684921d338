"""CPU and CUDA compute the same cells (issue 32): trajectories, selections, SVM inputs and
answers, metrics, for W and KQ, every head, attention and task, float64 and float32.

The comparison (:func:`assert_agree`) runs everywhere on two CPU runs (it must accept
identical results and reject a changed selection); the CUDA runs need a GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.tasks import run_cells
from attnsvm.tasks.metrics import corr

E2 = {"n": 6, "T": 8, "d": 10}
#: one case per head, attention, task, optimizer family, generator family and dtype (the
#: default sweep's experiments at fewer iterations)
CASES = {
    "linear-W": {"param": "W", **E2, "iterations": 300},
    "linear-KQ": {"param": "KQ", **E2, "iterations": 300},
    "relu": {"generator": "relu", "head": "relu", "n": 3, "T": 4, "d": 4, "iterations": 300},
    "lambda": {"generator": "orthonormal", "head": "lambda", "n": 4, "T": 4, "d": 8,
               "lam": 0.3, "iterations": 300},
    "self-KQ": {"attention": "self", "param": "KQ", "n": 4, "T": 5, "d": 8, "iterations": 300},
    "sequence": {"attention": "sequence", "n": 4, "T": 5, "d": 8, "iterations": 300},
    "causal": {"attention": "causal", "n": 4, "T": 5, "d": 8, "iterations": 300},
    "regpath": {"task": "regpath", "n": 4, "T": 5, "d": 8, "iterations": 100,
                "checkpoint_count": 5, "radius_min": 0.3, "radius_max": 100.0},
    "ntp": {"task": "ntp", "generator": "ntp_acyclic", "n": 8, "T": 4, "K": 8, "d": 10,
            "iterations": 300},
    "adam": {"optimizer": "adam", "n": 4, "T": 5, "d": 6, "lr": 0.05, "iterations": 200,
             "norm_svms": True},
    "heads-2": {"heads": 2, **E2, "iterations": 300},
    "train-head": {"train_head": True, "n": 6, "T": 8, "d": 8, "iterations": 300},
    "digits": {"generator": "digits", "n": 4, "patch": 2, "iterations": 200},
    "float32-W": {"param": "W", **E2, "iterations": 300, "dtype": "float32"},
    "float32-KQ": {"param": "KQ", **E2, "iterations": 300, "dtype": "float32"},
}  # fmt: skip
SEEDS = 3


def cells_of(case: str) -> list[Cell]:
    return [Cell(seed=s, **CASES[case]) for s in range(SEEDS)]


def assert_agree(a, b, float32: bool) -> None:
    """Results ``a`` (the reference) and ``b`` of the same cells agree: status, selection, the
    SVMs solved, the trajectory (to rounding; float32: in direction) and every scalar."""
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        where = f"{ra.cell.task} {ra.cell.head} {ra.cell.param} seed {ra.cell.seed}"
        assert ra.status == rb.status == "ok", (where, ra.message, rb.message)
        assert np.array_equal(ra.iterations, rb.iterations), where
        assert np.array_equal(ra.opt, rb.opt), where
        assert np.array_equal(ra.alpha, rb.alpha), where
        assert sorted(ra.svms) == sorted(rb.svms), where
        assert ra.convergence == rb.convergence, where
        last_a, last_b = ra.W[-1], rb.W[-1]
        if float32:
            assert corr(last_a, last_b) > 0.999, where
            continue
        scale = np.nanmax(np.abs(ra.W))
        assert np.nanmax(np.abs(ra.W - rb.W)) <= 1e-6 * scale, where
        assert np.allclose(ra.softmax, rb.softmax, rtol=0, atol=1e-7, equal_nan=True), where
        for key, svm in ra.svms.items():
            other = rb.svms[key]
            if svm.W is None or other.W is None:
                assert svm.W is None and other.W is None, (where, key)
            elif np.abs(svm.W).max() > 0:
                assert corr(svm.W, other.W) > 1 - 1e-6, (where, key)
            else:  # a zero answer (e.g. W_fin of a cell without a log-ratio equation)
                assert np.abs(other.W).max() <= 1e-9, (where, key)
        assert sorted(ra.scalars) == sorted(rb.scalars), where
        for key, va in ra.scalars.items():
            vb = rb.scalars[key]
            assert np.isclose(va, vb, rtol=1e-5, atol=1e-6, equal_nan=True), (where, key, va, vb)


@pytest.mark.slow
def test_the_comparison_accepts_equal_runs_and_rejects_a_changed_selection():
    cells = cells_of("linear-W")
    a, b = run_cells(cells, device="cpu"), run_cells(cells, device="cpu")
    assert_agree(a, b, float32=False)
    b[1] = dataclasses.replace(b[1], alpha=(b[1].alpha + 1) % b[1].cell.T)
    with pytest.raises(AssertionError):
        assert_agree(a, b, float32=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", list(CASES))
def test_cpu_and_cuda_compute_the_same_cells(case):
    cells = cells_of(case)
    cpu = run_cells(cells, device="cpu")
    gpu = run_cells(cells, device="cuda")
    assert all(r.device.startswith("cuda") for r in gpu)
    assert_agree(cpu, gpu, float32=CASES[case].get("dtype") == "float32")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", ["linear-W", "linear-KQ", "relu", "causal"])
def test_a_cuda_seed_has_the_same_bits_alone_and_in_a_batch(case):
    """Blocks may pack a cell with any others: on the GPU too, the torch loop must give a
    seed the same bits alone, in a small batch and in a large one (docs/science.md §3)."""
    cells = [Cell(seed=s, **CASES[case]) for s in range(300)]
    whole = run_cells(cells, device="cuda")
    for pick in ([0], [137], [5, 3, 299], list(range(40, 47))):
        part = run_cells([cells[s] for s in pick], device="cuda")
        for s, r in zip(pick, part, strict=True):
            assert np.array_equal(r.W, whole[s].W, equal_nan=True), (case, pick, s)
            assert np.array_equal(r.softmax, whole[s].softmax, equal_nan=True), (case, pick, s)
