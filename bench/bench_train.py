"""Seconds per seed of batched training, S = 1 vs S = 64 (SCIENCE.md section 3, E2 shape).

Usage: python bench/bench_train.py [--device auto|cpu|cuda] [--iterations 2000]
Prints one line per (param, S) and the per-seed speed-up of batching (target >= 5x).
"""

from __future__ import annotations

import argparse

import torch

from attnsvm.cell import Cell
from attnsvm.train import stack_cells, train_batch


def seconds_per_seed(
    param: str, S: int, iterations: int, device: str, gradient: str
) -> tuple[float, str]:
    """Wall seconds per seed of one batch of S seeds (host transfers included)."""
    cells = [Cell(param=param, n=6, T=8, d=10, iterations=iterations, seed=s) for s in range(S)]
    b = stack_cells(cells)
    c = cells[0]
    res = train_batch(
        b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"],
        param=param, head=c.head, lam=c.lam, optimizer=c.optimizer, lr=c.lr,
        iterations=iterations, checkpoints=c.checkpoints(), dtype=c.dtype, device=device,
        gradient=gradient,
    )  # fmt: skip
    return res.seconds / S, res.device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--gradient", default="analytic", choices=["analytic", "autograd"])
    ap.add_argument("--sizes", default="1,64", help="comma-separated batch sizes (first = base)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
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


if __name__ == "__main__":
    main()
