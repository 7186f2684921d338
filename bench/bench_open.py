"""How long ``attnsvm.open_results`` takes on a finished run, with and without the skeletons.

Usage: python bench/bench_open.py [RESULTS] [--repeats 3]

Copies RESULTS (default: results/, a finished default sweep) to a temporary directory, so
that nothing is written into it, and times, each in a fresh process after its imports (median
of ``--repeats``, wall and CPU seconds):

- an open without the stores' skeletons (each experiment's ``.attnsvm-open-cache.json``
  removed, as in results written before the derive jobs kept them): every store's metadata
  decoded, the skeletons written;
- an open with them (as after a run, whose derive jobs keep them): no store decoded;
- that open and a first read of one summary variable (the summary is decoded there).

The issue's target (#41): open_results in <= 2 s on the default sweep. Writes
bench/tables/open_results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

from attnsvm.sweep.skeleton import CACHE_NAME

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 2.0

#: timed in a child process after its imports; prints {"wall": s, "cpu": s, ...}
CHILD = """
import json, sys, time
import attnsvm, netCDF4, xarray, zarr
results, read = sys.argv[1], sys.argv[2] == "read"
wall, cpu = time.perf_counter(), time.process_time()
tree = attnsvm.open_results(results)
if read:
    first = next(iter(tree.children))
    summary = tree[first + "/summary"]
    float(summary[next(iter(summary.data_vars))].sum())
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
    "experiments": len(tree.children),
    "variables": sum(len(n.data_vars) for n in tree.subtree if n.level == 2)}))
"""


def timed(results: Path, read: bool = False) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(results), "read" if read else "open"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="results", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    table = Table(
        "open_results",
        "status",
        "Opening a finished run: `attnsvm.open_results`",
        ["open", "wall s", "CPU s", f"<= {TARGET_S:g} s"],
        order=40,
    )
    tmp = Path(tempfile.mkdtemp(prefix="attnsvm-open-"))
    try:
        results = Path(shutil.copytree(args.results, tmp / "results"))
        timed(results)  # the copy's first look (its stores' quick-check caches)
        cases = {
            "without the skeletons (every store decoded)": (True, False),
            "with the skeletons (as after a run)": (False, False),
            "with them, and a first read of one summary variable": (False, True),
        }
        info: dict = {}
        for label, (fresh, read) in cases.items():
            runs = []
            for _ in range(args.repeats):
                if fresh:
                    for cache in results.glob(f"*/{CACHE_NAME}"):
                        cache.unlink()
                runs.append(info := timed(results, read))
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            table.add(label, f"{wall:.2f}", f"{cpu:.2f}", "met" if wall <= TARGET_S else "missed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table.note(
        f"A copy of `{args.results}` ({info['experiments']} experiments, "
        f"{info['variables']:,} variables in their sweeps, summaries and claims); each open "
        f"in a fresh process after its imports, median of {args.repeats}, at niceness "
        f"{os.nice(0)} (on a shared machine, a negative niceness keeps other work from "
        "stretching the wall time). Without the "
        "skeletons an open decodes every store's metadata (netCDF-C, zarr, xarray's CF "
        "decoding) and keeps them in each experiment's `.attnsvm-open-cache.json`; with them "
        "(a run's derive jobs write them) it builds the tree from them and decodes a store at "
        "the first read of one of its variables (docs/store.md, Layout). The integrity "
        "checks run at every open (each sweep's files against its manifest, each summary and "
        "ledger against its digest record)."
    )
    table.write()


if __name__ == "__main__":
    main()
