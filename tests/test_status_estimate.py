"""attnsvm status: remaining wall time from measured jobs, the overall line, the default config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnsvm.plan import Plan
from attnsvm.status import (
    RESULT_JOB_SECONDS,
    _max_overlap,
    _union_length,
    estimate_remaining,
    scan_experiment,
)
from attnsvm.sweep.integrity import write_manifest
from tests.workflow_helpers import write_config

CONFIG = {
    "experiments": {
        "a": {"fixed": {"n": 3, "T": 3, "iterations": 20}, "grid": {"d": [2, 3]}},
        "b": {"fixed": {"n": 3, "T": 3, "iterations": 20}, "grid": {"d": [2, 3, 4]}, "seeds": 2},
    }
}


def _fake_store(
    blocks_dir: Path, name: str, started: float | None, end: float, ok: int, digest: str = ""
) -> None:
    """A finished block store as far as status reads it: its zarr.json."""
    import os

    p = blocks_dir / f"{name}.zarr"
    p.mkdir(parents=True)
    attrs = {"seconds_compute": 1.0, "status_counts": json.dumps({"ok": ok})}
    if started is not None:
        attrs["job_started"] = started
    (p / "zarr.json").write_text(json.dumps({"attributes": attrs, "node_type": "group"}))
    os.utime(p / "zarr.json", (end, end))
    # its manifest, as every finished store has (sweep.integrity): status counts verified stores
    write_manifest(p, {"experiment": blocks_dir.parent.name, "block": name, "cells_digest": digest})


def test_union_length_leaves_idle_gaps_out():
    assert _union_length([(0, 10), (5, 12), (20, 25), (21, 22)]) == 17
    assert _union_length([(0, 10), (5, 12), (20, 25), (21, 22)], bridge=8) == 25
    assert _union_length([(0, 10), (100, 110)], bridge=30) == 20
    assert _max_overlap([(0, 10), (5, 12), (10, 11), (20, 25)]) == 2
    assert _max_overlap([]) == 1


def test_estimate_from_measured_wall_times_and_concurrency():
    scans = {
        # two jobs side by side, 10 s each (twice the plan's 5 s): 2 in parallel, ratio 2
        "a": {"jobs": {"x": [0.0, 10.0], "y": [0.0, 10.0]}, "missing": ["z"], "running": []},
        # nothing measured yet: the ratio of all measured jobs; a running block counts half
        "b": {"jobs": {}, "missing": ["u", "v"], "running": ["v"]},
    }
    planned = {"a": {"x": 5.0, "y": 5.0, "z": 5.0}, "b": {"u": 3.0, "v": 4.0}}
    est = estimate_remaining(scans, planned, {"a": 1, "b": 3}, now=10.0)
    assert est["parallel_jobs"] == pytest.approx(2.0)
    assert est["measured_over_planned"] == pytest.approx(2.0)
    assert est["experiments"]["a"] == pytest.approx((2 * 5.0 + RESULT_JOB_SECONDS) / 2)
    assert est["experiments"]["b"] == pytest.approx((2 * (3.0 + 2.0) + 3 * RESULT_JOB_SECONDS) / 2)
    assert est["overall"] == pytest.approx(sum(est["experiments"].values()))
    # measured result jobs replace the assumed time (and count for the concurrency)
    est = estimate_remaining(
        scans, planned, {"a": 1, "b": 3}, [(20.0, 26.0), (30.0, 32.0)], now=32.0
    )
    assert est["result_job_seconds"] == pytest.approx(4.0)
    assert est["parallel_jobs"] == 2  # the most jobs seen at once
    # 2 slots x 32 s (gaps bridged) hold 28 s of measured jobs: 36 s unseen over 4 jobs
    assert est["overhead_per_job"] == pytest.approx(9.0)
    assert est["experiments"]["a"] == pytest.approx((2 * 5.0 + 9.0 + 4.0 + 9.0) / 2)
    # the longest chain of result jobs (collect -> derive) runs on one core
    chained = estimate_remaining(
        scans, planned, {"a": 1, "b": 3}, [(20.0, 26.0), (30.0, 32.0)], now=32.0,
        result_chains={"a": 1, "b": 3},
    )  # fmt: skip
    tail = 3 * (4.0 + 9.0)
    assert chained["overall"] == pytest.approx(est["overall"] + tail - tail / 2)
    # a running job counts from its start up to now
    scans["b"]["running_since"] = {"v": 0.0}
    est = estimate_remaining(scans, planned, {"a": 1, "b": 3}, now=10.0)
    assert est["parallel_jobs"] == pytest.approx(3.0)
    chained = estimate_remaining(
        scans, planned, {"a": 1, "b": 3}, now=10.0, result_chains={"a": 1, "b": 3}
    )
    tail = 3 * RESULT_JOB_SECONDS
    assert chained["overall"] == pytest.approx(est["overall"] + tail - tail / 3.0)


def test_scan_reads_counts_and_job_times_from_metadata_only(tmp_path, monkeypatch):
    import xarray as xr

    def no_arrays(*args, **kwargs):
        raise AssertionError("status must not open the store's arrays")

    monkeypatch.setattr(xr, "open_zarr", no_arrays)
    plan = Plan.from_config(CONFIG)
    names = list(plan.blocks("b"))
    _fake_store(tmp_path / "b" / "blocks", names[0], 100.0, 130.0, ok=2)
    _fake_store(tmp_path / "b" / "blocks", "not_in_the_plan", 100.0, 130.0, ok=2)
    state = scan_experiment(tmp_path / "b", {n: 2 for n in names})
    assert state["blocks_done"] == 1 and state["blocks_missing"] == len(names) - 1
    assert state["cells"]["ok"] == 2 and state["cells"]["missing"] == 2 * (len(names) - 1)
    assert state["jobs"] == {names[0]: [100.0, pytest.approx(130.0)]}


def test_status_defaults_to_config_config_yaml_and_prints_an_overall_line(tmp_path):
    (tmp_path / "config").mkdir()
    write_config(tmp_path / "config" / "config.yaml", CONFIG)
    plan = Plan.from_config(CONFIG)
    a_blocks = list(plan.blocks("a"))
    digest = plan.block_digests("a")[a_blocks[0]]
    _fake_store(tmp_path / "results" / "a" / "blocks", a_blocks[0], 1000.0, 1012.0, 1, digest)
    cmd = [sys.executable, "-m", "attnsvm.cli", "status"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("a: blocks done 1 of 2, running 0, missing 1")
    assert any(line.startswith("b: blocks done 0 of 3, running 0, missing 3") for line in lines)
    assert lines[-1].startswith("overall: blocks done 1 of 5, running 0, missing 4; remaining ~")
    assert "from 1 measured jobs" in lines[-1]
    js = subprocess.run(cmd + ["--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    overall = json.loads(js.stdout)["overall"]
    # 4 blocks left at the measured 12 s / planned ratio, plus 2 x 2 result jobs (collect,
    # derive), on 1 job
    ratio = 12.0 / plan.block_seconds("a")[a_blocks[0]]
    left = sum(
        ratio * plan.block_seconds(e)[b]
        for e in ("a", "b")
        for b in plan.blocks(e)
        if b != a_blocks[0]
    )
    assert overall["estimated_remaining_seconds"] == pytest.approx(left + 4 * RESULT_JOB_SECONDS)
