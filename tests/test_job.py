"""Failure isolation of a block job: a crashed worker still leaves a store with statuses."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from attnsvm import codes
from attnsvm.config.cell import Cell, cells_text
from attnsvm.failures import EnvironmentFailure
from attnsvm.gd.device import EXIT_DEVICE_UNAVAILABLE, DeviceUnavailableError
from attnsvm.plan import Plan, parse_config
from attnsvm.status import scan_experiment
from attnsvm.sweep.collect import collect_sweep
from attnsvm.sweep.failed import current_failures, failure_path
from attnsvm.sweep.job import FAULT_ENV, block_job, claim_path
from attnsvm.sweep.store import open_block

CONFIG = {
    "experiments": {
        "x": {
            "fixed": {"n": 3, "T": 3, "d": 3, "iterations": 20},
            "grid": {"param": ["W", "KQ"]},
            "seeds": 2,
        }
    }
}


def test_worker_success_writes_store_and_removes_claim(tmp_path):
    cells = [Cell(n=3, T=3, d=3, iterations=20, seed=s).to_dict() for s in range(2)]
    out = tmp_path / "blocks" / "b.zarr.zip"
    stale = tmp_path / "blocks" / ".b.zarr.zip.partial-123-abcd"
    stale.mkdir(parents=True)  # left by an earlier attempt that was killed mid-write
    block_job(cells, out, block="b", device="cpu")
    ds = open_block(out)
    assert np.all(ds["status"].values == codes.CELL_STATUS.index("ok"))
    assert not stale.exists() and not claim_path(out).exists()


def test_crashed_worker_is_recorded_as_failed_cells(tmp_path, monkeypatch):
    """An uncaught error of the code (a reproducible failure) is stored as failed cells."""
    exp = parse_config(CONFIG)["x"]
    blocks = exp.blocks()
    monkeypatch.setenv(FAULT_ENV, "raise:param=KQ")
    paths = {}
    for b in blocks:
        paths[b.name] = block_job(
            [c.to_dict() for c in b.cells],
            tmp_path / "x" / "blocks" / f"{b.name}.zarr.zip",
            experiment="x",  # collect and status check that a store holds its own block
            block=b.name,
            device="cpu",
        )
    crashed = open_block(paths["param=KQ_seeds=0-1"])
    assert crashed.attrs["block_failed"] == 1 and crashed.attrs["failure_kind"] == "reproducible"
    assert np.all(crashed["status"].values == codes.CELL_STATUS.index("failed"))
    assert "worker exited with status 1" in str(crashed["message"].values[0])
    sweep = collect_sweep(exp, paths)  # the crash does not stop collection
    assert json.loads(sweep.attrs["status_counts"]) == {
        "ok": 2,
        "nonfinite": 0,
        "failed": 2,
        "missing": 0,
    }
    assert np.isfinite(sweep["corr_fro_alpha"].sel(param="W")).all()
    plan = Plan.from_config(CONFIG)
    state = scan_experiment(tmp_path / "x", {n: len(b.cells) for n, b in plan.blocks("x").items()})
    assert state["blocks_failed"] == ["param=KQ_seeds=0-1"]
    assert state["blocks_done"] == 2 and state["blocks_missing"] == 0
    assert state["cells"]["failed"] == 2
    (record,) = current_failures(tmp_path / "x" / "blocks")
    assert record["kind"] == "reproducible" and record["block"] == "param=KQ_seeds=0-1"


@pytest.mark.parametrize("fault", ["kill", "segv", "enospc"])
def test_a_signal_or_a_full_disk_is_an_environmental_failure_stored_apart(
    tmp_path, monkeypatch, fault
):
    """The worker killed by a signal (simulated SIGKILL, a real SIGSEGV) or a full disk: no
    store (no cell is failed for it), a record of the failure that status lists, and the
    block is computed by the next attempt once the cause is gone."""
    plan = Plan.from_config(CONFIG)
    name = "param=KQ_seeds=0-1"
    cells = [c.to_dict() for c in plan.blocks("x")[name].cells]
    out = tmp_path / "x" / "blocks" / f"{name}.zarr.zip"
    monkeypatch.setenv(FAULT_ENV, f"{fault}:param=KQ")
    with pytest.raises(EnvironmentFailure, match=f"block {name}: .*the next run"):
        block_job(cells, out, experiment="x", block=name, device="cpu")
    assert not out.exists() and not claim_path(out).exists()
    assert not list(out.parent.glob(f".{name}*"))
    (record,) = current_failures(out.parent)
    assert record["kind"] == "environment" and record["block"] == name
    state = scan_experiment(tmp_path / "x", {n: len(b.cells) for n, b in plan.blocks("x").items()})
    assert [r["block"] for r in state["blocks_failed_environment"]] == [name]
    assert state["blocks_failed"] == [] and state["blocks_missing"] == 2
    monkeypatch.delenv(FAULT_ENV)  # the cause is gone
    block_job(cells, out, experiment="x", block=name, device="cpu")
    assert np.all(open_block(out)["status"].values == codes.CELL_STATUS.index("ok"))
    assert current_failures(out.parent) == []
    assert not failure_path(out).exists()


def test_a_bad_variable_in_a_workers_environment_is_an_environmental_failure(tmp_path, monkeypatch):
    cells = [Cell(n=3, T=3, d=3, iterations=20, seed=0).to_dict()]
    out = tmp_path / "x" / "blocks" / "b.zarr.zip"
    log = tmp_path / "b.log"
    monkeypatch.setenv("ATTNSVM_FUSED", "yes")
    with open(log, "w") as fh:
        monkeypatch.setattr(sys, "stderr", fh)
        with pytest.raises(EnvironmentFailure, match="ATTNSVM_FUSED='yes'"):
            block_job(cells, out, experiment="x", block="b", device="cpu", log=str(log))
    assert not out.exists()
    assert "ATTNSVM_FUSED='yes'" in current_failures(out.parent)[0]["reason"]


def test_status_counts_missing_running_and_killed(tmp_path):
    plan = Plan.from_config(CONFIG)
    blocks_dir = tmp_path / "x" / "blocks"
    blocks_dir.mkdir(parents=True)
    names = list(plan.blocks("x"))
    # one block being computed by a live process (this one), one whose process is gone
    (blocks_dir / f".{names[0]}.zarr.zip.running").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": 0})
    )
    (blocks_dir / f".{names[1]}.zarr.zip.running").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": os.uname().nodename, "started": 0})
    )
    state = scan_experiment(tmp_path / "x", {n: 2 for n in names})
    assert state["blocks_running"] == 1 and state["blocks_killed"] == [names[1]]
    assert state["blocks_missing"] == 2 and state["cells"]["missing"] == 4
    # a killed job that nobody reaped (a zombie), a reused pid, an unreadable claim: killed
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while open(f"/proc/{zombie.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    (blocks_dir / f".{names[0]}.zarr.zip.running").write_text(
        json.dumps({"pid": zombie.pid, "host": os.uname().nodename})
    )
    (blocks_dir / f".{names[1]}.zarr.zip.running").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "ticks": 1})
    )
    state = scan_experiment(tmp_path / "x", {n: 2 for n in names})
    assert state["blocks_running"] == 0 and len(state["blocks_killed"]) == 2
    zombie.wait()
    (blocks_dir / f".{names[0]}.zarr.zip.running").write_text("")
    state = scan_experiment(tmp_path / "x", {n: 2 for n in names})
    assert state["blocks_running"] == 0 and len(state["blocks_killed"]) == 2


def test_cost_warning_for_absurd_local_grid():
    big = Plan.from_config(
        {
            "experiments": {
                "x": {"fixed": {"d": 100, "n": 50, "T": 20, "iterations": 100000}, "seeds": 100000}
            }
        }
    )
    warnings = big.cost_warnings(local=True, cores=2)
    assert any("hours on 2 local core(s)" in w for w in warnings)
    assert any("lower block_size" in w for w in warnings)
    assert Plan.from_config(CONFIG).cost_warnings(local=True, cores=2) == []


def _hide_cuda(monkeypatch):
    """No CUDA for this process and its workers, whatever the machine has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def test_cuda_block_without_gpu_fails_at_once_with_one_message(tmp_path, monkeypatch):
    _hide_cuda(monkeypatch)
    cells = [Cell(n=3, T=3, d=3, iterations=20, seed=s).to_dict() for s in range(2)]
    out = tmp_path / "blocks" / "b.zarr.zip"
    t0 = time.perf_counter()
    with pytest.raises(DeviceUnavailableError) as err:
        block_job(cells, out, block="b", device="cuda")
    assert time.perf_counter() - t0 < 5  # no worker started, nothing trained
    msg = str(err.value)
    assert "'cuda' requested but CUDA is not available" in msg and "'auto'" in msg
    assert "\n" not in msg
    # environmental: no store (no cell is marked failed), no claim left; auto runs on the CPU
    assert not out.exists() and not claim_path(out).exists()
    assert not list(out.parent.glob(".b.zarr.zip*"))
    block_job(cells, out, block="b", device="auto")
    assert np.all(open_block(out)["status"].values == codes.CELL_STATUS.index("ok"))


def test_block_worker_without_gpu_exits_with_its_own_status(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the worker sees no GPU
    spec = tmp_path / "spec.json"
    out = tmp_path / "b.zarr.zip"
    cells = cells_text([Cell(n=3, T=3, d=3, iterations=20, seed=0)])
    spec.write_text(json.dumps({"cells_json": cells, "out": str(out), "device": "cuda"}))
    proc = subprocess.run(
        [sys.executable, "-m", "attnsvm.sweep.worker", str(spec)], capture_output=True, text=True
    )
    assert proc.returncode == EXIT_DEVICE_UNAVAILABLE
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA is not available" in lines[0], proc.stderr
    assert not out.exists()


def test_worker_without_gpu_is_raised_not_stored(tmp_path, monkeypatch):
    import attnsvm.sweep.job as job

    monkeypatch.setattr(job, "_check_device", lambda device: None)  # this process "has" one
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the worker sees none
    out = tmp_path / "b.zarr.zip"
    cells = [Cell(n=3, T=3, d=3, iterations=20, seed=0).to_dict()]
    log = tmp_path / "b.log"
    with open(log, "w") as fh:
        monkeypatch.setattr(sys, "stderr", fh)
        with pytest.raises(DeviceUnavailableError, match="block b: attnsvm: error: device 'cuda'"):
            block_job(cells, out, block="b", device="cuda", log=str(log))
    assert not out.exists() and not claim_path(out).exists()


def test_block_log_names_stages_sizes_and_timings(tmp_path):
    """As the block rule's script does: stderr and the log records go to the rule's log."""
    import re
    import subprocess
    import sys

    cells = [Cell(n=3, T=3, d=3, iterations=20, seed=s).to_dict() for s in range(2)]
    log = tmp_path / "block.log"
    out = tmp_path / "blocks" / "b.zarr.zip"
    code = (
        "import json, sys\n"
        "from attnsvm.logs import log_to\n"
        f"log_to({str(log)!r})\n"
        "from attnsvm.sweep.job import block_job\n"
        f"block_job(json.loads({json.dumps(json.dumps(cells))}), {str(out)!r}, block='b',"
        f" experiment='x', device='cpu', log={str(log)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    from attnsvm.logs import job_start_time

    assert 0 < job_start_time(str(log)) <= log.stat().st_mtime  # what status reads
    assert "block b of experiment x: 2 cell(s)" in text
    assert "n=3 T=3 d=3 param=W" in text and "2 seed(s) x 20 step(s)" in text
    for name in ("imports", "compute", "train", "solve+metrics", "dataset", "write"):
        assert re.search(rf"stage {re.escape(name)}: .*in \d+\.\d{{3}} s", text), name
    assert re.search(r"block b done in \d+\.\d{3} s \(compute", text)
    assert re.search(r"worker exited with status 0 after \d+\.\d{3} s", text)
    assert open_block(out)["status"].values.tolist() == [0, 0]


def test_priorities_run_the_longest_blocks_first_and_results_before_any_block():
    """Longest predicted block first, whatever the config order (a sweep on few cores ends on
    short blocks); every experiment's results outrank every block, in config order."""
    short = {"fixed": {"n": 3, "T": 3, "d": 3, "iterations": 20}, "seeds": 2}
    long = {"fixed": {"n": 3, "T": 3, "d": 3}, "seeds": 2, "block_seconds": 0,
            "grid": {"iterations": [20000, 40000]}}  # fmt: skip
    plan = Plan.from_config({"experiments": {"a": short, "b": long}})
    (a,) = plan.blocks("a")
    b = list(plan.blocks("b"))
    assert len(b) == 2
    seconds = {k: plan.blocks("b")[k].predicted_seconds() for k in b}
    assert min(seconds.values()) > plan.blocks("a")[a].predicted_seconds()  # the known truth
    assert min(plan.priority("b", k) for k in b) > plan.priority("a", a)
    ranked = sorted(b, key=lambda k: plan.priority("b", k), reverse=True)
    assert [seconds[k] for k in ranked] == sorted(seconds.values(), reverse=True)
    priorities = [plan.priority("a", a)] + [plan.priority("b", k) for k in b]
    assert len(set(priorities)) == len(priorities)  # one order, no ties left to chance
    assert plan.priority("b", results=True) > max(priorities)  # results before any block
    assert plan.priority("a", results=True) > plan.priority("b", results=True)
    with pytest.raises(ValueError, match="needs its block"):
        plan.priority("a")
