"""attnsvm per-cell cost vs d, n and T (one axis at a time around (n, T, d) = (6, 8, 10)).

Usage: python bench/bench_scaling.py [--iterations 2000] [--batch 8] [--out bench/scaling.png]
       python bench/bench_scaling.py --plot-only     # redraw the figure from bench/scaling.csv
Per cell: training W and KQ (per seed of a batch), Frobenius and nuclear SVM (optimal
tokens), mean over --seeds instances. Prints a markdown table, writes the numbers to the
figure's name with .csv, and saves a log-log figure.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.gd.train import train_cells  # noqa: E402
from attnsvm.svm import solve_frobenius, solve_nuclear  # noqa: E402
from attnsvm.svm.constraints import att_svm_constraints  # noqa: E402

AXES = {"d": [10, 20, 50, 100], "n": [6, 12, 25, 50], "T": [8, 16, 32]}
BASE = {"n": 6, "T": 8, "d": 10}
PARTS = ("train W", "train KQ", "Frobenius", "nuclear")


def cost(n: int, T: int, d: int, args) -> dict[str, float]:
    out = {}
    for p in ("W", "KQ"):
        cells = [
            Cell(n=n, T=T, d=d, param=p, iterations=args.iterations, seed=s)
            for s in range(args.batch)
        ]
        t0 = time.perf_counter()
        train_cells(cells, device="cpu")
        out[f"train {p}"] = (time.perf_counter() - t0) / args.batch
    fro, nuc = [], []
    for s in range(args.seeds):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=s))
        cons = att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
        fro.append(solve_frobenius(cons).seconds)
        nuc.append(solve_nuclear(cons).seconds)
    out["Frobenius"], out["nuclear"] = float(np.mean(fro)), float(np.mean(nuc))
    return out


def plot(results: dict, out: str, iterations: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    fig, axs = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
    for ax, (axis, values) in zip(axs, AXES.items(), strict=True):
        for p in PARTS:
            ax.loglog(values, [results[(axis, v)][p] for v in values], "o-", label=p)
        ax.xaxis.set_major_locator(FixedLocator(values))  # the measured values, no 2x10^1
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(v) for v in values])
        ax.set_xlabel(axis + f" (others at n={BASE['n']}, T={BASE['T']}, d={BASE['d']})")
        ax.grid(True, which="both", alpha=0.3)
    axs[0].set_ylabel("seconds per cell")
    axs[0].legend(fontsize=8)
    fig.suptitle(f"attnsvm per-cell cost, {iterations} iterations, 1 thread")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"figure: {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default="bench/scaling.png")
    ap.add_argument("--plot-only", action="store_true", help="redraw from the .csv")
    args = ap.parse_args()
    table = Path(args.out).with_suffix(".csv")
    if args.plot_only:
        with table.open() as fh:
            rows = list(csv.DictReader(fh))
        results = {(r["axis"], int(r["value"])): {p: float(r[p]) for p in PARTS} for r in rows}
        plot(results, args.out, int(rows[0]["iterations"]))
        return
    torch.set_num_threads(1)
    results = {}
    out = Table(
        "scaling",
        "cost",
        "Per-cell cost against d, n and T",
        ["axis", "value", "(n,T,d)", *(f"{p} s" for p in PARTS)],
        order=20,
    )
    for axis, values in AXES.items():
        for v in values:
            shape = dict(BASE, **{axis: v})
            c = cost(shape["n"], shape["T"], shape["d"], args)
            results[(axis, v)] = c
            tri = f"({shape['n']},{shape['T']},{shape['d']})"
            out.add(axis, v, tri, *(f"{c[p]:.4g}" for p in PARTS))
    with table.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["axis", "value", "iterations", *PARTS])
        for (axis, v), c in results.items():
            w.writerow([axis, v, args.iterations, *(c[p] for p in PARTS)])
    plot(results, args.out, args.iterations)
    out.note(f"![per-cell cost]({Path(args.out).as_posix()})")
    out.note(
        f"One axis at a time around (n, T, d) = ({BASE['n']}, {BASE['T']}, {BASE['d']}); "
        f"training is {args.iterations} iterations per seed of a batch of {args.batch} (seconds "
        f"per seed), the SVMs use the optimal tokens (mean of {args.seeds} instances); the "
        f"numbers are also in `{table.as_posix()}`."
    )
    out.write()


if __name__ == "__main__":
    main()
