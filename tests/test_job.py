"""Failure isolation of a block job: a crashed worker still leaves a store with statuses."""

import json
import os

import numpy as np

from attnsvm import codes
from attnsvm.block_store import open_block
from attnsvm.cell import Cell
from attnsvm.collect import collect_sweep
from attnsvm.grid import parse_config
from attnsvm.job import FAULT_ENV, claim_path, run_job
from attnsvm.status import scan_experiment
from attnsvm.workflow_plan import Plan

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
    out = tmp_path / "blocks" / "b.zarr"
    stale = tmp_path / "blocks" / ".b.zarr.partial-123-abcd"
    stale.mkdir(parents=True)  # left by an earlier attempt that was killed mid-write
    run_job(cells, out, block="b", device="cpu")
    ds = open_block(out)
    assert np.all(ds["status"].values == codes.CELL_STATUS.index("ok"))
    assert not stale.exists() and not claim_path(out).exists()


def test_crashed_worker_is_recorded_as_failed_cells(tmp_path, monkeypatch):
    exp = parse_config(CONFIG)["x"]
    blocks = exp.blocks()
    monkeypatch.setenv(FAULT_ENV, "kill:param=KQ")
    paths = {}
    for b in blocks:
        paths[b.name] = run_job(
            [c.to_dict() for c in b.cells],
            tmp_path / "x" / "blocks" / f"{b.name}.zarr",
            experiment="x",  # collect and status check that a store holds its own block
            block=b.name,
            device="cpu",
        )
    crashed = open_block(paths["param=KQ_seeds=0-1"])
    assert crashed.attrs["block_failed"] == 1
    assert np.all(crashed["status"].values == codes.CELL_STATUS.index("failed"))
    assert "worker killed by SIGKILL" in str(crashed["message"].values[0])
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


def test_status_counts_missing_running_and_killed(tmp_path):
    plan = Plan.from_config(CONFIG)
    blocks_dir = tmp_path / "x" / "blocks"
    blocks_dir.mkdir(parents=True)
    names = list(plan.blocks("x"))
    # one block being computed by a live process (this one), one whose process is gone
    (blocks_dir / f".{names[0]}.zarr.running").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": 0})
    )
    (blocks_dir / f".{names[1]}.zarr.running").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": os.uname().nodename, "started": 0})
    )
    state = scan_experiment(tmp_path / "x", {n: 2 for n in names})
    assert state["blocks_running"] == 1 and state["blocks_killed"] == [names[1]]
    assert state["blocks_missing"] == 2 and state["cells"]["missing"] == 4


def test_cost_warning_for_absurd_local_grid():
    big = Plan.from_config(
        {
            "experiments": {
                "x": {"fixed": {"d": 100, "n": 50, "T": 20, "iterations": 20000}, "seeds": 100000}
            }
        }
    )
    warnings = big.cost_warnings(local=True, cores=2)
    assert any("hours on 2 local core(s)" in w for w in warnings)
    assert any("lower block_size" in w for w in warnings)
    assert Plan.from_config(CONFIG).cost_warnings(local=True, cores=2) == []
