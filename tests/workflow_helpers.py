"""Run the Snakemake workflow of this repository in a scratch directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def scratch_workflow(tmp: Path) -> Path:
    """Copy the Snakefile, workflow/, config/ and profiles/ into ``tmp`` (as a clone would be)."""
    shutil.copy(REPO / "Snakefile", tmp / "Snakefile")
    shutil.copytree(REPO / "workflow", tmp / "workflow")
    shutil.copytree(REPO / "config", tmp / "config")
    shutil.copytree(REPO / "profiles", tmp / "profiles", symlinks=True)
    return tmp


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake_command(*args: str) -> list[str]:
    """The snakemake command line with the default profile on 2 cores."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--workflow-profile",
        "workflow/profiles/default",
        "--cores",
        "2",
        *args,
    ]


def snakemake(workdir: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir`` with the default profile; returns the completed process."""
    return subprocess.run(
        snakemake_command(*args), cwd=workdir, capture_output=True, text=True, timeout=timeout
    )


def executed_jobs(proc: subprocess.CompletedProcess, rule: str) -> int:
    """How many jobs of ``rule`` a snakemake run executed (from its log)."""
    text = proc.stdout + proc.stderr
    return sum(
        1 for line in text.splitlines() if line.strip() in (f"rule {rule}:", f"localrule {rule}:")
    )
