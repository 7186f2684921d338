"""The photo tokens' SVMs at n = 32 and 64 (issue 28): certified answers, routes, time, memory.

Usage: python bench/bench_photo.py [--n 32 64] [--seeds 8] [--quick]
Runs the cells of config/beyond.yaml's b8_real_photos at the given n (both patch sizes,
positional on and off, W and KQ, 2000 iterations) through the sweep's own path
(:func:`attnsvm.tasks.run_cells`: training, then the Frobenius and nuclear SVMs of GD's
selection and of the optimal tokens, each distinct system solved once) and counts, per
(n, patch, positional), the systems, those certified, and the nuclear answers the
interior-point route certified alone or after the Newton refinement of
attnsvm/svm/nuclear_kkt.py (docs/science.md §4, "Near-duplicate tokens"), with the median
and largest seconds of each SVM and numpy's peak allocation during the run (tracemalloc;
torch's training allocations are not traced).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.tasks import run_cells  # noqa: E402


def measure(n: int, patch: int, positional: bool, seeds: int, iterations: int) -> dict:
    """Run the W and KQ cells of one (n, patch, positional) and tally their distinct SVMs."""
    cells = [
        Cell(generator="photos", n=n, patch=patch, positional=positional, param=param,
             iterations=iterations, seed=s)
        for param in ("W", "KQ") for s in range(seeds)
    ]  # fmt: skip
    tracemalloc.start()
    t0 = time.perf_counter()
    results = run_cells(cells, device="cpu")
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    seen: dict[int, tuple[str, object]] = {}
    for res in results:
        for key, r in res.svms.items():
            seen.setdefault(id(r), (key.split("_")[0], r))
    out = {"cells": len(cells), "wall": wall, "MB": peak, "T": cells[0].T, "d": cells[0].d}
    for norm in ("fro", "nuc"):
        rs = [r for k, r in seen.values() if k == norm]
        secs = np.array([r.seconds for r in rs])
        out[norm] = {
            "systems": len(rs),
            "certified": sum(r.status in ("optimal", "infeasible") for r in rs),
            "refined": sum(r.solver.endswith("+kkt") for r in rs),
            "conic": sum(
                r.solver in ("direct-clarabel", "direct-scs") or "cvxpy" in r.solver for r in rs
            ),  # fmt: skip
            "median": float(np.median(secs)) if secs.size else float("nan"),
            "max": float(secs.max()) if secs.size else float("nan"),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--seeds", type=int, default=8, help="seeds per grid point (b8 has 8)")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="n = 32, 2 seeds (a trial)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ns, seeds = ([32], 2) if args.quick else (args.n, args.seeds)
    table = Table(
        "svm_photo",
        "svm",
        "The photo tokens' SVMs at n = 32 and 64",
        ["(n, patch, positional)", "(T, d), rows", "cells", "Frobenius certified",
         "Frobenius s (median / max)", "nuclear certified", "of them refined",
         "nuclear s (median / max)", "peak MB", "wall s"],
        order=40,
    )  # fmt: skip
    total = {"fro": [0, 0], "nuc": [0, 0, 0], "wall": 0.0}
    for n, patch, positional in itertools.product(ns, [2, 4], [False, True]):
        r = measure(n, patch, positional, seeds, args.iterations)
        fro, nuc = r["fro"], r["nuc"]
        total["fro"][0] += fro["certified"]
        total["fro"][1] += fro["systems"]
        total["nuc"][0] += nuc["certified"]
        total["nuc"][1] += nuc["systems"]
        total["nuc"][2] += nuc["refined"]
        total["wall"] += r["wall"]
        table.add(
            f"({n}, {patch}, {positional})", f"({r['T']}, {r['d']}), {n * (r['T'] - 1)}",
            r["cells"], f"{fro['certified']}/{fro['systems']}",
            f"{fro['median']:.3g} / {fro['max']:.3g}", f"{nuc['certified']}/{nuc['systems']}",
            nuc["refined"], f"{nuc['median']:.3g} / {nuc['max']:.3g}", f"{r['MB']:.0f}",
            f"{r['wall']:.1f}",
        )  # fmt: skip
    table.add(
        "all", "", "", f"{total['fro'][0]}/{total['fro'][1]}", "",
        f"{total['nuc'][0]}/{total['nuc'][1]}", total["nuc"][2], "", "", f"{total['wall']:.1f}",
    )  # fmt: skip
    table.note(
        f"config/beyond.yaml's b8_real_photos cells at n = {', '.join(map(str, ns))} ({seeds} "
        f"seeds, W and KQ, {args.iterations} iterations) run by attnsvm.tasks.run_cells on one "
        "core: every distinct SVM (GD's selection and the optimal tokens; W and KQ cells of a "
        "seed share the latter) counted once. `certified`: optimal with its certificate "
        "(every row checked, duality gap) or infeasible with a checked Farkas vector; "
        "`of them refined`: nuclear answers that the interior-point route (barrier / "
        "primal-dual) left above GAP_TOL and the Newton refinement of attnsvm/svm/nuclear_kkt.py "
        'certified (docs/science.md §4, "Near-duplicate tokens"); before it, those went to '
        "Clarabel / SCS, and config/beyond.yaml left n = 32 out because its cells ran over 10 "
        "minutes unfinished. Seconds are each SVM's own (SVMResult.seconds); `peak MB` is "
        "numpy's peak allocation during the run (tracemalloc); `wall s` includes training."
    )
    table.write()


if __name__ == "__main__":
    main()
