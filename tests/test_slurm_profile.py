"""The SLURM profile's GPU request without a cluster (workflow/profiles/README.md, "GPUs").

A dry run (``snakemake -n``) with ``workflow/profiles/slurm`` plans every block job with the
profile's resources (``gpu``, here also ``gpu_model``, CPUs, memory) and the collect job
without a GPU; the installed executor plugin's own translation turns them into the
``sbatch`` flags the README promises. tests/test_slurm.py checks the same flags against a
real (single-node) SLURM cluster, where CUDA_VISIBLE_DEVICES is set for each job.
"""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import yaml
from snakemake_executor_plugin_slurm.utils import set_gres_string

from tests.workflow_helpers import (
    JOB_HEADERS,
    expected_blocks,
    one_experiment,
    scratch_workflow,
    write_config,
)

EXP = "e2_local"


def _resources(log: str) -> dict[str, list[dict[str, str]]]:
    """Per rule, the ``resources:`` of every job a dry run printed."""
    out: dict[str, list[dict[str, str]]] = {}
    rule = None
    for line in log.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if m:
            rule = m.group(1)
        elif line.strip().startswith("resources:") and rule:
            items = line.strip()[len("resources:") :].split(", ")
            out.setdefault(rule, []).append(dict(i.strip().split("=", 1) for i in items))
    return out


def test_dry_run_with_slurm_profile_requests_one_gpu_per_block(tmp_path):
    wd = scratch_workflow(tmp_path)
    config, exp = one_experiment(EXP, block_size=2)  # the .test config's E2 in blocks of 2 seeds
    config["device"] = "cuda"
    write_config(wd / "c.yaml", config)
    path = wd / "workflow/profiles/slurm/profile.yaml"
    prof = yaml.safe_load(path.read_text())
    prof["set-resources"]["block"]["gpu_model"] = "h100"  # what a site with typed GRES adds
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", f"{config['results']}/{EXP}/sweep.zarr", "-n"]
    cmd += ["--workflow-profile", "workflow/profiles/slurm", "--configfile", "c.yaml"]
    cmd += ["--slurm-no-account"]  # nothing is submitted; no sacctmgr on this machine
    cmd += [JOB_HEADERS]  # each job's rule and resources, which the quiet profile leaves out
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    res = _resources(log)
    block = prof["set-resources"]["block"]
    assert len(res["block"]) == expected_blocks(exp)  # grid points x blocks of seeds
    for r in res["block"]:
        assert r["gpu"] == str(block["gpu"]) == "1"
        assert r["gpu_model"] == "h100"
        assert r["cpus_per_task"] == str(block["cpus_per_task"])
        assert r["mem_mb"] == str(block["mem_mb"])
        # the plugin's sbatch flags for this job
        job = SimpleNamespace(resources=SimpleNamespace(get=r.get, **r))
        assert set_gres_string(job).strip() == "--gpus=h100:1"
    (collect,) = res["collect"]
    assert "gpu" not in collect and "gpu_model" not in collect
    # without gpu_model (the profile as shipped): an untyped GPU
    plain = {k: v for k, v in res["block"][0].items() if k != "gpu_model"}
    job = SimpleNamespace(resources=SimpleNamespace(get=plain.get, **plain))
    assert set_gres_string(job).strip() == "--gpus=1"
