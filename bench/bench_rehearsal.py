"""A cluster-size rehearsal on a local slurmctld: 10^4 block jobs planned and submitted as job
arrays, a run of real block jobs, and the restart with nothing to do (issue 44).

Usage: sudo python bench/bench_rehearsal.py [--blocks 10000] [--run 100] [--state DIR]

Against a local single-node SLURM cluster (tests/slurm/start_cluster.sh: SLURM from apt, as
tests/test_slurm.py uses it), through workflow/profiles/slurm fitted to one CPU and 500 MB
per job, with tiny cells (n = T = d = 3, 40 training steps; one seed per block):

1. submission: the workflow plans ``--blocks`` block jobs and submits them as the profile
   does (job arrays), held (``sbatch --hold``) so that only planning and submission are
   timed: from the controller's start until every block is in ``squeue -r``, with the
   ``sbatch`` calls counted by a wrapper on PATH; then the controller is interrupted (it
   scancels its jobs);
2. run: ``--run`` blocks of the same cells run to the end on the cluster (every block, the
   collect and derive jobs): wall time, wall per block job (its log's start to its store's
   modification time, which Snakemake's controller sets when its status poll sees the job
   end),
   and the files the run wrote under the results and Snakemake's own ``.snakemake/``;
3. restart: the ``--blocks`` blocks' stores (copies of one real store, each with its own
   manifest, as bench/bench_repair.py builds them; ``--until block``, see :func:`restart`),
   one start to record the plan, then ``snakemake`` with the SLURM
   profile started again: its wall time until it says there is nothing to do.

Running all ``--blocks`` jobs is not done here: on the 2 cores of this machine each SLURM
job's own start-up (Snakemake in the job, the worker's imports) is seconds, hours for 10^4.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_repair import build as build_stores
from bench_slurm_submit import SCRIPTS, fit_profile, queued, stop_controller
from tables import Table, load_average

REPO = Path(__file__).resolve().parents[1]
EXP = "big"


def config(blocks: int, results: str) -> dict:
    """``blocks`` one-seed blocks of a tiny untrained cell (the cells of bench_repair)."""
    return {
        "results": results,
        "max_blocks": blocks,
        "max_cells": max(blocks, 100000),
        "threads": 1,
        "experiments": {
            EXP: {
                "figures": [],
                "fixed": {"n": 3, "T": 3, "d": 3, "iterations": 40, "checkpoint_count": 10},
                "seeds": blocks,
                "block_size": 1,
            }
        },
    }


def workdir(tmp: Path, blocks: int, held: bool) -> Path:
    """A scratch clone with the SLURM profile fitted to 1 CPU and 500 MB per job."""
    shutil.copy(REPO / "Snakefile", tmp / "Snakefile")
    for name in ("workflow", "config"):
        shutil.copytree(REPO / name, tmp / name)
    shutil.copytree(REPO / "profiles", tmp / "profiles", symlinks=True)
    (tmp / "c.yaml").write_text(yaml.safe_dump(config(blocks, "results"), sort_keys=False))
    fit_profile(tmp, held=held)
    return tmp


def sbatch_wrapper(folder: Path) -> Path:
    """A ``sbatch`` first on PATH that logs each call to ``folder/sbatch.calls``."""
    real = shutil.which("sbatch")
    wrapper = folder / "bin" / "sbatch"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {folder}/sbatch.calls\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper.parent


def controller(wd: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--workflow-profile", "workflow/profiles/slurm",
            "--configfile", "c.yaml", "--slurm-no-account", "--slurm-status-command", "squeue",
            *extra]  # fmt: skip


def submission(tmp: Path, blocks: int) -> tuple[float, int]:
    """(seconds until every block is queued, sbatch calls) of ``blocks`` held block jobs."""
    (tmp / "submit").mkdir()
    wd = workdir(tmp / "submit", blocks, held=True)
    env = {**os.environ, "PATH": f"{sbatch_wrapper(tmp)}{os.pathsep}{os.environ['PATH']}"}
    with open(wd / "controller.log", "w") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(controller(wd, f"results/{EXP}/sweep.zarr"), cwd=wd, env=env,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            while len(queued(wd)) < blocks:
                if proc.poll() is not None or time.perf_counter() - t0 > 3600:
                    raise SystemExit((wd / "controller.log").read_text()[-3000:])
                time.sleep(0.5)
            seconds = time.perf_counter() - t0
        finally:
            stop_controller(proc, wd, timeout=300)
    calls = (tmp / "sbatch.calls").read_text().splitlines()
    return seconds, len(calls)


def count_files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def run(tmp: Path, blocks: int) -> dict:
    """Run ``blocks`` blocks to the end on the cluster: wall, per-job wall, files written."""
    (tmp / "run").mkdir()
    wd = workdir(tmp / "run", blocks, held=False)
    t0 = time.perf_counter()
    done = subprocess.run(controller(wd), cwd=wd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    from attnsvm.logs import job_start_time

    results = wd / "results" / EXP
    walls = []
    for store in (results / "blocks").glob("*.zarr.zip"):
        log = results / "logs" / "block" / store.name.replace(".zarr.zip", ".log")
        start = job_start_time(str(log))
        if start is not None:
            walls.append(store.stat().st_mtime - start)
    return {
        "wall": wall,
        "job": sum(walls) / len(walls),
        "results_files": count_files(wd / "results"),
        "block_files": count_files(results / "blocks") + count_files(results / "logs" / "block"),
        "snakemake_files": count_files(wd / ".snakemake"),
    }


def restart(tmp: Path, blocks: int) -> tuple[float, str]:
    """Seconds of a SLURM-profile start with ``blocks`` finished blocks and nothing to do.

    The stores are copies of one block's data (bench_repair's ``build``: each with its own
    manifest and cells digest), which the repair step accepts and collect refuses (their
    cells' seeds are all one seed), so the start is asked for the blocks alone (``--until
    block``): planning, the repair step, the DAG of the whole workflow and the up-to-date
    check of every block store, without collect, derive and the report pages."""
    (tmp / "restart").mkdir()
    wd = workdir(tmp / "restart", blocks, held=False)
    build_stores(wd / "results", blocks)  # the finished block stores (bench_repair)
    first = subprocess.run(controller(wd, "--until", "block"), cwd=wd, capture_output=True,
                           text=True)  # fmt: skip
    if first.returncode != 0:  # the first start records the plan (bench_repair: "first")
        raise SystemExit((first.stdout + first.stderr)[-3000:])
    t0 = time.perf_counter()
    again = subprocess.run(controller(wd, "--until", "block"), cwd=wd, capture_output=True,
                           text=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    out = again.stdout + again.stderr
    # Snakemake says "Nothing to be done" or, with --until, a job table of total 0
    said = next((m.group(0) for m in [re.search(r"Nothing to be done|^total +0$", out, re.M)]
                 if m), "")  # fmt: skip
    if again.returncode != 0 or not said:
        raise SystemExit((again.stdout + again.stderr)[-3000:])
    return seconds, said


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=10000)
    ap.add_argument("--run", type=int, default=100, help="blocks run to the end")
    ap.add_argument("--state", default="/tmp/attnsvm-slurm-rehearsal")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: tests/slurm/start_cluster.sh runs slurmctld as root")
    table = Table("rehearsal", "workflow", "A cluster-size rehearsal on a local slurmctld",
                  ["phase", "blocks", "measured"], order=65)  # fmt: skip
    start = subprocess.run([SCRIPTS / "start_cluster.sh", args.state], capture_output=True,
                           text=True)  # fmt: skip
    if start.returncode != 0:
        raise SystemExit(start.stderr[-3000:])
    os.environ["SLURM_CONF"] = str(Path(args.state) / "slurm.conf")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("ATTNSVM_BENCH_TMP")) as tmp:
            tmp = Path(tmp)
            seconds, calls = submission(tmp, args.blocks)
            table.add("plan and submit (held), controller start to all in squeue", args.blocks,
                      f"{seconds:.1f} s, {calls} sbatch calls")  # fmt: skip
            r = run(tmp, args.run)
            table.add("run to the end (blocks, collect, derive, report pages)", args.run,
                      f"{r['wall']:.0f} s wall; {r['job']:.1f} s per block job")  # fmt: skip
            table.add("files written", args.run,
                      f"{r['block_files'] / args.run:.2f} per block under blocks/ and "
                      f"logs/block/ (store and log); {r['results_files']} under results/ in "
                      f"all, {r['snakemake_files']} under .snakemake/")  # fmt: skip
            seconds, said = restart(tmp, args.blocks)
            table.add("restart with nothing to do (SLURM profile, --until block)", args.blocks,
                      f"{seconds:.1f} s (\"{said}\")")  # fmt: skip
    finally:
        subprocess.run([SCRIPTS / "stop_cluster.sh", args.state], capture_output=True)
    table.note(
        "tests/slurm/start_cluster.sh's single-node cluster (SLURM from apt, no accounting: "
        "--slurm-no-account --slurm-status-command squeue) on this machine; the SLURM profile "
        "fitted to 1 CPU and 500 MB per job; tiny cells (n = T = d = 3, 40 training steps, "
        "one seed per block). Submission: block jobs held (sbatch --hold), from the "
        "controller's start (planning, the repair step, the DAG) until every block is in "
        "squeue -r; sbatch calls counted by a wrapper. Run: a smaller sweep of the same "
        "cells to the end; per block job: its log's start to its store's modification time, "
        "which Snakemake's controller sets when its squeue poll sees the job end (the job's "
        "start-up inside SLURM and the poll interval included, the queue wait not). Restart: "
        "the finished stores built as bench/bench_repair.py builds them (copies of one block, "
        "which collect refuses: so --until block, without collect, derive and the report), "
        "one start, then the SLURM profile's second start timed until it has nothing to do. "
        f"Load {load_average():.2f} at the end."
    )
    table.write()


if __name__ == "__main__":
    main()
