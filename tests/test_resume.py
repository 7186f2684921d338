"""Kill-safe resume and concurrent writers (issue: nothing lost)."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnsvm.plan import parse_config
from attnsvm.sweep.collect import block_paths_in
from attnsvm.sweep.store import open_block
from tests.workflow_helpers import (
    executed_jobs,
    scratch_workflow,
    snakemake,
    snakemake_command,
    write_config,
)

CONFIG = {
    "experiments": {
        "kill": {
            "figures": [],
            "fixed": {"n": 4, "T": 4, "iterations": 300, "checkpoint_count": 8},
            "grid": {"param": ["W", "KQ"], "d": [3, 5]},
            "seeds": 4,
            "block_size": 2,
        }
    }
}
N_BLOCKS = 8
SKIP_VARS = ("seconds_", "svm_seconds", "device")


def science_equal(a: xr.Dataset, b: xr.Dataset) -> None:
    """Value-for-value equality of everything but timings."""
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        if name.startswith(SKIP_VARS):
            continue
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


def resume_command(workdir: Path) -> list[subprocess.CompletedProcess]:
    """The README's resume command: unlock after a hard kill, then the same run again."""
    return [
        snakemake(workdir, "--configfile", "c.yaml", "--unlock"),
        snakemake(workdir, "--configfile", "c.yaml"),
    ]


def snakemake_complete_stores(workdir: Path) -> set[str]:
    """Block stores present and registered complete by Snakemake (no incomplete marker)."""
    blocks = workdir / "results" / "kill" / "blocks"
    inc = workdir / ".snakemake" / "incomplete"
    marked = set()
    if inc.is_dir():
        for p in inc.iterdir():
            try:
                marked.add(base64.b64decode(p.name.replace("_", "/")).decode())
            except ValueError:
                marked.add(p.name)
    done = set()
    for name, path in block_paths_in(blocks).items():
        rel = str(path.relative_to(workdir))
        if rel not in marked:
            done.add(name)
    return done


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    wd = scratch_workflow(tmp_path_factory.mktemp("reference"))
    write_config(wd / "c.yaml", CONFIG)
    t0 = time.perf_counter()
    proc = snakemake(wd, "--configfile", "c.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return xr.open_zarr(wd / "results/kill/sweep.zarr").load(), time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.parametrize("moment", range(5))
def test_kill_and_resume(tmp_path, reference, moment):
    ref, duration = reference
    wd = scratch_workflow(tmp_path)
    write_config(wd / "c.yaml", CONFIG)
    delay = random.Random(1000 + moment).uniform(0.15, 0.85) * duration
    cmd = snakemake_command("--configfile", "c.yaml")
    proc = subprocess.Popen(
        cmd, cwd=wd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole Snakemake process tree, no cleanup
    proc.wait()
    finished = snakemake_complete_stores(wd)
    unlock, resumed = resume_command(wd)
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert executed_jobs(resumed, "block") == N_BLOCKS - len(finished)
    science_equal(xr.open_zarr(wd / "results/kill/sweep.zarr").load(), ref)
    leftovers = [p.name for p in (wd / "results/kill/blocks").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def _reader(out_dir: Path, stop: threading.Event, seen: set, bad: list) -> None:
    """List and fully read every finished store until stopped; record any failure."""
    while True:
        last = stop.is_set()  # one more full pass after the writers are done
        for name, path in block_paths_in(out_dir).items():
            try:
                ds = open_block(path)
                ds["W"].values  # noqa: B018  full read of the largest array
                assert ds.sizes["cell"] == 2
                seen.add(name)
            except Exception as err:  # a half-written store would land here
                bad.append(f"{name}: {err!r}")
        if last:
            return
        time.sleep(0.01)


def _write_block(args):
    cells, out = args
    from attnsvm.sweep.worker import write_block

    write_block(cells, out, device="cpu")


@pytest.mark.slow
def test_concurrent_writers_and_reader_never_see_partial_stores(tmp_path):
    import multiprocessing as mp

    exp = parse_config(
        {
            "experiments": {
                "c": {
                    "fixed": {"n": 3, "T": 3, "iterations": 50},
                    "grid": {"d": [3, 4, 5, 6]},
                    "seeds": 4,
                    "block_size": 2,
                }
            }
        }
    )["c"]
    blocks = exp.blocks()  # 8 blocks
    assert len(blocks) == 8
    bad: list[str] = []
    for rep in range(3):
        out_dir = tmp_path / f"rep{rep}"
        out_dir.mkdir()
        stop = threading.Event()
        seen: set[str] = set()

        t = threading.Thread(target=_reader, args=(out_dir, stop, seen, bad))
        t.start()
        jobs = [
            ([c.to_dict() for c in b.cells], str(out_dir / f"{b.name}.zarr.zip")) for b in blocks
        ]
        jobs.append(jobs[0])  # two writers of the same store at once: last rename wins
        with mp.get_context("spawn").Pool(len(jobs)) as pool:
            pool.map(_write_block, jobs)
        stop.set()
        t.join()
        assert not bad, bad
        assert seen  # the reader really read stores while writers were running
        assert len(block_paths_in(out_dir)) == 8
        assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]
        for b in blocks:
            ds = open_block(out_dir / f"{b.name}.zarr.zip")
            assert list(ds["seed"].values) == b.seeds
