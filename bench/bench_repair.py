"""A workflow start with nothing to do, on many finished block stores: the plan
(:meth:`attnsvm.plan.Plan.from_config`, its cells digests) and the repair step
(:meth:`attnsvm.plan.Plan.repair`), the first start (every store read and hashed, the digests
computed) and a later one (one ``stat`` per store, the digests kept: issue 44's "starts in
seconds"). Wall and process CPU seconds (all threads) are both printed: the CPU seconds do not
depend on what else the machine runs.

The stores are one-file stores (:mod:`attnsvm.sweep.onefile`) of one real block store
(computed once with ``write_block``), each with a manifest of its own naming its block and
cells, as the workflow writes them (the first start reads them from the page cache). Each
size runs the start in-process twice, in one run, and prints the ratio::

    python bench/bench_repair.py --blocks 1000 10000 100000
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

from tables import Table  # noqa: E402 - bench/tables.py: BENCHMARKS.md's tables

from attnsvm.plan import Plan  # noqa: E402
from attnsvm.sweep import onefile  # noqa: E402


def config(blocks: int, results: str) -> dict:
    """One experiment of ``blocks`` blocks (one seed each) of a small real cell."""
    return {
        "results": results,
        "max_blocks": blocks,
        "max_cells": max(blocks, 100000),
        "experiments": {
            "big": {
                "figures": [],
                "fixed": {"n": 3, "T": 3, "d": 3, "iterations": 40, "checkpoint_count": 10},
                "seeds": blocks,
                "block_size": 1,
            }
        },
    }


def build(root: Path, blocks: int) -> int:
    """``blocks`` finished one-file block stores under ``root`` (module docstring); returns
    the bytes of one."""
    from attnsvm.sweep.worker import write_block

    plan = Plan.from_config(config(blocks, str(root)))
    planned = plan.blocks("big")
    digests = plan.block_digests("big")
    names = list(planned)
    first = Path(plan.paths.block("big", names[0]))
    write_block(planned[names[0]].cells, first, experiment="big", block=names[0], device="cpu")
    with zipfile.ZipFile(first) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != onefile.MANIFEST}
        manifest = json.loads(zf.read(onefile.MANIFEST))
    for name in names[1:]:
        m = onefile.sealed({**manifest, "block": name, "cells_digest": digests[name]})
        Path(plan.paths.block("big", name)).write_bytes(onefile.zip_bytes(members, m))
    return first.stat().st_size


def start(cfg: dict) -> tuple[float, float, float, list[str]]:
    """One start: (plan wall s, repair wall s, CPU s of both, the repair's warnings)."""
    t0, c0 = time.perf_counter(), time.process_time()
    plan = Plan.from_config(cfg)
    plan.remember()  # the workflow's start records its packs and digests (if not kept)
    t1 = time.perf_counter()
    warnings = plan.repair()
    return t1 - t0, time.perf_counter() - t1, time.process_time() - c0, warnings


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1000, 10000, 100000])
    args = ap.parse_args()
    table = Table(
        "repair",
        "workflow",
        "A start with nothing to do: the plan and the repair step on many finished blocks",
        ["block stores", "files per block store", "first start s (plan + repair)",
         "later start s (plan + repair)", "later start CPU s", "first / later", "target"],
        order=45,
    )  # fmt: skip
    start_load = load()
    targets = {10000: "<= 5 s", 100000: "<= 30 s"}
    for n in args.blocks:
        with tempfile.TemporaryDirectory(dir=os.environ.get("ATTNSVM_BENCH_TMP")) as tmp:
            root = Path(tmp) / "results"
            t0 = time.perf_counter()
            size = build(root, n)
            print(f"{n} stores of {size} bytes built in {time.perf_counter() - t0:.1f} s")
            for name in (".attnsvm-digests.json", ".attnsvm-verify-cache.json"):
                (root / "big" / name).unlink(missing_ok=True)  # the first start computes all
            cfg = config(n, str(root))
            runs = {}
            for which in ("first", "later"):
                plan_s, repair_s, cpu, warnings = start(cfg)
                assert warnings == [], warnings[:3]
                runs[which] = (plan_s, repair_s, cpu)
                print(f"  {which} start: plan {plan_s:.2f} s, repair {repair_s:.2f} s, "
                      f"CPU {cpu:.2f} s", flush=True)  # fmt: skip
        first, later = sum(runs["first"][:2]), sum(runs["later"][:2])
        (fp, fr, _), (lp, lr, lc) = runs["first"], runs["later"]
        table.add(str(n), "1", f"{first:.2f} ({fp:.2f} + {fr:.2f})",
                  f"{later:.2f} ({lp:.2f} + {lr:.2f})", f"{lc:.2f}", f"{first / later:.1f}x",
                  targets.get(n, ""))  # fmt: skip
    table.note(
        "In-process, as every Snakemake start does after parsing the config: Plan.from_config "
        "(validation, blocks, cells digests) with Plan.remember, then Plan.repair (a dry run "
        "checks the same without moving anything); the interpreter's imports and Snakemake's "
        "own DAG of the jobs are not included. The first start computes every cells digest "
        "and reads and hashes every store (its file read once, every member against the "
        "manifest); a later start takes the digests kept under the experiment's settings and "
        "code (.attnsvm-digests.json) and does one stat per store (8 threads): a store whose "
        "stat row is the one recorded when it verified is not read. CPU: process CPU seconds, "
        "all threads. Before issue 44 (bench/tables/repair.md at f9f8adf): 172 files per block "
        "store, a later start of the repair alone 1.25 s at 10^3 and 14.81 s at 10^4 under load "
        "3-7, plus ~2 s of cells digests per start at 10^4."
        f" Load average at start {start_load}, at end {load()}."
    )
    table.write()


if __name__ == "__main__":
    main()
