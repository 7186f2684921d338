"""Workflow overhead: per-job start-up, store write, collect time for many blocks.

Usage: python bench/bench_overhead.py [--blocks 1000 10000] [--workers 1 2]
* start-up: a fresh interpreter importing what a block job imports (attnsvm, torch, xarray);
* store write: results_to_dataset + atomic Zarr write of one E2 block (100 seeds, 1 param);
* collect: one real 1-cell store copied under the names of a synthetic plan with N blocks
  (grid axis lr with N values, 1 seed, block_size 1; hard links, not copies), then
  attnsvm.sweep.collect.collect_sweep with each --workers count (the collect rule's threads).
Dry-run DAG times are in bench/bench_workflow.py.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.config.grid import parse_config  # noqa: E402
from attnsvm.sweep.collect import collect_sweep  # noqa: E402
from attnsvm.sweep.compute import run_cells  # noqa: E402
from attnsvm.sweep.store import results_to_dataset, write_atomic  # noqa: E402
from attnsvm.sweep.worker import write_block  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, os.cpu_count() or 1])
    args = ap.parse_args()
    code = (
        "import attnsvm.sweep.worker, attnsvm.sweep.compute, attnsvm.sweep.store, torch, xarray"
        ", zarr"
    )
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        ts.append(time.perf_counter() - t0)
    print(f"per-job start-up (fresh interpreter + imports), best of 3: {min(ts):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cells = [Cell(n=6, T=8, d=10, param="W", seed=s) for s in range(100)]
        t0 = time.perf_counter()
        res = run_cells(cells, device="cpu")
        compute = time.perf_counter() - t0
        t0 = time.perf_counter()
        ds = results_to_dataset(res, {"experiment": "e2", "block": "b"})
        write_atomic(ds, tmp / "e2.zarr")
        write = time.perf_counter() - t0
        print(
            f"E2 block (100 seeds, W): compute {compute:.2f} s, store build + write "
            f"{write:.2f} s ({100 * write / (compute + write):.1f}% of the job)"
        )
        one = write_block(
            [Cell(n=6, T=8, d=10, iterations=100, seed=0)], tmp / "one.zarr", experiment="x"
        )
        for N in args.blocks:
            exp = parse_config(
                {
                    "max_blocks": N,  # beyond the default limit on purpose
                    "experiments": {
                        "x": {
                            "fixed": {"n": 6, "T": 8, "d": 10, "iterations": 100},
                            "grid": {"lr": [round(0.001 * (k + 1), 6) for k in range(N)]},
                            "seeds": 1,
                            "block_size": 1,
                        }
                    },
                }
            )["x"]
            blocks = exp.blocks()
            bdir = tmp / f"blocks{N}"
            bdir.mkdir()
            paths = {}
            for b in blocks:
                paths[b.name] = bdir / f"{b.name}.zarr"
                shutil.copytree(one, paths[b.name], copy_function=os.link)
            for workers in args.workers:
                t0 = time.perf_counter()
                sweep = collect_sweep(exp, paths, workers)
                t = time.perf_counter() - t0
                print(
                    f"collect_sweep {len(blocks)} blocks, {workers} worker(s): {t:.1f} s "
                    f"({1e3 * t / len(blocks):.1f} ms per block), sweep dims {dict(sweep.sizes)}",
                    flush=True,
                )
            shutil.rmtree(bdir)


if __name__ == "__main__":
    main()
