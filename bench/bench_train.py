"""Training speed: seed-iterations per second of a step, and the per-seed gain of batching.

Usage:
    python bench/bench_train.py [--device auto|cpu|cuda] [--iterations 2000]
    python bench/bench_train.py --steps [--before DIR]

The default prints seconds per seed for S = 1 vs S = 64 at the E2 shape (n, T, d) =
(6, 8, 10) and the per-seed speed-up of batching (target >= 5x).

``--steps`` prints seed-iterations per second of batched training at the E2 size (W and KQ,
100 seeds) and the E4 relu-head size ((3, 4, d), d = 6 and 10, 250 seeds), each case timed in
a fresh process (import and first-call costs are not in the number: the timer covers
train_batch only). With ``--before DIR``, the same cases also run on the package in DIR, a
plain checkout of an earlier commit, e.g.

    git -C . archive HEAD~1 | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    python bench/bench_train.py --steps --before /tmp/before

Runs of the two trees alternate (before, after, before, ...) and the best of ``--repeats``
is kept for each, so a change in machine load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.train import stack_cells, train_batch  # noqa: E402

# (label, Cell fields, seeds): E2 (SCIENCE.md section 6) and E4's relu head (config/paper.yaml)
STEP_CASES = [
    ("E2 W (6,8,10)", {"param": "W", "n": 6, "T": 8, "d": 10}, 100),
    ("E2 KQ (6,8,10)", {"param": "KQ", "n": 6, "T": 8, "d": 10}, 100),
    ("E4 relu W (3,4,6)", {"generator": "relu", "head": "relu", "n": 3, "T": 4, "d": 6}, 250),
    ("E4 relu W (3,4,10)", {"generator": "relu", "head": "relu", "n": 3, "T": 4, "d": 10}, 250),
]


def train_seconds(
    fields: dict, S: int, iterations: int, device: str, gradient: str = "analytic"
) -> tuple[float, str]:
    """Wall seconds of one batch of S seeds (host transfers included) and the device."""
    cells = [Cell(iterations=iterations, seed=s, **fields) for s in range(S)]
    b = stack_cells(cells)
    c = cells[0]
    res = train_batch(
        b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"],
        param=c.param, head=c.head, lam=c.lam, optimizer=c.optimizer, lr=c.lr,
        iterations=iterations, checkpoints=c.checkpoints(), dtype=c.dtype, device=device,
        gradient=gradient,
    )  # fmt: skip
    return res.seconds, res.device


def seconds_per_seed(
    param: str, S: int, iterations: int, device: str, gradient: str
) -> tuple[float, str]:
    """Wall seconds per seed of one batch of S seeds at the E2 shape."""
    fields = {"param": param, "n": 6, "T": 8, "d": 10}
    sec, dev = train_seconds(fields, S, iterations, device, gradient)
    return sec / S, dev


def batching(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"(n,T,d)=(6,8,10), {args.iterations} iterations, {args.gradient} gradient, "
          f"best of {args.repeats}")  # fmt: skip
    seconds_per_seed("W", 2, 20, args.device, args.gradient)  # warm-up
    for param in ("W", "KQ"):
        per = {}
        for S in sizes:
            runs = [
                seconds_per_seed(param, S, args.iterations, args.device, args.gradient)
                for _ in range(args.repeats)
            ]
            per[S], dev = min(runs)
            total = per[S] * S
            print(f"{param:2s} S={S:4d} {per[S] * 1e3:9.2f} ms/seed  ({total:.2f} s total, {dev})")
        base = sizes[0]
        for S in sizes[1:]:
            print(f"{param:2s} per-seed speed-up S={S} vs S={base}: {per[base] / per[S]:.1f}x")


def child(case: int, iterations: int, device: str) -> None:
    """One timed case in this process (after a short warm-up run); prints JSON."""
    _, fields, S = STEP_CASES[case]
    import attnsvm

    train_seconds(fields, S, 20, device)  # warm-up: first-call costs are not timed
    cpu = time.process_time()
    sec, dev = train_seconds(fields, S, iterations, device)
    cpu = time.process_time() - cpu
    print(json.dumps({"seconds": sec, "cpu": cpu, "device": dev, "package": attnsvm.__file__}))


def run_child(tree: Path, case: int, args: argparse.Namespace) -> tuple[float, float]:
    """Wall and CPU seconds of case ``case`` trained by the package in ``tree`` (a fresh process).

    The CPU seconds (of the timed call, all threads of the child) are what an A/B comparison
    on a loaded machine should read: time spent waiting for a core is not in them.
    """
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(case),
           "--iterations", str(args.iterations), "--device", args.device]  # fmt: skip
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(rec["package"]).resolve().is_relative_to(tree):
        raise RuntimeError(f"the child imported {rec['package']}, not the package in {tree}")
    return rec["seconds"], rec["cpu"]


def steps(args: argparse.Namespace) -> None:
    here = Path(__file__).resolve().parents[1]
    trees = {"rate": here}
    if args.before:
        trees = {"before": Path(args.before).resolve(), "after": here}
    columns = ["case", "seeds"] + [f"{n} {kind}" for n in trees for kind in ("wall", "cpu")]
    if args.before:
        columns += ["speed-up wall", "speed-up cpu"]
    table = Table("training_step", "cost", "Training step rate", columns, order=30)
    for case, (label, _, S) in enumerate(STEP_CASES):
        best = {name: [float("inf"), float("inf")] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                wall, cpu = run_child(tree, case, args)
                best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
        work = S * args.iterations / 1e3
        cells = [f"{work / t:.1f}k" for w, c in best.values() for t in (w, c)]
        if "before" in best:
            cells += [f"{best['before'][i] / best['after'][i]:.2f}x" for i in (0, 1)]
        table.add(label, S, *cells)
    table.note(
        f"Seed-iterations per second (k = 1000) of batched training, {args.iterations} "
        f"iterations, torch {torch.__version__}, one thread, best of {args.repeats}, each case "
        "timed in a fresh process (imports and first calls not timed); wall and process CPU "
        "time (on a loaded machine read the CPU columns)."
        + (f" before: the package in {args.before}; the trees alternate." if args.before else "")
    )
    table.write()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--gradient", default="analytic", choices=["analytic", "autograd"])
    ap.add_argument("--sizes", default="1,64", help="comma-separated batch sizes (first = base)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    ap.add_argument("--steps", action="store_true", help="seed-iterations/s at E2 and E4 sizes")
    ap.add_argument("--before", default="", help="with --steps: a checkout to compare against")
    ap.add_argument("--child", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.child >= 0:
        child(args.child, args.iterations, args.device)
    elif args.steps:
        steps(args)
    else:
        batching(args)


if __name__ == "__main__":
    main()
