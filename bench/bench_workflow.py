"""Workflow overhead: dry-run DAG time for config/paper.yaml and for large synthetic grids.

Prints seconds measured in one run (targets: paper < 60 s, 10^5 cells < 300 s).
Usage: python bench/bench_workflow.py [--cells 100000] [--block-size 64]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

REPO = Path(__file__).resolve().parents[1]


def dry_run(workdir: Path, configfile: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-q", "--cores", "2", "--configfile", configfile],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--block-size", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        shutil.copy(REPO / "Snakefile", wd)
        shutil.copytree(REPO / "workflow", wd / "workflow")
        shutil.copytree(REPO / "config", wd / "config")
        table = Table(
            "dry_run",
            "workflow",
            "Planning: dry-run DAG",
            ["config", "cells", "blocks", "dry run s", "target"],
            order=30,
        )
        t = dry_run(wd, "config/paper.yaml")
        table.add("config/paper.yaml", "", "", f"{t:.1f}", "< 60 s")
        for cells in args.cells:
            seeds = 100
            points = cells // seeds
            ds = list(range(2, 2 + points // 10))
            cfg = {
                "block_size": args.block_size,
                "max_cells": max(cells, 1),  # the sizes asked for, beyond the defaults
                "max_blocks": max(cells // seeds * -(-seeds // args.block_size), 1),
                "experiments": {
                    "big": {
                        "fixed": {"n": 6, "T": 8},
                        "grid": {"d": ds, "lr": [0.01 * (k + 1) for k in range(10)]},
                        "seeds": seeds,
                    }
                },
            }
            (wd / "big.yaml").write_text(yaml.safe_dump(cfg))
            n = len(ds) * 10 * seeds
            t = dry_run(wd, "big.yaml")
            blocks = n // seeds * -(-seeds // args.block_size)
            table.add("synthetic grid", n, blocks, f"{t:.1f}", "< 300 s" if n >= 10**5 else "")
    table.note(
        "`snakemake -n -q --cores 2` in a copy of the workflow: planning the DAG, the config "
        "validation included; the synthetic grids are d x lr with 100 seeds per point."
    )
    table.write()


if __name__ == "__main__":
    main()
