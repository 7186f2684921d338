"""Workflow overhead: per-job start-up, store write, collect time for many blocks.

Usage: python bench/bench_overhead.py [--blocks 1000 10000] [--workers 1 2]
* start-up: a fresh interpreter importing what a block job imports (attnsvm, torch, xarray);
* store write: results_to_dataset + atomic Zarr write of one E2 block (100 seeds, 1 param);
* collect: one real 1-cell store copied under the names of a synthetic plan with N blocks
  (grid axis lr with N values, 1 seed, block_size 1; arrays hard-linked, attributes and
  manifest rewritten per block, so that each store verifies as its block), then
  attnsvm.sweep.collect.collect_sweep with each --workers count (the collect rule's threads).
Dry-run DAG times are in bench/bench_workflow.py.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell, cells_text, text_digest  # noqa: E402
from attnsvm.plan import parse_config  # noqa: E402
from attnsvm.sweep.collect import collect_sweep  # noqa: E402
from attnsvm.sweep.integrity import MANIFEST, write_manifest  # noqa: E402
from attnsvm.sweep.store import results_to_dataset, write_atomic  # noqa: E402
from attnsvm.sweep.worker import write_block  # noqa: E402
from attnsvm.tasks import run_cells  # noqa: E402


def synthetic_block(template: Path, path: Path, block) -> Path:
    """A copy of the 1-cell store ``template`` that verifies as ``block`` of the plan: its
    arrays hard-linked, its attributes (experiment, block, cells, digest) and its manifest
    its own, so that collect reads and checks it as it would a real block store."""
    shutil.copytree(template, path, copy_function=os.link)
    meta = path / "zarr.json"
    doc = json.loads(meta.read_text())
    text = cells_text(block.cells)
    doc["attributes"].update(
        experiment=block.experiment, block=block.name, cells=text, cells_digest=text_digest(text)
    )
    meta.unlink()  # a hard link: the template's own file stays as it is
    meta.write_text(json.dumps(doc))
    (path / MANIFEST).unlink()
    write_manifest(path, doc["attributes"])
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, os.cpu_count() or 1])
    args = ap.parse_args()
    code = "import attnsvm.sweep.worker, attnsvm.tasks, attnsvm.sweep.store, torch, xarray, zarr"
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        ts.append(time.perf_counter() - t0)
    table = Table(
        "overhead",
        "workflow",
        "Per-job start-up, store writes and collect",
        ["what", "measured"],
        order=20,
    )
    table.add(
        "per-job start-up: fresh interpreter importing attnsvm, torch, xarray, zarr",
        f"{min(ts):.2f} s (best of 3)",
    )
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
        table.add(
            "E2 block job (100 seeds, W): compute / build + write the block store",
            f"{compute:.2f} s / {write:.2f} s ({100 * write / (compute + write):.0f}% of the job)",
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
                paths[b.name] = synthetic_block(one, bdir / f"{b.name}.zarr", b)
            for workers in args.workers:
                t0 = time.perf_counter()
                sweep = collect_sweep(exp, paths, workers)
                t = time.perf_counter() - t0
                assert sweep.sizes["lr"] == len(blocks)
                table.add(
                    f"collect {len(blocks)} blocks, {workers} process{'es' * (workers > 1)}",
                    f"{t:.1f} s ({1e3 * t / len(blocks):.0f} ms per block)",
                )
            shutil.rmtree(bdir)
    table.note(
        "Synthetic stores for collect: one real 1-cell store hard-linked under N block names, "
        "each with the attributes and manifest of its block (collect verifies every one). "
        "Start-up is paid once per block job, so blocks should hold seconds to minutes of work "
        "(`block_size`, `block_seconds`; config/README.md). Dry-run planning times: the "
        "table below (bench/bench_workflow.py)."
    )
    table.write()


if __name__ == "__main__":
    main()
