"""Workflow overhead: what a block job costs beyond its computation, and collect for many blocks.

Usage: python bench/bench_overhead.py [--jobs 24] [--before /work/main --before-python
/work/venv-main/bin/python] [--blocks 1000 10000] [--workers 1 2]

* per block job: ``snakemake --cores 2`` (the default profile) on a fresh results directory
  with ``--jobs`` blocks of 8 E2 cells each (W, 2000 steps: a fraction of a second of
  compute); per block job, its wall time from Snakemake's own start and finish stamps (1 s
  resolution, averaged over the jobs) minus the compute its log states: the start-up, the
  imports and the store write that every job pays. Measured with the fork server (the
  default: :mod:`attnsvm.sweep.forkserver`), without it (``ATTNSVM_FORKSERVER=0``: a process
  per job, as on a SLURM cluster), and, with ``--before``, for another checkout (the same
  config, run by that tree's workflow and Python).
* start-up: a fresh interpreter importing what a block job's worker imports.
* collect (``--blocks``): one real 1-cell store copied under the names of a synthetic plan
  with N blocks, then attnsvm.sweep.collect.collect_sweep with each --workers count.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tables import Table, load_average  # bench/tables.py: BENCHMARKS.md's tables

ROOT = Path(__file__).resolve().parents[1]
STAMP = r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]"


def overhead_config(jobs: int, results: str) -> dict:
    """``jobs`` blocks of 8 E2 cells (W, 2000 steps), one per learning rate."""
    return {
        "results": results,
        "block_seconds": 0,
        "experiments": {
            "ov": {
                "figures": [],
                "fixed": {"n": 6, "T": 8, "d": 10, "param": "W", "iterations": 2000},
                "grid": {"lr": [round(0.01 * (k + 1), 4) for k in range(jobs)]},
                "seeds": 8,
                "block_size": 8,
            }
        },
    }


def job_times(log: str, results: Path) -> tuple[int, float, float] | None:
    """(block jobs, mean wall s from Snakemake's start and finish stamps, 1 s resolution;
    mean compute s from the block logs), or None when the stamps and logs do not match."""

    def stamps(pattern: str) -> dict[str, float]:
        """jobid -> Unix time of the Snakemake stamp just before ``pattern``."""
        return {
            m.group(2): time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"))
            for m in re.finditer(STAMP + pattern, log)
        }

    started = stamps(r"\s+localrule block:(?:\n.*?)*?\n\s+jobid: (\d+)")
    finished = stamps(r"\s+Finished jobid: (\d+) \(Rule: block\)")
    walls = [finished[j] - started[j] for j in started if j in finished]
    computes = [
        float(m.group(1))
        for f in results.glob("*/logs/block/*.log")
        for m in [re.search(r"stage compute: done in ([0-9.]+) s", f.read_text())]
        if m
    ]
    if not walls or len(walls) != len(computes):
        return None
    return len(walls), sum(walls) / len(walls), sum(computes) / len(computes)


def job_overhead(log: str, results: Path) -> tuple[int, float, float]:
    """:func:`job_times`, or exit saying why there are none."""
    times = job_times(log, results)
    if times is None:
        sys.exit("per-job overhead: the Snakemake job stamps and the block logs do not match")
    return times


def run_workflow(tree: Path, python: str, jobs: int, env: dict) -> tuple[float, int, float, float]:
    """(wall s, block jobs, mean job wall s, mean compute s) of the overhead config run by
    ``tree``'s workflow with ``python``, into a fresh results directory."""
    with tempfile.TemporaryDirectory(prefix="attnsvm-overhead-") as tmp:
        results = Path(tmp) / "results"
        cfg = Path(tmp) / "c.yaml"
        cfg.write_text(yaml.safe_dump(overhead_config(jobs, str(results))))
        # --quiet host: the rule stamps job_times reads (the profile's quiet: [rules, host]
        # drops them)
        cmd = [python, "-m", "snakemake", "--workflow-profile", "workflow/profiles/default",
               "--cores", "2", "--configfile", str(cfg), "--quiet", "host"]  # fmt: skip
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"snakemake in {tree} failed:\n{done.stderr[-3000:]}")
        return (wall, *job_overhead(done.stdout + done.stderr, results))


def per_job(args: argparse.Namespace) -> None:
    table = Table(
        "overhead",
        "workflow",
        "Per block job: start-up, imports and store write beyond the computation",
        [
            "run",
            "block jobs",
            "workflow wall s",
            "mean job wall s",
            "mean compute s",
            "overhead per job s",
            "target",
        ],  # fmt: skip
        order=20,
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("ATTNSVM_")}
    runs = [
        ("this tree, fork server (default)", ROOT, sys.executable, base),
        ("this tree, a process per job (ATTNSVM_FORKSERVER=0)", ROOT, sys.executable,
         {**base, "ATTNSVM_FORKSERVER": "0"}),
    ]  # fmt: skip
    if args.before:
        before_env = {**base, "PYTHONPATH": str(args.before)}  # that tree's attnsvm first
        runs.append((f"before: {args.before_label}", args.before, args.before_python, before_env))
    for label, tree, python, env in runs:
        wall, n, job, comp = run_workflow(tree, python, args.jobs, env)
        target = "<= 1.5" if "default" in label else ""
        table.add(label, n, f"{wall:.1f}", f"{job:.2f}", f"{comp:.2f}", f"{job - comp:.2f}",
                  target)  # fmt: skip
    table.note(
        f"snakemake --cores 2 with the default profile on a fresh results directory: "
        f"{args.jobs} blocks of 8 E2 cells (n=6, T=8, d=10, W, 2000 steps; block_seconds 0). "
        "Job wall time from Snakemake's start and finish stamps (1 s resolution, averaged over "
        "the jobs), compute from each block's log (`stage compute`); the difference is the "
        "job's start-up (Snakemake's script, the interpreter, the imports), the store write "
        "and Snakemake's bookkeeping. The fork server (attnsvm.sweep.forkserver) imports once "
        "per machine; without it every job imports torch, xarray, zarr and the solvers itself, "
        "as SLURM jobs do."
    )
    table.write()


def startup_and_collect(args: argparse.Namespace) -> None:
    from attnsvm.config.cell import Cell, cells_text, text_digest
    from attnsvm.plan import parse_config
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.integrity import MANIFEST, write_manifest
    from attnsvm.sweep.worker import write_block

    code = "import attnsvm.sweep.worker, attnsvm.tasks, attnsvm.sweep.store, torch, xarray, zarr"
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        ts.append(time.perf_counter() - t0)
    table = Table("overhead_collect", "workflow", "Start-up and collect for many blocks",
                  ["what", "measured"], order=21)  # fmt: skip
    table.add(
        "a fresh interpreter importing attnsvm's worker, torch, xarray, zarr",
        f"{min(ts):.2f} s (best of 3)",
    )

    def synthetic_block(template: Path, path: Path, block) -> Path:
        shutil.copytree(template, path, copy_function=os.link)
        meta = path / "zarr.json"
        doc = json.loads(meta.read_text())
        text = cells_text(block.cells)
        doc["attributes"].update(experiment=block.experiment, block=block.name, cells=text,
                                 cells_digest=text_digest(text))  # fmt: skip
        meta.unlink()  # a hard link: the template's own file stays as it is
        meta.write_text(json.dumps(doc))
        (path / MANIFEST).unlink()
        write_manifest(path, doc["attributes"])
        return path

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        one = write_block([Cell(n=6, T=8, d=10, iterations=100, seed=0)], tmp / "one.zarr",
                          experiment="x")  # fmt: skip
        for N in args.blocks:
            exp = parse_config({
                "max_blocks": N,
                "experiments": {"x": {
                    "fixed": {"n": 6, "T": 8, "d": 10, "iterations": 100},
                    "grid": {"lr": [round(0.001 * (k + 1), 6) for k in range(N)]},
                    "seeds": 1, "block_size": 1,
                }},
            })["x"]  # fmt: skip
            bdir = tmp / f"blocks{N}"
            bdir.mkdir()
            paths = {b.name: synthetic_block(one, bdir / f"{b.name}.zarr", b) for b in exp.blocks()}
            for workers in args.workers:
                t0 = time.perf_counter()
                sweep = collect_sweep(exp, paths, workers)
                t = time.perf_counter() - t0
                assert sweep.sizes["lr"] == N
                table.add(f"collect {N} blocks, {workers} process{'es' * (workers > 1)}",
                          f"{t:.1f} s ({1e3 * t / N:.0f} ms per block)")  # fmt: skip
            shutil.rmtree(bdir)
    table.note("Synthetic stores for collect: one real 1-cell store hard-linked under N block "
               "names, each with the attributes and manifest of its block.")  # fmt: skip
    table.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=24, help="block jobs of the per-job run")
    ap.add_argument("--before", type=Path, help="another checkout to measure the same way")
    ap.add_argument("--before-python", default=sys.executable,
                    help="the Python (venv) with --before installed")  # fmt: skip
    ap.add_argument("--before-label", default="", help="how the table names --before")
    ap.add_argument("--blocks", type=int, nargs="*", default=[],
                    help="collect this many synthetic blocks (e.g. 1000 10000)")  # fmt: skip
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    args = ap.parse_args()
    args.before_label = args.before_label or str(args.before)
    print(f"load {load_average():.2f}", flush=True)
    per_job(args)
    if args.blocks:
        startup_and_collect(args)


if __name__ == "__main__":
    main()
