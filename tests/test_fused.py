"""The fused training loop (docs/science.md §3, "Fused step") against the torch loop."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.gd import fused
from attnsvm.gd.train import train_cells
from attnsvm.tasks.metrics import corr

E2 = {"n": 6, "T": 8, "d": 10}

needs_library = pytest.mark.skipif(
    fused.library() is None, reason=f"fused loop not built: {fused.UNAVAILABLE}"
)


def _both(monkeypatch, cells):
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    ref = train_cells(cells, device="cpu")
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    return ref, train_cells(cells, device="cpu")


@needs_library
@pytest.mark.parametrize("kw", [{"param": "W"}, {"param": "KQ"}, {"param": "KQ", "m": 4}])
def test_fused_loop_agrees_with_the_torch_loop(monkeypatch, kw):
    cells = [Cell(seed=s, iterations=1000, **E2, **kw) for s in range(12)]
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    assert fused.applies(cells[0].settings("train"), _cpu(), "analytic", {"mask": None})
    ref, res = _both(monkeypatch, cells)
    assert res.finite.all() and ref.finite.all()
    assert np.array_equal(res.iterations, ref.iterations)
    # rounding differs (another summation order): trajectories agree to rounding, the
    # direction (what the science reads) to the last digits
    scale = np.abs(ref.W).max(axis=(-2, -1), keepdims=True)
    tol = 1e-12 if kw["param"] == "W" else 1e-6  # K Q^T moves along a flat direction
    assert (np.abs(res.W - ref.W) <= tol * scale).all()
    assert np.allclose(res.softmax, ref.softmax, rtol=0, atol=1e-12)
    assert np.allclose(res.loss, ref.loss, rtol=1e-12, atol=0)
    for s in range(len(cells)):
        assert corr(res.W[s, -1], ref.W[s, -1]) > 1 - 1e-12


def _cpu():
    import torch

    return torch.device("cpu")


def test_torch_loop_where_no_compiler_works(monkeypatch, tmp_path):
    cells = [Cell(seed=s, iterations=50, **E2) for s in range(3)]
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    ref = train_cells(cells, device="cpu")
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    monkeypatch.setattr(fused, "UNAVAILABLE", [])
    for compiler in (None, "false"):  # none on PATH; one that fails
        monkeypatch.setattr(fused, "_compiler", lambda c=compiler: c)
        fused.library.cache_clear()
        try:
            assert fused.library() is None
            assert "no C compiler" in fused.UNAVAILABLE[-1] or "failed" in fused.UNAVAILABLE[-1]
            res = train_cells(cells, device="cpu")  # the torch loop: same bits as ref
            assert np.array_equal(res.W, ref.W) and np.array_equal(res.loss, ref.loss)
        finally:
            fused.library.cache_clear()
    assert not list(tmp_path.glob("*.so"))


@pytest.mark.parametrize(
    "kw",
    [{"head": "relu", "generator": "relu"}, {"optimizer": "plain"}, {"dtype": "float32"}],
)
def test_fused_loop_only_where_it_applies(monkeypatch, kw):
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    settings = Cell(**E2, **kw).settings("train")
    assert not fused.applies(settings, _cpu(), "analytic", {"stable": True, "mask": None})
    base = Cell(**E2).settings("train")
    assert not fused.applies(base, _cpu(), "autograd", {"stable": True, "mask": None})
    assert not fused.applies(base, _cpu(), "analytic", {"stable": False, "mask": None})
    if fused.library() is not None:
        assert fused.applies(base, _cpu(), "analytic", {"stable": True, "mask": None})


def test_fused_loop_is_opt_in(monkeypatch):
    """Stored values must not depend on a node's compiler: the torch loop is the default."""
    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    assert not fused.enabled()
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    assert not fused.enabled()
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    assert fused.enabled()
