"""The GPU's fused loop (fused_cuda.cu; docs/science.md §3, "Fused step").

Its arithmetic is checked everywhere: the same source built for the host must give fused.c's
bits. On a machine with CUDA and nvcc, the kernel itself must give them too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.gd import fused, fused_cuda
from attnsvm.gd.train import train_cells

E2 = {"n": 6, "T": 8, "d": 10}

E2_SHAPE = (6, 8, 10)  # (n, T, d) of E2

needs_both = pytest.mark.skipif(
    fused.library() is None or fused_cuda.host_library() is None,
    reason=f"a loop is not built: {fused.UNAVAILABLE} {fused_cuda.UNAVAILABLE}",
)


def _cuda_loop() -> bool:
    return torch.cuda.is_available() and fused_cuda.available(torch.device("cuda"))


needs_gpu_loop = pytest.mark.skipif(not _cuda_loop(), reason="needs a CUDA device and nvcc")


def _host_run(monkeypatch, cells):
    """``train_cells`` on the CPU with the fused loop replaced by the host build of
    fused_cuda.cu."""

    def host(model, theta0, ks, iterations, eps, progress=None):
        b = model.batch
        data = (b.X, b.Y, b.Z, b.v, b.V)
        W, s, loss, ok, bad_at = fused_cuda.train(data, theta0, model.settings, ks, iterations,
                                                  eps, model.ridge, host=True)  # fmt: skip
        return {"W": W, "softmax": s, "loss": loss}, ok, bad_at

    monkeypatch.setattr(fused, "train", host)
    try:
        return train_cells(cells, device="cpu")
    finally:
        monkeypatch.undo()


@needs_both
@pytest.mark.parametrize(
    "kw",
    [
        {"param": "W", **E2},
        {"param": "KQ", **E2},
        {"param": "KQ", "m": 3, **E2},
        {"param": "W", "n": 1, "T": 3, "d": 5},  # no full tile anywhere
        {"param": "KQ", "n": 7, "T": 5, "d": 9, "m": 2},
        {"param": "W", "n": 4, "T": 2, "d": 17, "lr": 0.5},
    ],
)
def test_the_gpu_arithmetic_gives_the_cpu_loops_bits(monkeypatch, kw):
    """The per-seed routine the GPU runs, built for the host, against fused.c (fused.lanes()
    seeds per vector): every W(k), softmax and loss bit for bit, and the same finiteness."""
    cells = [Cell(seed=s, iterations=250, **kw) for s in range(11)]
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    ref = train_cells(cells, device="cpu")
    got = _host_run(monkeypatch, cells)
    assert ref.finite.all() and got.finite.all()
    assert np.array_equal(got.iterations, ref.iterations)
    assert np.array_equal(got.W, ref.W)
    assert np.array_equal(got.softmax, ref.softmax)
    assert np.array_equal(got.loss, ref.loss)


@needs_both
def test_a_seed_that_overflows_is_flagged_like_the_cpu_loop(monkeypatch):
    """A step size that overflows K Q^T: the GPU routine flags the same seeds as fused.c (and
    train_batch then trains them again with the freeze), so results agree bit for bit."""
    cells = [Cell(seed=s, iterations=40, lr=1e306, param="KQ", **E2) for s in range(3)]
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    ref = train_cells(cells, device="cpu")
    got = _host_run(monkeypatch, cells)
    assert not ref.finite.all()
    assert np.array_equal(got.finite, ref.finite)
    assert np.array_equal(got.nonfinite_iteration, ref.nonfinite_iteration)
    assert np.array_equal(got.W, ref.W, equal_nan=True)


def test_no_cuda_compiler_means_no_gpu_loop(monkeypatch, tmp_path):
    """Without nvcc the GPU loop is unavailable, with one line saying why, and nothing is
    cached (CUDA training then takes the torch loop)."""
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    monkeypatch.setattr(fused_cuda, "UNAVAILABLE", [])
    monkeypatch.setattr(fused_cuda, "nvcc", lambda: None)
    fused_cuda.library.cache_clear()
    try:
        assert fused_cuda.library("sm_90") is None
        assert "no CUDA compiler" in fused_cuda.UNAVAILABLE[-1]
    finally:
        fused_cuda.library.cache_clear()
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(fused_cuda.nvcc() is None, reason="needs nvcc (no GPU needed)")
def test_nvcc_builds_the_kernel(monkeypatch, tmp_path):
    """Where nvcc exists, the kernel compiles for an H100 (sm_90) and loads, GPU or not."""
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    monkeypatch.setattr(fused_cuda, "UNAVAILABLE", [])
    fused_cuda.library.cache_clear()
    try:
        lib = fused_cuda.library("sm_90")
        assert lib is not None, fused_cuda.UNAVAILABLE
        assert lib.attnsvm_seed_work(6, 8, 10, 0) > 0
    finally:
        fused_cuda.library.cache_clear()
    assert [p.name.split("-")[1] for p in tmp_path.glob("*.so")] == ["sm_90"]


@pytest.mark.gpu
@needs_gpu_loop
@pytest.mark.parametrize("kw", [{"param": "W"}, {"param": "KQ"}, {"param": "KQ", "m": 4}])
def test_the_gpu_loop_gives_the_cpu_loops_bits(monkeypatch, kw):
    """On a GPU: W(k) and softmax bit for bit as fused.c, the loss within a few ulps (each
    term's log1p is the GPU's, within an ulp of libm's; measured on an H100: 4.5e-16
    relative), and the GPU loop is what train_batch runs there."""
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    cells = [Cell(seed=s, iterations=500, **E2, **kw) for s in range(37)]
    from tests.test_fused import _model

    assert fused.applies(_model(cells[0].settings("train"), device="cuda"))
    ref = train_cells(cells, device="cpu")
    got = train_cells(cells, device="cuda")
    assert got.device.startswith("cuda")
    assert got.finite.all()
    assert np.array_equal(got.W, ref.W)
    assert np.array_equal(got.softmax, ref.softmax)
    assert np.allclose(got.loss, ref.loss, rtol=2e-15, atol=0)


@pytest.mark.gpu
@needs_gpu_loop
def test_a_gpu_seed_has_the_same_bits_alone_and_in_a_batch(monkeypatch):
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    cells = [Cell(seed=s, iterations=300, **E2) for s in range(300)]
    whole = train_cells(cells, device="cuda")
    for pick in ([0], [129], [299], [5, 3, 200]):
        part = train_cells([cells[s] for s in pick], device="cuda")
        assert np.array_equal(part.W, whole.W[pick])
        assert np.array_equal(part.loss, whole.loss[pick])


@pytest.mark.gpu
@needs_gpu_loop
def test_the_gpu_loop_flags_and_retrains_an_overflowing_seed(monkeypatch):
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    cells = [Cell(seed=s, iterations=40, lr=1e306, param="KQ", **E2) for s in range(3)]
    ref = train_cells(cells, device="cpu")
    got = train_cells(cells, device="cuda")
    assert np.array_equal(got.finite, ref.finite)
    assert np.array_equal(got.nonfinite_iteration, ref.nonfinite_iteration)
    assert np.array_equal(got.W, ref.W, equal_nan=True)
