"""The fused loop's build cache cannot sink a sweep (issue 44; attnsvm.gd.native): a damaged,
replaced or crashing library is rebuilt once, never loaded into a worker; a killed build
leaves nothing behind; a machine whose compiler cannot give a working library fails its
blocks as an environmental failure, not as failed cells."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.gd import fused, native
from attnsvm.gd.train import train_cells
from attnsvm.sweep.store import open_block

pytestmark = pytest.mark.skipif(fused._compiler() is None, reason="no C compiler")

CELLS = [Cell(seed=s, iterations=60, n=6, T=8, d=10) for s in range(3)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty build cache for this test; the library built in it once."""
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNSVM_FUSED", raising=False)
    monkeypatch.setattr(native, "PROBLEMS", [])
    fused.library.cache_clear()
    yield tmp_path / "cache"
    fused.library.cache_clear()


def _load() -> object:
    fused.library.cache_clear()
    return fused.library()


def _library(cache: Path) -> Path:
    (lib,) = cache.glob("fused-*.so")
    return lib


def _reference(cache: Path):
    assert _load() is not None, fused.UNAVAILABLE
    return train_cells(CELLS, device="cpu")


def _same(a, b) -> bool:
    return np.array_equal(a.W, b.W) and np.array_equal(a.loss, b.loss) and a.device == b.device


def _record_sha(lib: Path) -> None:
    """Make the record vouch for the library's current bytes (a cache copied whole, library
    and record, from a broken node): the probe is then what catches it."""
    record = json.loads(lib.with_suffix(".json").read_text())
    record["sha256"] = native.file_sha256(lib)
    lib.with_suffix(".json").write_text(json.dumps(record))


@pytest.mark.parametrize(
    "damage", ["truncated", "truncated+record", "flipped bit", "empty", "garbage", "no record"]
)
def test_a_damaged_library_is_rebuilt_once_and_gives_the_same_bits(cache, damage, caplog):
    ref = _reference(cache)
    lib = _library(cache)
    good = lib.read_bytes()
    if damage.startswith("truncated"):
        lib.write_bytes(good[: len(good) // 3])  # an interrupted copy: SIGBUS when loaded
        if damage.endswith("record"):
            _record_sha(lib)
    elif damage == "flipped bit":
        data = bytearray(good)
        data[len(data) // 2] ^= 0x10
        lib.write_bytes(bytes(data))
    elif damage == "empty":
        lib.write_bytes(b"")
    elif damage == "garbage":
        lib.write_bytes(os.urandom(len(good)))
    else:
        lib.with_suffix(".json").unlink()
    assert _load() is not None, fused.UNAVAILABLE
    assert "rebuilding" in caplog.text and native.PROBLEMS == []
    assert lib.read_bytes() == good  # the same build again
    assert _same(train_cells(CELLS, device="cpu"), ref)
    assert {p.name for p in cache.iterdir()} == {lib.name, lib.with_suffix(".json").name}


def test_a_library_whose_probe_crashes_is_rebuilt_not_loaded(cache, tmp_path):
    """A library of another CPU level (SIGILL) under this level's name, with a record that
    vouches for it: the probe dies in a child process, the library is rebuilt."""
    ref = _reference(cache)
    lib = _library(cache)
    bad = tmp_path / "bad.c"
    bad.write_text(
        "int attnsvm_isa(void) { return 0; }\nint attnsvm_lanes(void) { return 8; }\n"
        "void attnsvm_exp(int n, const double *x, double *y) { __builtin_trap(); }\n"
    )
    subprocess.run(["cc", "-shared", "-fPIC", str(bad), "-o", str(lib)], check=True)
    _record_sha(lib)
    assert str(native.check(lib, fused.PROBE)).startswith("its probe call killed by SIG")
    assert _load() is not None
    assert not isinstance(native.check(lib, fused.PROBE), str)
    assert _same(train_cells(CELLS, device="cpu"), ref)


def test_the_key_holds_the_compiler_version_and_the_architecture(cache, tmp_path, monkeypatch):
    assert _load() is not None
    first = _library(cache).stem
    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "cc 99.0"; exit 0; }\n'
                    'exec cc "$@"\n')  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setattr(fused, "_compiler", lambda: str(fake))
    assert _load() is not None
    assert len(list(cache.glob("fused-*.so"))) == 2  # another compiler version: another build
    record = json.loads(next(p for p in cache.glob("*.json") if first not in p.name).read_text())
    assert record["compiler_version"] == "cc 99.0" and record["machine"]


def test_a_killed_build_leaves_nothing_behind(cache, tmp_path, monkeypatch):
    slow = tmp_path / "bin" / "cc"
    slow.parent.mkdir()
    slow.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "cc slow"; exit 0; }\n'
'sleep 60\n')  # fmt: skip
    slow.chmod(0o755)
    code = (
        f"from attnsvm.gd import fused\nfused._compiler = lambda: {str(slow)!r}\nfused.library()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    deadline = time.time() + 60
    while not list(cache.glob(f".*{native.PARTIAL}*")) and time.time() < deadline:
        time.sleep(0.05)
    assert list(cache.glob(f".*{native.PARTIAL}*")), "the build never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(cache.glob("*.so"))  # nothing that could be loaded
    assert _load() is not None  # the next build (or load) removes what the killed one left
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 2 and all(not n.startswith(".") for n in names), names


def test_a_compiler_that_cannot_give_a_working_library_fails_the_block_not_its_cells(
    cache, tmp_path, monkeypatch
):
    """A compiler that writes garbage: after the one rebuild the library is still unusable,
    the block job fails as an environmental failure (nothing stored, retried by the next
    run), the message names the problem; no compiler at all is the documented torch loop."""
    from attnsvm.failures import EnvironmentFailure
    from attnsvm.sweep.failed import current_failures
    from attnsvm.sweep.job import block_job

    broken = tmp_path / "bin" / "cc"
    broken.parent.mkdir()
    broken.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "cc broken"; exit 0; }\n'
        'for a; do [ "$prev" = -o ] && echo garbage > "$a"; prev=$a; done\n'
    )
    broken.chmod(0o755)
    monkeypatch.setenv("CC", str(broken))
    monkeypatch.setenv("PATH", f"{broken.parent}{os.pathsep}{os.environ['PATH']}")
    assert _load() is None and "unusable" in native.PROBLEMS[-1]
    out = tmp_path / "x" / "blocks" / "b.zarr.zip"
    cells = [c.to_dict() for c in CELLS]
    with pytest.raises(EnvironmentFailure, match="fused training loop is unusable"):
        block_job(cells, out, experiment="x", block="b", device="cpu")
    assert not out.exists() and current_failures(out.parent)[0]["kind"] == "environment"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no compiler: the torch loop
    monkeypatch.delenv("CC")
    block_job(cells, out, experiment="x", block="b", device="cpu")
    assert set(open_block(out)["device"].values) == {"cpu"}
