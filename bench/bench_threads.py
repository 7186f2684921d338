"""Threads as given: ``attnsvm run-cell`` on a cell at size, with a second job running (issue 44).

Usage: python bench/bench_threads.py [--shape 256 32 64] [--before DIR --before-python PY]

The cell (n, T, d) = ``--shape`` (W, then KQ: the Frobenius and the nuclear SVMs of its
selection and of its optimal tokens) runs through ``attnsvm run-cell`` while a second job
runs the same command beside it (both started together; the first one's wall time is
reported). Each row is one way of giving cores: this tree's default (every thread pool limited
to the cores the process was given: here its CPU affinity, all cores), this tree with
``--threads 1``, and, with ``--before``, another checkout's ``run-cell``, whose BLAS and
OpenMP pools start a thread per core (and torch's its own) whatever else runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

ROOT = Path(__file__).resolve().parents[1]


def run_cell(python: str, tree: Path, shape: list[int], param: str, extra: list[str]) -> float:
    """Wall seconds of ``run-cell`` while a second identical job runs beside it."""
    n, T, d = shape
    cmd = [python, "-m", "attnsvm.cli", "run-cell", "--n", str(n), "--T", str(T), "--d", str(d),
           "--param", param, "--no-progress", "--json", *extra]  # fmt: skip
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}  # fmt: skip
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)
    t0 = time.perf_counter()
    first = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    second = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    _, err = first.communicate()
    wall = time.perf_counter() - t0
    second.wait()
    if first.returncode not in (0, 1):  # 1: a cell that is not ok still ran
        raise SystemExit(err[-2000:])
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 32, 64])
    ap.add_argument("--before", type=Path)
    ap.add_argument("--before-python", default=sys.executable)
    ap.add_argument("--before-label", default="")
    args = ap.parse_args()
    table = Table("threads", "cost", "run-cell at size with a second job running",
                  ["run-cell", "W (Frobenius) s", "KQ (nuclear) s"], order=28)  # fmt: skip
    rows = [("this tree, default (the cores given: all here)", sys.executable, ROOT, []),
            ("this tree, --threads 1", sys.executable, ROOT, ["--threads", "1"])]  # fmt: skip
    if args.before:
        label = f"before: {args.before_label or args.before} (default threads)"
        rows.append((label, args.before_python, args.before, []))
    for label, python, tree, extra in rows:
        w = run_cell(python, tree, args.shape, "W", extra)
        kq = run_cell(python, tree, args.shape, "KQ", extra)
        table.add(label, f"{w:.1f}", f"{kq:.1f}")
    n, T, d = args.shape
    table.note(
        f"attnsvm run-cell --n {n} --T {T} --d {d} --param W|KQ (its defaults otherwise: "
        "training, then the SVMs of GD's selection and of the optimal tokens), wall time of "
        "one job while an identical second job runs beside it, on this machine's "
        f"{os.cpu_count()} cores. This tree limits every BLAS, OpenMP and torch pool to the "
        "cores given (threadpoolctl; attnsvm.gd.threads)."
    )
    table.write()


if __name__ == "__main__":
    main()
