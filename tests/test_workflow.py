"""The Snakemake workflow: bad configs, extending a sweep, linting, the default sweep."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.workflow_helpers import REPO, executed_jobs, scratch_workflow, snakemake, write_config

TINY = {
    "experiments": {
        "tiny": {
            "figures": ["e2"],
            "fixed": {"n": 3, "T": 3, "iterations": 40, "checkpoint_count": 6},
            "grid": {"d": [3, 4], "param": ["W", "KQ"]},
            "seeds": 4,
            "block_size": 2,
        }
    }
}


@pytest.mark.parametrize(
    "patch,fragment",
    [
        ({"fixd": {}}, "unknown key 'fixd'; did you mean 'fixed'"),
        ({"grid": {"d": [3, 0]}}, "d must be a positive integer, got 0"),
        ({"grid": {"head": ["linear", "tanh"]}}, "head must be one of linear, relu, lambda"),
    ],
)
def test_bad_config_stops_before_any_job(tmp_path, patch, fragment):
    wd = scratch_workflow(tmp_path)
    bad = json.loads(json.dumps(TINY))
    bad["experiments"]["tiny"].update(patch)
    write_config(wd / "bad.yaml", bad)
    proc = snakemake(wd, "--configfile", "bad.yaml")
    assert proc.returncode != 0
    assert fragment in proc.stderr + proc.stdout
    assert not (wd / "results").exists()


def test_malformed_yaml_is_reported(tmp_path):
    wd = scratch_workflow(tmp_path)
    (wd / "broken.yaml").write_text("experiments:\n  tiny: {fixed: [1, 2\n")
    proc = snakemake(wd, "--configfile", "broken.yaml")
    assert proc.returncode != 0
    assert "Config file is not valid JSON or YAML" in proc.stderr + proc.stdout
    assert not (wd / "results").exists()
    # Snakemake does not say where; attnsvm check-config names the file and the line
    check = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "check-config", "broken.yaml"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 2
    assert "broken.yaml is not valid YAML at line 3" in check.stderr


def test_extend_sweep_computes_only_new_blocks(tmp_path):
    wd = scratch_workflow(tmp_path)
    write_config(wd / "c.yaml", TINY)
    first = snakemake(wd, "--configfile", "c.yaml")
    assert first.returncode == 0, first.stderr[-3000:]
    assert executed_jobs(first, "block") == 8
    sweep1 = xr.open_zarr(wd / "results/tiny/sweep.zarr").load()
    block_log = (wd / "results/tiny/logs/block/d=3_param=W_seeds=0-1.log").read_text()
    for stage in ("imports", "compute", "train", "solve+metrics", "dataset", "write"):
        assert f"stage {stage}: " in block_log, block_log  # the rule's log names its stages
    assert "stage collect: done in" in (wd / "results/tiny/logs/collect.log").read_text()

    again = snakemake(wd, "--configfile", "c.yaml")
    assert again.returncode == 0 and executed_jobs(again, "block") == 0

    bigger = json.loads(json.dumps(TINY))
    bigger["experiments"]["tiny"]["grid"]["d"] = [3, 4, 5]  # one more d value
    bigger["experiments"]["tiny"]["seeds"] = 6  # one more full block of seeds
    write_config(wd / "c.yaml", bigger)
    ext = snakemake(wd, "--configfile", "c.yaml")
    assert ext.returncode == 0, ext.stderr[-3000:]
    # new: d=5 (2 params x 3 blocks) + seeds 4-5 for d=3, 4 (2 x 2) = 10 blocks
    assert executed_jobs(ext, "block") == 10
    sweep2 = xr.open_zarr(wd / "results/tiny/sweep.zarr").load()
    old = sweep2.sel(d=[3, 4], seed=[0, 1, 2, 3])
    old = old.isel({dim: slice(0, sweep1.sizes[dim]) for dim in ("row", "col", "feature")})
    for var in ("W", "X", "corr_fro_alpha", "svm_W", "status"):
        np.testing.assert_array_equal(old[var].values, sweep1[var].values)
    assert sweep2.sizes["d"] == 3 and sweep2.sizes["seed"] == 6


def test_changing_a_parameter_reruns_exactly_affected_blocks(tmp_path):
    wd = scratch_workflow(tmp_path)
    cfg = json.loads(json.dumps(TINY))
    write_config(wd / "c.yaml", cfg)
    assert snakemake(wd, "--configfile", "c.yaml", "--until", "collect").returncode == 0
    cfg["experiments"]["tiny"]["fixed"]["iterations"] = 41  # touches every block
    cfg["experiments"]["tiny"]["grid"]["d"] = [3, 4]
    write_config(wd / "c.yaml", cfg)
    dry = snakemake(wd, "--configfile", "c.yaml", "-n", "--until", "collect")
    assert executed_jobs(dry, "block") == 8
    cfg["experiments"]["tiny"]["fixed"]["iterations"] = 40
    cfg["experiments"]["tiny"]["fixed"]["lr"] = 0.1  # spelled out, equal to the default
    write_config(wd / "c.yaml", cfg)
    dry = snakemake(wd, "--configfile", "c.yaml", "-n", "--until", "collect")
    assert executed_jobs(dry, "block") == 0  # same cells: nothing to recompute
    cfg["experiments"]["tiny"]["grid"]["d"] = [3, 4]
    cfg["experiments"]["tiny"]["grid"]["param"] = ["W", "KQ"]
    cfg["experiments"]["tiny"]["seeds"] = [0, 1, 2, 3]
    write_config(wd / "c.yaml", cfg)
    dry = snakemake(wd, "--configfile", "c.yaml", "-n", "--until", "collect")
    assert executed_jobs(dry, "block") == 0  # seeds as a list equal to the count


def test_lint_format_and_style(repo):
    for cmd in (
        [sys.executable, "-m", "snakemake", "--lint"],
        ["snakefmt", "--check", "Snakefile", "workflow"],
        ["ruff", "check", "attnsvm", "tests", "bench", "workflow/scripts"],
    ):
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{cmd}: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"


def test_plain_snakemake_uses_the_default_profile(tmp_path):
    """Plain ``snakemake`` at the repository root picks up profiles/default."""
    wd = scratch_workflow(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "workflow specific profile profiles/default" in proc.stderr
    assert (wd / "profiles/default/profile.yaml").resolve() == (
        wd / "workflow/profiles/default/profile.yaml"
    ).resolve()


def test_paper_config_dry_run(repo, tmp_path):
    wd = scratch_workflow(tmp_path)
    proc = snakemake(wd, "--configfile", "config/paper.yaml", "-n", "-q")
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_default_sweep_end_to_end_with_report(tmp_path):
    wd = scratch_workflow(tmp_path)
    proc = snakemake(wd)
    assert proc.returncode == 0, proc.stderr[-5000:]
    rep = subprocess.run(
        [sys.executable, "-m", "snakemake", "--report", "results/report.html"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert (wd / "results/report.html").stat().st_size > 100_000
    import yaml

    from attnsvm.grid import parse_config

    exps = parse_config(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    for name, exp in exps.items():
        sweep = xr.open_zarr(wd / f"results/{name}/sweep.zarr")
        assert list(sweep["status"].dims) == list(exp.axes) + ["seed"]
        for axis, values in exp.axes.items():
            assert list(sweep[axis].values) == values
        counts = json.loads(sweep.attrs["status_counts"])
        assert sum(counts.values()) == exp.n_cells
        assert counts["missing"] == 0 and counts["failed"] == 0
        summary = xr.open_dataset(wd / f"results/{name}/summary.nc")
        assert int(summary["count_status"].sum()) == exp.n_cells
        for fig in exp.figures:
            for ext in ("pdf", "png"):
                f = wd / f"results/{name}/figures/{fig}.{ext}"
                assert f.stat().st_size > 5_000, f
    e2 = xr.open_dataset(wd / "results/e2_local/summary.nc")
    assert float(e2["corr_fro_alpha_mean"].sel(param="W")) >= 0.99
    assert float(e2["corr_nuc_alpha_mean"].sel(param="KQ")) >= 0.99
    # the report states this run's numbers, versions and configuration (tests/test_report.py
    # checks two different configs at the level of the captions)
    from attnsvm import __version__
    from attnsvm.captions import fmt, status_text

    report = (wd / "results/report.html").read_text()
    assert fmt(e2["corr_fro_alpha_mean"].sel(param="W")) in report
    for name in exps:
        summary = xr.open_dataset(wd / f"results/{name}/summary.nc")
        assert status_text(summary) in report, name
    assert f"attnsvm {__version__}" in report and "checkpoint_count: 80" in report


def test_crashed_block_is_counted_not_lost(tmp_path, monkeypatch):
    """A block whose worker is killed (as by the OOM killer) ends up as failed cells."""
    from attnsvm.job import FAULT_ENV

    wd = scratch_workflow(tmp_path)
    cfg = json.loads(json.dumps(TINY))
    cfg["experiments"]["tiny"]["grid"]["d"] = [3]
    write_config(wd / "c.yaml", cfg)
    monkeypatch.setenv(FAULT_ENV, "kill:param=KQ_seeds=2-3")
    proc = snakemake(wd, "--configfile", "c.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = xr.open_zarr(wd / "results/tiny/sweep.zarr")
    counts = json.loads(sweep.attrs["status_counts"])
    assert counts == {"ok": 6, "nonfinite": 0, "failed": 2, "missing": 0}
    msg = str(sweep["message"].sel(d=3, param="KQ", seed=2).values)
    assert "worker killed by SIGKILL" in msg
    summary = xr.open_dataset(wd / "results/tiny/summary.nc")
    assert int(summary["count_status"].sel(status="failed").sum()) == 2
    html = (wd / "results/tiny/status.html").read_text()
    assert "failed: 2" in html
    assert (wd / "results/tiny/figures/e2.png").stat().st_size > 5_000
    status = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "status", "--configfile", "c.yaml", "--failed-paths"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.stdout.strip().endswith("param=KQ_seeds=2-3.zarr")
