"""The fused training loop (docs/science.md §3, "Fused step") against the torch loop."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.gd import fused
from attnsvm.gd.train import train_cells
from attnsvm.tasks.metrics import corr

E2 = {"n": 6, "T": 8, "d": 10}

E2_SHAPE = (6, 8, 10)  # (n, T, d) of E2

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
    assert fused.applies(_model(cells[0].settings("train")))
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


def _model(settings, shape=E2_SHAPE, stable=True, device="cpu", kind=None):
    """A model of ``settings`` on data of a seed's ``shape`` (what fused.applies reads)."""
    import torch

    from attnsvm.gd.model import Batch, SingleHead

    n, T, d = shape
    f = {"dtype": torch.float64, "device": device}
    batch = Batch(torch.zeros(1, n, T, d, **f), torch.ones(1, n, **f), torch.zeros(1, n, d, **f),
                  torch.zeros(1, d, **f), torch.zeros(1, d, d, **f))  # fmt: skip
    return (kind or SingleHead)(batch, settings, stable=stable)


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
            assert res.device == ref.device == "cpu"  # the cells say which loop ran
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
    assert not fused.applies(_model(settings))
    base = Cell(**E2).settings("train")
    assert not fused.applies(_model(base), "autograd")
    assert not fused.applies(_model(base, stable=False))
    if fused.library() is not None:
        assert fused.applies(_model(base))


def test_fused_loop_is_the_default_and_can_be_switched_off(monkeypatch):
    """The fused loop runs up to MAX_STEP_SIZE unless ``ATTNSVM_FUSED=0``, at every size with
    ``ATTNSVM_FUSED=1``; any other value is refused by name."""
    base = Cell(**E2).settings("train")
    big = (16, 16, 64)
    assert fused.step_size(*big) > fused.MAX_STEP_SIZE >= fused.step_size(*E2_SHAPE)
    for value, mode, small, large in (
        (None, "default", True, False),
        ("", "default", True, False),
        ("1", "on", True, True),
        ("0", "off", False, False),
    ):
        if value is None:
            monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
        else:
            monkeypatch.setenv("ATTNSVM_FUSED", value)
        assert fused.mode() == mode and fused.enabled() == (mode != "off")
        if fused.library() is not None:
            assert fused.applies(_model(base)) == small
            assert fused.applies(_model(base, big)) == large
    for bad in ("yes", "2", "off"):
        monkeypatch.setenv("ATTNSVM_FUSED", bad)
        with pytest.raises(ValueError, match="ATTNSVM_FUSED"):
            fused.enabled()


@needs_library
def test_a_cell_records_the_loop_that_trained_it(monkeypatch):
    """``device`` says "cpu, fused loop" for the fused loop and "cpu" for the torch loop, so a
    store whose blocks came from nodes with and without a compiler says which is which."""
    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    cells = [Cell(seed=s, iterations=20, **E2) for s in range(2)]
    assert train_cells(cells, device="cpu").device == "cpu, fused loop"
    relu = [Cell(seed=s, iterations=20, head="relu", generator="relu", **E2) for s in range(2)]
    assert train_cells(relu, device="cpu").device == "cpu"  # not a case the loop computes
    # above MAX_STEP_SIZE the torch loop trains, for one seed as for many
    big = {"n": 16, "T": 16, "d": 30}
    assert fused.step_size(16, 16, 30) > fused.MAX_STEP_SIZE >= fused.step_size(6, 8, 30)
    big_cells = [Cell(seed=s, iterations=5, **big) for s in range(9)]
    assert train_cells(big_cells, device="cpu").device == "cpu"
    assert train_cells(big_cells[:1], device="cpu").device == "cpu"
    monkeypatch.setenv("ATTNSVM_FUSED", "0")
    assert train_cells(cells, device="cpu").device == "cpu"


_BITS = """
import hashlib, sys
import numpy as np
from attnsvm.config.cell import Cell
from attnsvm.gd.train import train_cells
h = hashlib.sha256()
for param in ("W", "KQ"):
    tr = train_cells([Cell(seed=s, iterations=300, param=param, n=6, T=8, d=10)
                      for s in range(9)], device="cpu")
    for a in (tr.W, tr.softmax, tr.loss):
        h.update(np.ascontiguousarray(a).tobytes())
print(tr.device, h.hexdigest())
"""


@needs_library
def test_the_fused_loop_does_not_depend_on_torchs_cpu_kernels():
    """The reason the fused loop is the default (docs/science.md §4): its trajectories are the
    same whichever kernels torch picks for the CPU (``ATEN_CPU_CAPABILITY``: generic C or this
    CPU's vector instructions), while the torch loop's depend on them."""
    import os
    import subprocess
    import sys

    def bits(fused_flag: str, capability: str | None) -> str:
        env = {**os.environ, "ATTNSVM_FUSED": fused_flag}
        env.pop("ATEN_CPU_CAPABILITY", None)
        if capability:
            env["ATEN_CPU_CAPABILITY"] = capability
        out = subprocess.run([sys.executable, "-c", _BITS], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        return out.stdout.strip()

    generic, native = bits("1", "default"), bits("1", None)
    assert generic == native and generic.startswith("cpu, fused loop ")
    torch_generic, torch_native = bits("0", "default"), bits("0", None)
    print(f"torch loop, generic kernels vs this CPU's: {torch_generic} / {torch_native}")
    assert torch_generic.startswith("cpu ") and torch_generic != generic
    import torch

    if torch.backends.cpu.get_cpu_capability() != "DEFAULT":  # this CPU has vector kernels
        assert torch_generic != torch_native


@needs_library
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_a_seed_has_the_same_bits_alone_and_in_a_batch(monkeypatch, param):
    """Seeds are vector lanes (fused.lanes() per vector): a seed's numbers must not depend on
    its lane, its batch or the padding of the last vector."""
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    cells = [Cell(seed=s, iterations=300, param=param, **E2) for s in range(100)]
    whole = train_cells(cells, device="cpu")
    for pick in ([0], [37], [99], [5, 3, 64], list(range(91, 100))):
        part = train_cells([cells[s] for s in pick], device="cpu")
        assert np.array_equal(part.W, whole.W[pick])
        assert np.array_equal(part.softmax, whole.softmax[pick])
        assert np.array_equal(part.loss, whole.loss[pick])


@needs_library
def test_every_instruction_set_level_gives_the_same_bits(monkeypatch, tmp_path):
    """The builds for AVX-512, AVX2 + FMA and generic C (those this CPU can run) agree bit for
    bit: every multiply-add is an explicit fma(), nothing else is contracted."""
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    cells = [Cell(seed=s, iterations=200, param=p, **E2) for p in ("W", "KQ") for s in range(9)]
    flags = fused.cpu_flags()
    levels = [name for name, _, needs in fused.LEVELS if all(f in flags for f in needs)]
    results = {}
    try:
        for name in levels:
            monkeypatch.setenv("ATTNSVM_FUSED_LEVEL", name)
            fused.library.cache_clear()
            assert fused.library() is not None
            results[name] = [train_cells(cells[i : i + 9], device="cpu") for i in (0, 9)]
    finally:
        fused.library.cache_clear()
    assert len(list(tmp_path.glob("fused-*.so"))) == len(levels)
    first = results[levels[0]]
    for name in levels[1:]:
        for a, b in zip(first, results[name], strict=True):
            assert np.array_equal(a.W, b.W) and np.array_equal(a.loss, b.loss), name


@needs_library
def test_lanes_and_register_tiles_do_not_change_a_bit(monkeypatch, tmp_path):
    """A build's seeds per vector (LANES) and register tiles (TILE_MAX) are chosen per level for
    speed (fused.LEVELS); this machine's level built with other choices gives the same bits,
    odd shapes included (partial tiles, a partial last vector)."""
    monkeypatch.setenv("ATTNSVM_FUSED", "1")
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    cells = [Cell(seed=s, iterations=150, **kw) for kw in (
        {"param": "W", **E2}, {"param": "KQ", **E2},
        {"param": "KQ", "n": 7, "T": 5, "d": 9, "m": 2}, {"param": "W", "n": 3, "T": 2, "d": 7},
    ) for s in range(5)]  # fmt: skip
    level = fused.level()
    base = [lv for lv in fused.LEVELS if lv[0] == level][0]
    results = {}
    try:
        for lanes, tile in ((8, 4), (4, 2), (4, 3), (8, 1)):
            flags = (*[f for f in base[1] if not f.startswith(("-DLANES", "-DTILE_MAX"))],
                     f"-DLANES={lanes}", f"-DTILE_MAX={tile}")  # fmt: skip
            levels = tuple((n, flags if n == level else f, nd) for n, f, nd in fused.LEVELS)
            monkeypatch.setattr(fused, "LEVELS", levels)
            fused.library.cache_clear()
            assert fused.lanes() == lanes
            results[lanes, tile] = [train_cells(cells[i : i + 5], device="cpu")
                                    for i in range(0, len(cells), 5)]  # fmt: skip
    finally:
        fused.library.cache_clear()
    first = results[8, 4]
    for key, got in results.items():
        for a, b in zip(first, got, strict=True):
            assert a.finite.all() and b.finite.all()
            assert np.array_equal(a.W, b.W), key
            assert np.array_equal(a.softmax, b.softmax), key
            assert np.array_equal(a.loss, b.loss), key


def test_level_is_chosen_from_the_cpu_flags(monkeypatch):
    monkeypatch.delenv("ATTNSVM_FUSED_LEVEL", raising=False)
    v3 = {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm", "xsave"}
    v4 = v3 | {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd"}
    assert fused.level(v4) == "x86-64-v4"
    assert fused.level(v3) == "x86-64-v3"
    assert fused.level(v3 - {"fma"}) == "generic"
    assert fused.level(set()) == "generic"
    monkeypatch.setenv("ATTNSVM_FUSED_LEVEL", "generic")
    assert fused.level(v4) == "generic"
    monkeypatch.setenv("ATTNSVM_FUSED_LEVEL", "x86-64-v4")  # a level the CPU cannot run
    with pytest.raises(ValueError, match="ATTNSVM_FUSED_LEVEL"):
        fused.level(v3)


@needs_library
def test_the_fused_exp_is_within_an_ulp_of_libm_in_every_lane():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-40, 0, 20000), rng.uniform(-745, 709, 20000), -rng.exponential(1e-3, 2000),
        [0.0, -0.0, -1e-300, -708.4, -709.1, -744.4, -745.2, -800.0, 709.7, 709.79, 710.0],
    ])  # fmt: skip
    with np.errstate(over="ignore"):
        got, want = fused.exp(x), np.exp(x)
    finite = np.isfinite(want) & (want > 0)
    ulp = np.spacing(want[finite])
    assert (np.abs(got[finite] - want[finite]) <= ulp).all()
    assert np.array_equal(got[~finite], want[~finite])
    assert fused.exp(np.array([0.0]))[0] == 1.0
    special = fused.exp(np.array([np.nan, -np.inf, np.inf, -1e308, 1e308]))
    assert np.isnan(special[0]) and special[1] == 0.0 and special[2] == np.inf
    assert special[3] == 0.0 and special[4] == np.inf
    # the same input gives the same bits whichever lane it lands in (up to eight per vector)
    for shift in range(1, 8):
        assert np.array_equal(fused.exp(np.concatenate([np.zeros(shift), x]))[shift:], got)


@needs_library
def test_progress_is_reported_as_the_loop_runs_and_an_exception_stops_it(monkeypatch):
    """The compiled call runs in a worker thread: progress arrives while it runs (the steps
    sum to the iterations), and an exception in the waiting thread (Ctrl-C) stops the loop
    before its next step instead of waiting for the whole run."""
    import threading
    import time

    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    from attnsvm.gd.train import stack_cells, train_batch

    cells = [Cell(seed=s, iterations=16000, checkpoint_count=3, **E2) for s in range(64)]
    b = stack_cells(cells)
    data = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"], cells[0].settings("train"))
    calls: list[int] = []
    t0 = time.perf_counter()
    whole = train_batch(*data, device="cpu", progress=calls.append)
    seconds = time.perf_counter() - t0
    assert whole.device == "cpu, fused loop" and sum(calls) == 16000 and len(calls) > 1

    def interrupt(steps: int) -> None:
        raise KeyboardInterrupt

    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        train_batch(*data, device="cpu", progress=interrupt)
    stopped = time.perf_counter() - t0
    assert not any(t.name == "attnsvm-fused" for t in threading.enumerate())
    print(f"whole run {seconds:.2f} s, stopped after {stopped:.2f} s")
    assert stopped < seconds / 2


@needs_library
def test_a_train_field_the_loop_does_not_know_sends_the_cell_to_the_torch_loop(monkeypatch):
    """A model declares the train fields the fused loop computes it with (FUSED_FIELDS):
    every other train field must be at its default, so a field added later that changes
    training is read by the torch loop, never silently dropped by this one; the cell's
    ``device`` names the fields, and models that declare none never take the loop."""
    from attnsvm.config.fields import DEFAULTS
    from attnsvm.config.settings import Settings, stage_fields
    from attnsvm.gd.model import MultiHead, NextToken, SingleHead, TrainedHead

    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    base = Cell(**E2).settings("train")
    assert fused.decide(_model(base)) == (True, ())
    unknown = [f for f in stage_fields("train") if f not in SingleHead.FUSED_FIELDS]
    assert unknown  # e.g. heads, task, train_head
    for name, value in (("heads", 2), ("train_head", True), ("radius_min", 0.5)):
        assert name in unknown and DEFAULTS[name] != value
        other = Settings.of("train", base, **{name: value})
        assert fused.decide(_model(other)) == (False, (name,)), name
    assert fused.describe_left_out("cpu", ("heads",)) == (
        "cpu, torch loop (heads not in the fused loop)"
    )
    for kind in (TrainedHead, MultiHead, NextToken):
        assert not kind.FUSED_FIELDS
    assert not fused.applies(_model(base, kind=TrainedHead))


@needs_library
def test_a_block_says_once_which_cells_left_the_fused_loop(monkeypatch, caplog):
    """A cell whose model does not declare one of its fields for the fused loop trains in the
    torch loop, its ``device`` names the field, and the block's log says so once (with the
    count); the cells that fit stay in the fused loop."""
    import logging

    from attnsvm.gd.model import SingleHead
    from attnsvm.tasks import run_cells

    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    monkeypatch.setattr(SingleHead, "FUSED_FIELDS", SingleHead.FUSED_FIELDS - {"lr"})
    cells = [Cell(seed=s, iterations=20, lr=lr, **E2) for lr in (0.1, 0.2) for s in range(2)]
    with caplog.at_level(logging.WARNING, logger="attnsvm.tasks"):
        res = run_cells(cells, device="cpu")
    assert [r.device for r in res] == ["cpu, fused loop"] * 2 + [
        "cpu, torch loop (lr not in the fused loop)"
    ] * 2
    warned = [r.getMessage() for r in caplog.records if "outside the fused loop" in r.message]
    assert len(warned) == 1 and warned[0].startswith("2 of 4 cell(s) trained in the torch loop")


@needs_library
def test_attnsvm_status_counts_the_cells_that_left_the_fused_loop(monkeypatch, tmp_path, capsys):
    """The block store records how many of its cells trained in the torch loop only because
    of a field outside their model's FUSED_FIELDS, and ``attnsvm status`` says so."""
    from attnsvm.gd.model import SingleHead
    from attnsvm.status import print_status, scan_experiment
    from attnsvm.sweep.worker import write_block

    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    monkeypatch.setattr(SingleHead, "FUSED_FIELDS", SingleHead.FUSED_FIELDS - {"lr"})
    for b, lr in (("a", 0.1), ("b", 0.2)):
        cells = [Cell(seed=s, n=3, T=3, d=3, iterations=10, lr=lr) for s in range(2)]
        write_block(cells, tmp_path / "x" / "blocks" / f"{b}.zarr", experiment="x", block=b,
                    device="cpu")  # fmt: skip
    state = scan_experiment(tmp_path / "x", {"a": 2, "b": 2})
    assert state["cells_torch_loop"] == 2 and state["cells"]["ok"] == 4
    assert "torch loop" not in state["cells"]
    print_status(tmp_path)
    assert "2 cell(s) trained in the torch loop" in capsys.readouterr().out
