"""Cost of the workflow's repair step at start (:meth:`attnsvm.plan.Plan.repair`) on many
finished real-sized block stores: the first start (every store hashed) and a later one (the
verification cache, ``<experiment>/.attnsvm-verify-cache.json``, vouches for stores whose files
did not change: their files are listed and stat'ed, their manifests read, nothing hashed).

The stores are copies of one real block store (computed once with ``write_block``), its
content files hard-linked (the disk holds them once; hashing reads them from the page cache,
so the first start measures the hashing, not the disk) and a manifest of its own per block
(naming that block and its cells), as the workflow writes them. Each size runs the repair
in-process twice, in one run, and prints the ratio.

Usage:
    python bench/bench_repair.py --blocks 1000 10000
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tables import Table  # noqa: E402 - bench/tables.py: BENCHMARKS.md's tables


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


def measure(blocks: int) -> tuple[float, float, int]:
    """Seconds of the first and of a later repair of ``blocks`` finished stores, and the
    files per store."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("ATTNSVM_BENCH_TMP")) as tmp:
        t0 = time.perf_counter()
        plan, per_store = build(Path(tmp) / "results", blocks)
        print(f"{blocks} stores of {per_store} files built in {time.perf_counter() - t0:.1f} s")
        seconds = []
        for _ in range(2):
            t0 = time.perf_counter()
            warnings = plan.repair()
            seconds.append(time.perf_counter() - t0)
            assert warnings == [], warnings[:3]
            print(f"  repair: {seconds[-1]:.2f} s")
    return seconds[0], seconds[1], per_store


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1000, 10000])
    args = ap.parse_args()
    table = Table(
        "repair",
        "workflow",
        "The repair step at workflow start on many finished block stores",
        ["block stores", "files per store", "first start (s)", "later start (s)", "ratio"],
        order=45,
    )
    start_load = load()
    for n in args.blocks:
        first, later, per_store = measure(n)
        table.add(str(n), str(per_store), f"{first:.2f}", f"{later:.2f}", f"{first / later:.1f}x")
    table.note(
        "Plan.repair in-process (what every Snakemake start but a dry run does after taking the "
        "lock): the first start hashes every file of every store and records each verified "
        "store under its files' inode, size, modification and status-change times; a later "
        "start lists and stats the files, reads the manifests and hashes nothing that did not "
        "change. The stores are hard-linked copies of one real block store, each with its own "
        f"manifest (the first start reads them from the page cache). Load average at start "
        f"{start_load}, at end {load()}."
    )
    table.write()


if __name__ == "__main__":
    main()
