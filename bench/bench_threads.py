"""Threads as given: ``attnsvm run-cell`` on a cell at size, with a second job running (issue 44).

Usage: python bench/bench_threads.py [--shape 256 32 64] [--before DIR --before-python PY]
       python bench/bench_threads.py --pools [--cells 30]

The cell (n, T, d) = ``--shape`` (W, then KQ: the Frobenius and the nuclear SVMs of its
selection and of its optimal tokens) runs through ``attnsvm run-cell`` while a second job
runs the same command beside it (both started together; the first one's wall time is
reported). Each row is one way of giving cores: this tree's default (torch's and the OpenMP
pools limited to the cores the process was given, here its CPU affinity, all cores; BLAS to
one thread), this tree with
``--threads 1``, and, with ``--before``, another checkout's ``run-cell``, whose BLAS and
OpenMP pools start a thread per core (and torch's its own) whatever else runs.

``--pools``: why :func:`attnsvm.gd.threads.limited` gives the BLAS pools one thread. In one
process, the E3 block at (n, T, d) = (15, 15, 20) of config/paper.yaml (its first ``--cells``
cells: both SVMs of the optimal tokens) through :func:`attnsvm.run_cells` with every pool at
the machine's cores, BLAS pools included (as before), and as :func:`limited` sets them; then
a 2,000-row Cholesky factorization (the size of the nuclear working set's largest Schur
complements) with each BLAS thread count.
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


def pools(count: int) -> None:
    """The ``--pools`` table (module docstring)."""
    import numpy as np
    import scipy.linalg
    import yaml
    from threadpoolctl import threadpool_info, threadpool_limits

    import attnsvm.gd.threads as threads
    from attnsvm import run_cells
    from attnsvm.config.grid import planned_experiment

    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    cells = [c for b in planned_experiment(paper, "e3_rank").blocks() for c in b.cells
             if (c.n, c.T, c.d) == (15, 15, 20)][:count]  # fmt: skip
    cores = os.cpu_count() or 1
    run_cells(cells[:2], threads=cores)  # imports and first calls paid before the timing
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    rng = np.random.default_rng(0)
    G = rng.standard_normal((2000, 2000))
    H = G @ G.T + 2000 * np.eye(2000)
    table = Table("blas_pools", "cost", "BLAS threads for the SVM solvers",
                  ["BLAS threads per pool", f"E3 block, {len(cells)} cells, s",
                   "2,000-row Cholesky ms"], order=29)  # fmt: skip
    answers = {}
    for n_blas in sorted({cores, threads.BLAS_THREADS}, reverse=True):
        before, threads.BLAS_THREADS = threads.BLAS_THREADS, n_blas
        try:
            t0 = time.perf_counter()
            res = run_cells(cells, threads=cores)
            wall = time.perf_counter() - t0
        finally:
            threads.BLAS_THREADS = before
        answers[n_blas] = [[s.W for s in r.svms.values()] for r in res]
        with threadpool_limits(limits=n_blas, user_api="blas"):
            t0 = time.perf_counter()
            for _ in range(5):
                scipy.linalg.cholesky(H, lower=True)
            chol = (time.perf_counter() - t0) / 5 * 1e3
        label = f"{n_blas}" + (" (attnsvm.gd.threads.limited)" if n_blas == before else "")
        table.add(label, f"{wall:.2f}", f"{chol:.0f}")
    pairs = [(a, b) for x, y in zip(*answers.values(), strict=True)
             for a, b in zip(x, y, strict=True) if a is not None and b is not None]  # fmt: skip
    diff = max((np.abs(a - b).max() / np.abs(b).max() for a, b in pairs), default=0.0)
    table.note(
        f"One process, {cores} cores, torch and OpenMP pools at {cores} threads in every row; "
        f"{len(blas)} BLAS pools loaded ({', '.join(Path(i['filepath']).name for i in blas)}). "
        "E3 block: attnsvm.run_cells on the first cells of config/paper.yaml's e3_rank at "
        "(n, T, d) = (15, 15, 20) (no training; the Frobenius and the nuclear SVM of the "
        "optimal tokens), wall seconds. Cholesky: scipy.linalg.cholesky of a 2,000 x 2,000 "
        "positive definite matrix, mean of 5. The SVM answers of the two rows differ by at "
        f"most {diff:.1e} of their largest entry (a BLAS call splits its sums by its thread "
        "count; with one BLAS thread, answers no longer depend on the cores given)."
    )
    table.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=int, nargs=3, default=[256, 32, 64])
    ap.add_argument("--before", type=Path)
    ap.add_argument("--before-python", default=sys.executable)
    ap.add_argument("--before-label", default="")
    ap.add_argument("--pools", action="store_true", help="the BLAS pools table instead")
    ap.add_argument("--cells", type=int, default=30, help="--pools: cells of the E3 block")
    args = ap.parse_args()
    if args.pools:
        pools(args.cells)
        return
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
        f"{os.cpu_count()} cores. This tree limits torch's and the OpenMP pools to the cores "
        "given and every BLAS pool to one thread (threadpoolctl; attnsvm.gd.threads, "
        "bench/tables/blas_pools.md); with both jobs given all cores, their torch threads "
        "share them."
    )
    table.write()


if __name__ == "__main__":
    main()
