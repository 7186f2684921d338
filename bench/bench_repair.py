"""Cost of the workflow's repair step at start (:meth:`attnsvm.plan.Plan.repair`) on many
finished real-sized block stores: the first start (every store hashed) and a later one (the
verification cache, ``<experiment>/.attnsvm-verify-cache.json``, vouches for stores whose
manifest and listed files did not change: one ``stat`` per file, no manifest read, nothing
hashed). Wall and process CPU seconds (all threads) are both printed: the CPU seconds do not
depend on what else the machine runs.

The stores are copies of one real block store (computed once with ``write_block``), its
content files hard-linked (the disk holds them once; hashing reads them from the page cache,
so the first start measures the hashing, not the disk) and a manifest of its own per block
(naming that block and its cells), as the workflow writes them. Each size runs the repair
in-process twice, in one run, and prints the ratio.

With ``--before DIR`` (a source tree of an earlier commit with the stat-keyed cache, 5b80805
to 46c2b06), the later start of that tree's repair runs first on the same stores, in a
subprocess, its cache filled by that tree's own key function without hashing (what its first
start records for stores that verify; its first start hashes exactly as this one does):

    git archive 46c2b06 | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python bench/bench_repair.py --blocks 1000 10000 --before /tmp/before
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tables import Table  # noqa: E402 - bench/tables.py: BENCHMARKS.md's tables

from attnsvm.sweep.integrity import VERIFY_CACHE  # noqa: E402


def config(blocks: int, results: str) -> dict:
    """One experiment of ``blocks`` blocks (one seed each) of a small real cell."""
    return {
        "results": results,
        "max_blocks": blocks,
        "max_cells": max(blocks, 100000),
        "experiments": {
            "big": {
                "fixed": {"n": 3, "T": 3, "d": 3, "iterations": 40, "checkpoint_count": 10},
                "seeds": blocks,
                "block_size": 1,
            }
        },
    }


def build(root: Path, blocks: int):
    """The plan and ``blocks`` finished block stores under ``root`` (see the module docstring)."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.plan import Plan
    from attnsvm.sweep.integrity import MANIFEST
    from attnsvm.sweep.worker import write_block

    plan = Plan.from_config(config(blocks, str(root)))
    planned = plan.blocks("big")
    names = list(planned)
    first = Path(plan.paths.block("big", names[0]))
    write_block(planned[names[0]].cells, first, experiment="big", block=names[0], device="cpu")
    manifest = json.loads((first / MANIFEST).read_text())
    files = [rel for rel in manifest["files"]]
    for name in names[1:]:
        dest = Path(plan.paths.block("big", name))
        for rel in files:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.link(first / rel, dest / rel)
        m = {**manifest, "block": name, "cells_digest": cells_digest(planned[name].cells)}
        (dest / MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True))
    return plan, len(files) + 1


#: run by ``python -c`` on the ``--before`` tree: fill its cache as its first start would for
#: stores that verify (its own key function, no hashing), then time one later start
BEFORE_LATER = """
import json, sys, time
from pathlib import Path
from attnsvm.plan import Plan
from attnsvm.sweep.integrity import VerifyCache, store_stat_key, verify_store
plan = Plan.from_config(json.loads(sys.argv[1]))
cache = VerifyCache(Path(plan.paths.blocks_dir("big")).parent)
for name in plan.blocks("big"):
    path = plan.paths.block("big", name)
    cache.put(name, store_stat_key(path, verify_store(path, contents=False)))
cache.save()
t0, c0 = time.perf_counter(), time.process_time()
warnings = plan.repair()
print(json.dumps([time.perf_counter() - t0, time.process_time() - c0, warnings[:3]]))
"""


def before_later(tree: Path, cfg: dict) -> tuple[float, float]:
    """Wall and CPU seconds of a later start of the repair step of the package in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", BEFORE_LATER, json.dumps(cfg)],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall, cpu, warnings = json.loads(proc.stdout.strip().splitlines()[-1])
    assert warnings == [], warnings
    print(f"  before: later repair {wall:.2f} s (CPU {cpu:.2f} s)")
    return wall, cpu


def measure(blocks: int, before: Path | None) -> dict:
    """Wall and CPU seconds of the first and of a later repair of ``blocks`` finished
    stores (and of a later one of the ``before`` tree), and the files per store."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("ATTNSVM_BENCH_TMP")) as tmp:
        t0 = time.perf_counter()
        plan, per_store = build(Path(tmp) / "results", blocks)
        print(f"{blocks} stores of {per_store} files built in {time.perf_counter() - t0:.1f} s")
        out: dict = {"files": per_store}
        if before is not None:
            out["before"] = before_later(before, config(blocks, str(Path(tmp) / "results")))
            Path(plan.paths.blocks_dir("big")).parent.joinpath(VERIFY_CACHE).unlink()
        for start in ("first", "later"):
            t0, c0 = time.perf_counter(), time.process_time()
            warnings = plan.repair()
            out[start] = (time.perf_counter() - t0, time.process_time() - c0)
            assert warnings == [], warnings[:3]
            print(f"  {start} repair: {out[start][0]:.2f} s (CPU {out[start][1]:.2f} s)")
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--before", default="", help="a source tree of an earlier commit")
    args = ap.parse_args()
    before = Path(args.before).resolve() if args.before else None
    columns = ["block stores", "files per store", "first start (s)", "later start (s)",
               "later start CPU (s)", "first / later"]  # fmt: skip
    if before is not None:
        columns += ["before: later start (s)", "before: later start CPU (s)", "CPU before / now"]
    table = Table(
        "repair",
        "workflow",
        "The repair step at workflow start on many finished block stores",
        columns,
        order=45,
    )
    start_load = load()
    for n in args.blocks:
        r = measure(n, before)
        (first, _), (later, later_cpu) = r["first"], r["later"]
        row = [str(n), str(r["files"]), f"{first:.2f}", f"{later:.2f}", f"{later_cpu:.2f}",
               f"{first / later:.1f}x"]  # fmt: skip
        if before is not None:
            b_wall, b_cpu = r["before"]
            row += [f"{b_wall:.2f}", f"{b_cpu:.2f}", f"{b_cpu / later_cpu:.1f}x"]
        table.add(*row)
    table.note(
        "Plan.repair in-process (what every Snakemake start does after taking the lock; a dry "
        "run checks the same without moving anything); Snakemake's own start (DAG, output "
        "times) is not included. The first start hashes every file of every store and records "
        "each verified store under the stat rows (size, inode, modification and status-change "
        "times) of its manifest and listed files, with the manifest's entries; a later start "
        "stats those files (relative to the store's open folder, 8 threads) and reads no "
        "manifest and hashes nothing that did not change. CPU: process CPU seconds, all "
        "threads. The stores are hard-linked copies of one real block store, each with its own "
        "manifest (the first start reads them from the page cache)."
        + (
            f" before: the later start of the package in {args.before} on the same stores "
            "(its cache filled by its own key function), run just before this tree's first start."
            if before is not None
            else ""
        )
        + f" Load average at start {start_load}, at end {load()}."
    )
    table.write()


if __name__ == "__main__":
    main()
