"""Per-cell time and memory of training and each SVM as n, T and d grow (issue 28).

Usage: python bench/bench_scaling.py [--range paper|size|all] [--seeds N] [--quick]
       python bench/bench_scaling.py --plot-only   # redraw the figures from their .csv files

Two ranges, one table and one log-log figure each, measured the same way:

- ``paper``: the paper's sizes, one axis at a time around (n, T, d) = (6, 8, 10) (table
  ``scaling``, bench/scaling.png); training is a batch of 8 seeds (the cost per seed), the SVMs
  solve the cell's optimal tokens;
- ``size``: realistic sizes, one axis at a time around a base shape per part, up to 64,512
  Att-SVM rows (table ``size``, bench/size.png), with issue 28's size targets; the SVMs solve
  a planted selection (the token ``argmax_t x_it^T W* z_i`` of a Gaussian W*, feasible by
  construction), training is one cell.

Every measurement runs in a child forked from a parent that has only imported and run each
part once on a tiny shape (so no heap left behind by an earlier measurement is reused, and no
child pays a first call's lazy imports): its CPU seconds (one torch and
one BLAS thread, so waiting for a core on a shared machine is not counted) and the growth of
its peak resident set (Linux ``ru_maxrss`` against the resident set at the fork: numpy's,
torch's and the solvers' allocations alike). Each sweep's growth exponent is the slope of
log seconds against log of the axis.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.gd.train import train_cells  # noqa: E402
from attnsvm.svm import solve_frobenius, solve_nuclear  # noqa: E402
from attnsvm.svm.constraints import Constraints, att_svm_constraints  # noqa: E402
from attnsvm.svm.norms import solve_norm_svm  # noqa: E402

AXES = ("n", "T", "d")
Shape = tuple[int, int, int]


@dataclass(frozen=True)
class Range:
    """One range of sizes: its table, figure and sweeps (part -> (base shape, axis values))."""

    table: str
    order: int
    title: str
    figure: str
    selection: str  # "optimal" (the cell's optimal tokens) or "planted"
    batch: int  # training seeds per batch (the cost is per seed)
    iterations: int
    seeds: int  # SVM instances per shape (--seeds overrides)
    sweeps: dict[str, tuple[Shape, dict[str, list[int]]]]
    #: issue 28's targets: (part, shape) -> CPU seconds on one core
    targets: dict[tuple[str, Shape], float]


_PAPER_AXES = {"n": [6, 12, 25, 50], "T": [8, 16, 32], "d": [10, 20, 50, 100]}
_AT_SIZE = {"n": [16, 64, 256], "T": [8, 16, 32], "d": [16, 32, 64]}
RANGES = {
    "paper": Range(
        "scaling", 20, "Per-cell cost against d, n and T", "bench/scaling.png", "optimal", 8,
        2000, 2,
        {p: ((6, 8, 10), _PAPER_AXES) for p in ("train W", "train KQ", "Frobenius", "nuclear")},
        {},
    ),
    "size": Range(
        "size", 25, "Per-cell cost at realistic size", "bench/size.png", "planted", 1, 1000, 1,
        {
            "Frobenius": (
                (256, 32, 64),
                {"n": [64, 128, 256, 512, 1024], "T": [8, 16, 32, 64], "d": [16, 32, 64]},
            ),
            "nuclear": ((16, 8, 16), {"n": [8, 16, 32, 64], "T": [4, 8, 16], "d": [8, 16, 32]}),
            "nuclear at size": (
                (256, 32, 64),
                {"n": [64, 128, 256], "T": [8, 16, 32], "d": [16, 32, 64]},
            ),
            **{
                f"{norm} norm": ((64, 32, 16), {"n": [16, 64, 128], "T": [8, 16, 32],
                                                "d": [8, 16, 24]})
                for norm in ("max", "l3", "spec")
            },
            "train W": ((64, 16, 32), _AT_SIZE),
            "train KQ": ((64, 16, 32), _AT_SIZE),
            "train W at size": ((256, 32, 64), {"n": [64, 256], "T": [8, 32], "d": [16, 64]}),
            "train KQ at size": ((256, 32, 64), {"n": [64, 256], "T": [8, 32], "d": [16, 64]}),
        },
        {
            ("Frobenius", (256, 32, 64)): 5.0,
            ("Frobenius", (1024, 64, 64)): 60.0,
            ("nuclear at size", (256, 32, 64)): 60.0,
        },
    ),
}  # fmt: skip
#: a trial of the script: tiny shapes, same code paths
QUICK = {
    "train W": ((8, 4, 8), {"n": [4, 8], "T": [4, 8], "d": [4, 8]}),
    "train KQ": ((8, 4, 8), {"n": [4, 8], "T": [4, 8], "d": [4, 8]}),
    "Frobenius": ((64, 16, 16), {"n": [32, 64], "T": [8, 16], "d": [8, 16]}),
    "nuclear": ((8, 4, 8), {"n": [4, 8], "T": [4, 8], "d": [4, 8]}),
}


#: the solver of each SVM part (the ``<norm> norm`` parts: :func:`solve_norm_svm`)
_SOLVE = {"Frobenius": solve_frobenius, "nuclear": solve_nuclear, "nuclear at size": solve_nuclear}


def svm_rows(n: int, T: int, d: int, seed: int, selection: str) -> Constraints:
    """Att-SVM rows of a cell's optimal tokens, or of the selection of a Gaussian W*
    (``planted``: feasible by construction)."""
    ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed, train=False))
    if selection == "optimal":
        return att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
    W = np.random.default_rng(seed).standard_normal((d, d))
    alpha = np.argmax(np.einsum("ntd,de,ne->nt", ds.X, W, ds.Z), axis=1)
    return att_svm_constraints(ds.X, ds.Z, alpha)


def _resident_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def in_child(work) -> dict:
    """Run ``work()`` (returning a dict) in a forked child: adds its CPU ``seconds`` and
    ``MB`` (peak resident set growth over the fork's)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report through the pipe, leave without cleanup
        os.close(r)
        code = 0
        try:
            base = _resident_mb()
            t0 = time.process_time()
            out = work()
            out["seconds"] = time.process_time() - t0
            out["MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
            os.write(w, json.dumps(out).encode())
        except BaseException as err:  # noqa: BLE001  (reported by the parent, not swallowed)
            os.write(w, json.dumps({"error": repr(err)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    out = json.loads(b"".join(chunks) or b'{"error": "the child died without a word"}')
    if "error" in out:
        raise RuntimeError(f"measurement failed in its child: {out['error']}")
    return out


def measure(part: str, shape: Shape, rng: Range, seeds: int) -> dict:
    """Mean CPU seconds per cell, peak MB and solved share of ``part`` at ``shape``."""
    n, T, d = shape
    param = part.split()[1] if part.startswith("train") else None

    def train() -> dict:
        cells = [
            Cell(n=n, T=T, d=d, param=param, iterations=rng.iterations, seed=s)
            for s in range(rng.batch)
        ]
        train_cells(cells, device="cpu")
        return {}

    def solve(seed: int):
        def work() -> dict:
            cons = svm_rows(n, T, d, seed, rng.selection)
            t0 = time.process_time()
            res = _SOLVE[part](cons) if part in _SOLVE else solve_norm_svm(cons, part.split()[0])
            return {"solve": time.process_time() - t0, "solved": bool(res.solved)}

        return work

    if param is not None:
        runs = [in_child(train)]
        secs = [runs[0]["seconds"] / rng.batch]
    else:
        runs = [in_child(solve(s)) for s in range(seeds)]
        secs = [r["solve"] for r in runs]  # the solve alone, not building its rows
    solved = [r["solved"] for r in runs if "solved" in r]
    return {
        "seconds": float(np.mean(secs)),
        "MB": float(max(r["MB"] for r in runs)),
        "solved": f"{sum(solved)}/{len(solved)}" if solved else "-",
    }


def exponent(values: list[int], seconds: list[float]) -> float:
    """Slope of log(seconds) against log(value): the fitted growth exponent."""
    return float(np.polyfit(np.log(values), np.log(seconds), 1)[0])


def plot(rows: list[dict], title: str, out: str) -> None:
    """Log-log figure: CPU seconds (top) and peak MB (bottom) per cell against each axis."""
    import matplotlib  # noqa: PLC0415  (only the figure needs it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator  # noqa: PLC0415

    fig, axs = plt.subplots(2, 3, figsize=(13.5, 6.4), sharey="row", sharex="col")
    parts = list(dict.fromkeys(r["part"] for r in rows))
    for col, axis in enumerate(AXES):
        values = sorted({int(r["value"]) for r in rows if r["axis"] == axis})
        for row, (key, label) in enumerate((("seconds", "CPU seconds"), ("MB", "peak MB"))):
            ax = axs[row, col]
            for part in parts:
                pts = [r for r in rows if r["part"] == part and r["axis"] == axis]
                xs = [int(r["value"]) for r in pts]
                ys = [max(float(r[key]), 1e-3) for r in pts]
                (line,) = ax.loglog(xs, ys, "o-", label=part)
                # an SVM answer that did not certify: a hollow marker (the table counts it)
                bad = [i for i, r in enumerate(pts) if str(r["solved"]).startswith("0/")]
                if bad:  # an explicit colour: the colour cycle of the lines is not advanced
                    ax.plot([xs[i] for i in bad], [ys[i] for i in bad], "o", mfc="white",
                            color=line.get_color(), zorder=3)  # fmt: skip
            ax.xaxis.set_major_locator(FixedLocator(values))  # the measured values only
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(values, [str(v) for v in values], fontsize=7)
            ax.grid(True, which="both", alpha=0.3)
            if col == 0:
                ax.set_ylabel(f"{label} per cell")
        axs[1, col].set_xlabel(f"{axis} (others at each part's base shape)")
    handles, labels = axs[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)  # off the data
    fig.suptitle(f"attnsvm: {title}, 1 thread (hollow: an SVM answer not certified)")
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"figure: {out}")


#: the tiny shape of :func:`warm_up` and of the memory floor in the notes
TINY: Shape = (4, 3, 4)


def warm_up() -> None:
    """Each part once on a tiny shape in the parent, so that no child pays a first call's
    lazy imports and caches (they would count as its time and memory)."""
    for p in ("W", "KQ"):
        train_cells([Cell(n=2, T=2, d=2, param=p, iterations=2)], device="cpu")
    for seed in range(2):
        cons = svm_rows(*TINY, seed, "planted")
        solve_frobenius(cons)
        solve_nuclear(cons)
        solve_norm_svm(cons, "l3")


def run_range(name: str, rng: Range, args) -> None:
    """Measure one range: its table (bench/tables/), figure and .csv of the numbers."""
    sweeps = {p: QUICK[p] for p in rng.sweeps if p in QUICK} if args.quick else rng.sweeps
    table = Table(
        rng.table,
        "cost",
        rng.title,
        ["part", "axis", "(n,T,d)", "rows", "CPU s", "peak MB", "solved", "exponent"],
        order=rng.order,
    )
    seeds = args.seeds or rng.seeds
    found: dict[tuple[str, Shape], dict] = {}
    rows: list[dict] = []
    for part, (base, axes) in sweeps.items():
        for axis in AXES:
            values = axes[axis]
            shapes = [tuple(v if a == axis else b for a, b in zip(AXES, base, strict=True))
                      for v in values]  # fmt: skip
            res = []
            for s in shapes:
                if (part, s) not in found:  # the base shape recurs on every axis
                    found[(part, s)] = measure(part, s, rng, seeds)
                res.append(found[(part, s)])
            slope = exponent(values, [r["seconds"] for r in res])
            for v, s, r in zip(values, shapes, res, strict=True):
                last = f"{slope:.2f}" if v == values[-1] else ""
                table.add(part, axis, str(s), s[0] * (s[1] - 1), f"{r['seconds']:.3g}",
                          f"{r['MB']:.0f}", r["solved"], last)  # fmt: skip
                rows.append({"part": part, "axis": axis, "value": v, **r})
    for (part, shape), limit in [] if args.quick else rng.targets.items():
        r = found.get((part, shape)) or measure(part, shape, rng, seeds)
        ok = r["seconds"] <= limit and not r["solved"].startswith("0/")
        table.add(f"{part} target", f"<= {limit:g} s: {'met' if ok else 'missed'}", str(shape),
                  shape[0] * (shape[1] - 1), f"{r['seconds']:.3g}", f"{r['MB']:.0f}",
                  r["solved"], "")  # fmt: skip
    figure = rng.figure if not args.quick else str(Path(args.trial_dir) / Path(rng.figure).name)
    data = Path(figure).with_suffix(".csv")
    with data.open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["part", "axis", "value", "seconds", "MB", "solved"])
        w.writeheader()
        w.writerows(rows)
    plot(rows, rng.title, figure)
    table.note(f"![{rng.title.lower()}]({Path(figure).as_posix()})")
    what = (
        f"training is a batch of {rng.batch} seeds of {rng.iterations} iterations (seconds per "
        "seed)"
        if rng.batch > 1
        else f"training is one cell of {rng.iterations} iterations"
    )
    sel = (
        "the cell's optimal tokens"
        if rng.selection == "optimal"
        else "a planted selection (the token maximizing x^T W* z for a Gaussian W*: feasible "
        "by construction)"
    )
    table.note(
        "One axis at a time around each part's base shape; `rows` is the Att-SVM's n (T - 1); "
        f"{what}; the SVMs solve {sel}, mean over {seeds} instance(s), the solve alone; "
        "`solved` counts certified answers. Each number is measured in a child process forked "
        "from one that only imported and ran each part once on a tiny shape: `CPU s` its CPU "
        "seconds (one torch and one BLAS thread), "
        "`peak MB` the growth of its peak resident set over the fork's (all allocations: "
        "numpy, torch, solvers). `exponent` (on the last row of each sweep) is the slope of log "
        f"seconds against log of the axis. The numbers are also in `{data.as_posix()}`."
    )
    floor = {
        p: measure(p, TINY, rng, 1)["MB"]
        for p in dict.fromkeys(
            " ".join(q.split()[:2]) if q.startswith("train") else q.split()[0] for q in sweeps
        )
    }
    table.note(
        "What any child's peak MB includes (its first touch of code pages and allocator "
        f"pools), measured at the tiny shape {TINY}: "
        + ", ".join(f"{p} {mb:.0f} MB" for p, mb in floor.items())
        + "."
    )
    if name == "size":
        table.note(
            "Above 1,000 rows the Frobenius SVM takes its working-set route and the nuclear "
            'SVM the working set around the primal-dual method (docs/science.md §4, "The SVMs '
            'at size"; its time includes the Frobenius answer it starts from), the norm SVMs '
            '(max entry, l_3, spectral; cvxpy / Clarabel) a working set of rows (§10, "At '
            "size\"); the targets are issue 28's, on one core."
        )
    table.write(Path(args.trial_dir) if args.quick else None)


def replot() -> None:
    """Redraw each range's figure from its .csv."""
    for rng in RANGES.values():
        data = Path(rng.figure).with_suffix(".csv")
        with data.open() as fh:
            plot(list(csv.DictReader(fh)), rng.title, rng.figure)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--range", choices=[*RANGES, "all"], default="all")
    ap.add_argument("--seeds", type=int, help="SVM instances per shape (default: the range's)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes (a trial of the script)")
    ap.add_argument("--trial-dir", default="/tmp/bench_scaling_trial",
                    help="where --quick writes its tables and figures")  # fmt: skip
    ap.add_argument("--plot-only", action="store_true", help="redraw from the .csv files")
    args = ap.parse_args()
    if args.plot_only:
        replot()
        return
    torch.set_num_threads(1)
    warm_up()
    if args.quick:
        Path(args.trial_dir).mkdir(parents=True, exist_ok=True)
    for name, rng in RANGES.items():
        if args.range in (name, "all"):
            run_range(name, rng, args)


if __name__ == "__main__":
    main()
