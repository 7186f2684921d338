"""Benchmark: batched Frobenius Att-SVM vs today's per-instance loop (SCIENCE.md section 4).

Run: ``python bench/bench_svm_batched.py [--device cuda] [--threads 1]``. For each size
(n, T, d) (default the E2 size (6, 8, 10) and (20, 10, 20)) it builds instances from the
workflow's own data (``make_dataset``, the optimal tokens as selection) and prints, per batch
size, instances per second of

* the loop: :func:`attnsvm.svm.frobenius.solve_frobenius` one instance after the other
  (always on the CPU: that route is scipy/Clarabel);
* the batched route: :func:`attnsvm.svm.frobenius_batched.solve_frobenius_batched` on
  ``--device``, everything included (stacking, Gram matrices, pivoting, certificate, the
  per-instance certificate, fallbacks);

with wall-clock and process CPU seconds (on a shared machine the CPU seconds are the steadier
number), the share certified by the batched route, and the smallest batch size at which it is
faster (``BATCH_MIN`` in the library is set from this).
"""

from __future__ import annotations

import argparse
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy: one BLAS thread, as the other benches
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.data import make_dataset, optimal_tokens  # noqa: E402
from attnsvm.svm.constraints import att_svm_constraints  # noqa: E402
from attnsvm.svm.frobenius import solve_frobenius  # noqa: E402
from attnsvm.svm.frobenius_batched import solve_frobenius_batched  # noqa: E402


def instances(n: int, T: int, d: int, count: int):
    out = []
    for seed in range(count):
        ds = make_dataset(Cell(n=n, T=T, d=d, seed=seed))
        out.append(att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds)))
    return out


def timed(fn, device: str, repeat: int):
    """Best of ``repeat`` runs: (wall seconds, process CPU seconds, result)."""
    best_wall = best_cpu = np.inf
    result = None
    for _ in range(repeat):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best_wall, best_cpu, result


def bench_size(n, T, d, batches, device, repeat, table: Table) -> None:
    cons = instances(n, T, d, max(batches))
    # warm-up (torch kernels, allocator, CUDA context)
    solve_frobenius_batched(cons[:8], device)
    loop_rate = None
    crossover = None
    for B in batches:
        batch = cons[:B]
        if loop_rate is None or B <= 256:  # the loop's rate does not depend on B
            lw, lc, _ = timed(lambda b=batch: [solve_frobenius(c) for c in b], "cpu", repeat)
            loop_rate = (B / lw, B / lc)
        bw, bc, (_, stats) = timed(
            lambda b=batch: solve_frobenius_batched(b, device), device, repeat
        )
        rate = (B / bw, B / bc)
        speed = (rate[0] / loop_rate[0], rate[1] / loop_rate[1])
        if speed[1] <= 1.0:
            crossover = None  # faster from the next batch size on, if it stays faster
        elif crossover is None:
            crossover = B
        table.add(
            f"({n}, {T}, {d}), N = {cons[0].n_rows}",
            B,
            f"{loop_rate[0]:.0f} / {loop_rate[1]:.0f}",
            f"{rate[0]:.0f} / {rate[1]:.0f}",
            f"{speed[0]:.1f}x / {speed[1]:.1f}x",
            f"{stats.certified / B:.0%}",
        )
    table.note(
        f"({n}, {T}, {d}): batched faster (CPU seconds) at every batch size from {crossover} on."
        if crossover
        else f"({n}, {T}, {d}): batched not faster (CPU seconds) at the largest batch size."
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda (the batched route's device)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    p.add_argument(
        "--batches", default="1,2,4,8,16,32,64,256,1024,4096", help="batch sizes, comma-separated"
    )
    p.add_argument("--large-batches", default="1,8,64,256", help="batch sizes at the large size")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gpu = args.device.startswith("cuda")
    table = Table(
        "svm_batched_cuda" if gpu else "svm_batched",
        "gpu" if gpu else "svm",
        f"Batched Frobenius SVM on {'a GPU' if gpu else 'the CPU'}",
        ["size", "batch", "loop inst/s (cpu)", "batched inst/s (cpu)", "speed-up (cpu)",
         "certified"],
        order=20 if gpu else 30,
    )  # fmt: skip
    for (n, T, d), batches in (((6, 8, 10), args.batches), ((20, 10, 20), args.large_batches)):
        sizes = [int(b) for b in batches.split(",")]
        bench_size(n, T, d, sizes, args.device, args.repeat, table)
    table.note(
        f"Instances per second, wall time / process CPU time (on a loaded machine read the CPU "
        f"numbers), best of {args.repeat}, torch {torch.__version__}, {args.threads} thread(s), "
        f"batched route on {args.device}. Instances from the workflow's own data "
        "(`make_dataset`, optimal tokens). loop: `solve_frobenius` per instance on the CPU; "
        "batched: `solve_frobenius_batched` with everything included (stacking, Gram "
        "matrices, pivoting, certificate, per-instance finish). Block jobs use the batched "
        "route from `BATCH_MIN` distinct instances per group."
    )
    table.write()


if __name__ == "__main__":
    main()
