"""The Snakemake workflow: bad configs, extending a sweep, linting, crashed blocks.

Configs are the .test config (config/config.yaml shrunk, tests/workflow_helpers.py) with only
what a test is about overridden. The default sweep end to end (its outputs, report and
notebook object) is tests/test_quickstart.py's, on the Quickstart's own command line."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.workflow_helpers import (
    REAL_CONFIG,
    REPO,
    TEST_CONFIG,
    executed_jobs,
    expected_blocks,
    first_seed,
    load_test_config,
    one_experiment,
    real_config,
    render_test_config,
    scratch_workflow,
    seed_count,
    snakemake,
    write_config,
)


def test_test_config_is_the_real_one_shrunk():
    """.test/config/config.yaml is up to date with config/config.yaml, and only smaller."""
    assert TEST_CONFIG.read_text() == render_test_config(), (
        f"{TEST_CONFIG.relative_to(REPO)} is out of date with {REAL_CONFIG.relative_to(REPO)}: "
        "run python -m tests.workflow_helpers"
    )
    real, test = real_config(), load_test_config()
    assert set(test) == set(real) | {"results"} and test["results"] != real.get("results")
    assert list(test["experiments"]) == list(real["experiments"])
    for name, small in test["experiments"].items():
        big = real["experiments"][name]
        assert small.keys() == big.keys(), name
        assert small["figures"] == big["figures"], name
        assert small.get("fixed", {}).keys() == big.get("fixed", {}).keys(), name
        for key, value in small.get("fixed", {}).items():
            assert value == big["fixed"][key] or value < big["fixed"][key], (name, key)
        assert small.get("grid", {}).keys() == big.get("grid", {}).keys(), name
        for axis, values in small.get("grid", {}).items():
            assert values and set(values) <= set(big["grid"][axis]), (name, axis)
        assert seed_count(small) <= seed_count(big), name
    fewer = test["experiments"]["e2_local"]
    assert fewer["fixed"]["iterations"] < real["experiments"]["e2_local"]["fixed"]["iterations"]
    assert seed_count(fewer) < seed_count(real["experiments"]["e2_local"])


def test_test_config_dry_run(tmp_path):
    """The README's check: snakemake --configfile .test/config/config.yaml plans every figure."""
    wd = scratch_workflow(tmp_path)
    proc = snakemake(wd, "--configfile", ".test/config/config.yaml", "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = load_test_config()
    from attnsvm.plan import Plan

    plan = Plan.from_config(config)
    for name, exp in config["experiments"].items():
        # one derive job per experiment draws its figures into its figures folder
        assert f"{config['results']}/{name}/figures" in proc.stdout, name
        assert list(plan.figure_captions(name)) == exp["figures"], name
    assert proc.stdout.count("rule derive:") == len(config["experiments"])


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
    bad = load_test_config()  # every experiment; one of them gets the bad key
    bad["experiments"]["e6_types"].update(patch)
    write_config(wd / "bad.yaml", bad)
    proc = snakemake(wd, "--configfile", "bad.yaml")
    assert proc.returncode != 0
    assert fragment in proc.stderr + proc.stdout
    assert not (wd / bad["results"]).exists()


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
    cfg, exp = one_experiment("e6_types", block_size=2)
    out = wd / cfg["results"] / "e6_types"
    write_config(wd / "c.yaml", cfg)
    first = snakemake(wd, "--configfile", "c.yaml")
    assert first.returncode == 0, first.stderr[-3000:]
    assert executed_jobs(first, "block") == expected_blocks(exp)
    sweep1 = xr.open_zarr(out / "sweep.zarr").load()
    d0, p0, bs = exp["grid"]["d"][0], exp["grid"]["param"][0], exp["block_size"]
    block_log = (out / f"logs/block/d={d0}_param={p0}_seeds=0-{bs - 1}.log").read_text()
    for stage in ("imports", "compute", "train", "solve+metrics", "dataset", "write"):
        assert f"stage {stage}: " in block_log, block_log  # the rule's log names its stages
    assert "stage collect: done in" in (out / "logs/collect.log").read_text()

    again = snakemake(wd, "--configfile", "c.yaml")
    assert again.returncode == 0 and executed_jobs(again, "block") == 0

    bigger = json.loads(json.dumps(cfg))
    grown = bigger["experiments"]["e6_types"]
    real_d = sorted(real_config()["experiments"]["e6_types"]["grid"]["d"])
    grown["grid"]["d"] = real_d[: len(exp["grid"]["d"]) + 1]  # one more d value, the real next
    grown["seeds"] = seed_count(exp) + bs  # one more full block of seeds
    write_config(wd / "c.yaml", bigger)
    ext = snakemake(wd, "--configfile", "c.yaml")
    assert ext.returncode == 0, ext.stderr[-3000:]
    # new: the new d (params x all seed blocks) + the new seed block of the old d values
    assert executed_jobs(ext, "block") == expected_blocks(grown) - expected_blocks(exp)
    sweep2 = xr.open_zarr(out / "sweep.zarr").load()
    old = sweep2.sel(d=exp["grid"]["d"], seed=list(range(seed_count(exp))))
    old = old.isel({dim: slice(0, sweep1.sizes[dim]) for dim in ("row", "col", "feature")})
    for var in ("W", "X", "corr_fro_alpha", "svm_W", "status"):
        np.testing.assert_array_equal(old[var].values, sweep1[var].values)
    assert sweep2.sizes["d"] == len(grown["grid"]["d"]) and sweep2.sizes["seed"] == grown["seeds"]


def test_extending_a_packed_grid_computes_only_the_new_points(tmp_path):
    """README "Extend a grid": with block_seconds packing (the shipped configs), adding a d
    value packs and computes only the new points; every finished cell is kept (issue 41)."""
    wd = scratch_workflow(tmp_path)
    cfg = load_test_config("e6_types")
    exp = cfg["experiments"]["e6_types"]
    out = wd / cfg["results"] / "e6_types"
    write_config(wd / "c.yaml", cfg)
    first = snakemake(wd, "--configfile", "c.yaml", "--until", "collect")
    assert first.returncode == 0, first.stderr[-3000:]
    assert executed_jobs(first, "block") == 1  # every point in one pack
    sweep1 = xr.open_zarr(out / "sweep.zarr").load()
    d = list(exp["grid"]["d"])
    exp["grid"]["d"] = [*d, sorted(real_config()["experiments"]["e6_types"]["grid"]["d"])[len(d)]]
    write_config(wd / "c.yaml", cfg)
    ext = snakemake(wd, "--configfile", "c.yaml", "--until", "collect")
    assert ext.returncode == 0, ext.stderr[-3000:]
    assert executed_jobs(ext, "block") == 1  # the new d's points, packed
    sweep2 = xr.open_zarr(out / "sweep.zarr").load().sel(d=d)
    sweep2 = sweep2.isel({dim: slice(0, sweep1.sizes[dim]) for dim in ("row", "col", "feature")})
    for var in ("W", "X", "corr_fro_alpha", "svm_W", "status"):
        np.testing.assert_array_equal(sweep2[var].values, sweep1[var].values)


def test_changing_a_parameter_reruns_exactly_affected_blocks(tmp_path):
    wd = scratch_workflow(tmp_path)
    cfg, exp = one_experiment("e6_types", block_size=2)
    iterations, d, seeds = exp["fixed"]["iterations"], list(exp["grid"]["d"]), exp["seeds"]
    assert "lr" not in exp["fixed"] and isinstance(seeds, int)
    write_config(wd / "c.yaml", cfg)
    assert snakemake(wd, "--configfile", "c.yaml", "--until", "collect").returncode == 0
    exp["fixed"]["iterations"] = iterations + 1  # touches every block
    exp["grid"]["d"] = d
    write_config(wd / "c.yaml", cfg)
    dry = snakemake(wd, "--configfile", "c.yaml", "-n", "--until", "collect")
    assert executed_jobs(dry, "block") == expected_blocks(exp)
    exp["fixed"]["iterations"] = iterations
    exp["fixed"]["lr"] = 0.1  # spelled out, equal to the default
    write_config(wd / "c.yaml", cfg)
    dry = snakemake(wd, "--configfile", "c.yaml", "-n", "--until", "collect")
    assert executed_jobs(dry, "block") == 0  # same cells: nothing to recompute
    exp["grid"]["d"] = d
    exp["grid"]["param"] = ["W", "KQ"]
    exp["seeds"] = list(range(seeds))
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


def test_crashed_block_is_counted_not_lost(tmp_path, monkeypatch):
    """A block whose worker fails in attnsvm's code ends up as failed cells; the run exits
    non-zero, counting it."""
    from attnsvm.sweep.job import FAULT_ENV

    wd = scratch_workflow(tmp_path)
    cfg, exp = one_experiment("e2_local", block_size=2)
    out = wd / cfg["results"] / "e2_local"
    bs, n_cells = exp["block_size"], len(exp["grid"]["param"]) * seed_count(exp)
    s0 = first_seed(exp)
    killed = f"param=KQ_seeds={s0 + bs}-{s0 + 2 * bs - 1}"  # the second block of KQ seeds
    write_config(wd / "c.yaml", cfg)
    monkeypatch.setenv(FAULT_ENV, f"raise:{killed}")
    proc = snakemake(wd, "--configfile", "c.yaml")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "attnsvm: 1 block job(s) failed: 1 reproducible" in proc.stderr
    sweep = xr.open_zarr(out / "sweep.zarr")
    counts = json.loads(sweep.attrs["status_counts"])
    assert counts == {"ok": n_cells - bs, "nonfinite": 0, "failed": bs, "missing": 0}
    msg = str(sweep["message"].sel(param="KQ", seed=s0 + bs).values)
    assert "worker exited with status 1" in msg and "fault injected" in msg
    summary = xr.open_dataset(out / "summary.nc")
    assert int(summary["count_status"].sel(status="failed").sum()) == bs
    html = (out / "status.html").read_text()
    assert f"failed: {bs}" in html
    assert (out / f"figures/{exp['figures'][0]}.png").stat().st_size > 5_000
    status = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "status", "--configfile", "c.yaml", "--failed-paths"],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.stdout.strip().endswith(f"{killed}.zarr.zip")
