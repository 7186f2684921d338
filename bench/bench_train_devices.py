"""Training throughput, CPU and CUDA side by side, against the batch size S (issues 16, 32).

Run on a GPU machine: ``python bench/bench_train_devices.py --routes cpu,cpu-fused,cuda,cuda-fused
--sizes 64,256,1024,4096,16384,65536``; without a GPU, ``--routes cpu,cpu-fused``.

For (n, T, d) = (6, 8, 10) and (50, 20, 100) and each batch size S it trains S seeds of param
W (the workflow's ``train_batch``, float64, the cell's default checkpoints) and prints
seed-iterations per second of each route:

* ``cpu``: the torch loop on the CPU, one thread (a block job's default);
* ``cpu-fused``: fused.c (``ATTNSVM_FUSED=1``), one thread;
* ``cuda``: the torch loop on the GPU (one launch per operation, ~60 per step);
* ``cuda-fused``: fused_cuda.cu (``ATTNSVM_FUSED=1``): one kernel for all steps of all seeds.

Timed: the whole ``train_batch`` call (inputs to the device, training, checkpoints back to the
host), best of ``--repeat``; data generation excluded (S seeds are built from at most 1,024
distinct datasets, repeated: seeds never interact, so the arithmetic is that of S seeds). A
route is skipped at an S where its last rate predicts more than ``--max-seconds`` per call (a
GPU route once a call took that long: its rate grows with S), and a size where the inputs
alone would take more than ``--max-gib`` (noted in the table).
Per size the table notes the smallest S from which a GPU route beats the best CPU route.
"""

from __future__ import annotations

import argparse
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy: one BLAS thread, as the other benches

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd import fused, fused_cuda  # noqa: E402
from attnsvm.gd.train import stack_cells, train_batch  # noqa: E402

SIZES = ((6, 8, 10), (50, 20, 100))
#: route -> (device, fused loop on)
ROUTES = {
    "cpu": ("cpu", False),
    "cpu-fused": ("cpu", True),
    "cuda": ("cuda", False),
    "cuda-fused": ("cuda", True),
}
DISTINCT = 1024


def batch(n: int, T: int, d: int, S: int, iterations: int) -> tuple[dict, Cell]:
    """Inputs of S seeds (from at most DISTINCT datasets, repeated) and their first cell."""
    cells = [Cell(n=n, T=T, d=d, iterations=iterations, seed=s) for s in range(min(S, DISTINCT))]
    b = stack_cells(cells)
    reps = -(-S // len(cells))

    def grow(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a] * reps)[:S] if reps > 1 else a

    out = {k: None if b[k] is None else grow(b[k]) for k in ("X", "Y", "Z", "v", "V")}
    out["init"] = {k: grow(a) for k, a in b["init"].items()}
    return out, cells[0]


def rate(b: dict, c: Cell, S: int, route: str, repeat: int) -> float:
    """Best of ``repeat``: seed-iterations per second of one ``train_batch`` call."""
    device, on = ROUTES[route]
    os.environ["ATTNSVM_FUSED"] = "1" if on else "0"
    best = 0.0
    for _ in range(repeat):
        res = train_batch(b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"],
                          c.settings("train"), device=device)  # fmt: skip
        assert res.finite.all(), f"{route}: a seed went non-finite"
        best = max(best, S * c.iterations / res.seconds)
    return best


def _too_long(route: str, S: int, iterations: int, last: tuple[float, int], limit: float) -> bool:
    """Whether a call of ``route`` at S seeds would take more than ``limit`` seconds, from its
    ``last`` (rate, S). A CPU route's rate does not grow with S: its time grows in proportion.
    A GPU route's rate grows with S until the GPU is full, so its time is predicted as the
    last call's (a lower bound): it is skipped only once a call took longer than the limit."""
    rate, S0 = last
    if ROUTES[route][0] == "cpu":
        return S * iterations / rate > limit
    return S0 * iterations / rate > limit


def check_routes(routes: list[str]) -> None:
    """Refuse, before any timing, a route this machine cannot run."""
    for route in routes:
        if route not in ROUTES:
            raise SystemExit(f"unknown route {route!r}: choose from {', '.join(ROUTES)}")
        device, on = ROUTES[route]
        if device == "cuda" and not torch.cuda.is_available():
            raise SystemExit(f"route {route!r} needs CUDA, and torch sees no GPU")
        if on and device == "cpu" and fused.library() is None:
            raise SystemExit(f"route {route!r}: {'; '.join(fused.UNAVAILABLE)}")
        if on and device == "cuda" and not fused_cuda.available(torch.device("cuda")):
            raise SystemExit(f"route {route!r}: {'; '.join(fused_cuda.UNAVAILABLE)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routes", default="cpu,cpu-fused", help=f"comma-separated: {list(ROUTES)}")
    ap.add_argument("--sizes", default="64,256,1024", help="batch sizes S at (6, 8, 10)")
    ap.add_argument("--large-sizes", default="64", help="batch sizes S at (50, 20, 100)")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--large-iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=20.0, help="skip longer calls")
    ap.add_argument("--max-gib", type=float, default=16.0, help="skip larger inputs")
    args = ap.parse_args()
    torch.set_num_threads(1)
    routes = args.routes.split(",")
    check_routes(routes)
    gpu = any(ROUTES[r][0] == "cuda" for r in routes)
    table = Table(
        "gpu_training" if gpu else "training_batch_cpu",
        "gpu" if gpu else "cost",
        "Batched training on a GPU and the CPU" if gpu else "Batched training on the CPU",
        ["(n, T, d)", "S", "iterations", *(f"{r} seed-it/s" for r in routes)],
        order=10 if gpu else 40,
    )
    if gpu:
        warm, c = batch(6, 8, 10, 2, 2)
        for r in routes:  # CUDA context, kernels, the fused libraries' builds
            rate(warm, c, 2, r, 1)
    for (n, T, d), sizes, iters in zip(
        SIZES, (args.sizes, args.large_sizes), (args.iterations, args.large_iterations),
        strict=True,
    ):  # fmt: skip
        last: dict[str, tuple[float, int]] = {}
        wins = None
        skipped = []
        for S in (int(s) for s in sizes.split(",")):
            gib = S * n * T * d * 8 / 2**30
            if gib > args.max_gib:
                skipped.append(f"S = {S} (inputs {gib:.0f} GiB > {args.max_gib:g})")
                continue
            b, c = batch(n, T, d, S, iters)
            rates: dict[str, float] = {}
            for r in routes:
                if r in last and _too_long(r, S, iters, last[r], args.max_seconds):
                    continue
                rates[r] = rate(b, c, S, r, args.repeat)
                last[r] = (rates[r], S)
            table.add(f"({n}, {T}, {d})", S, iters,
                      *(f"{rates[r]:.3g}" if r in rates else "-" for r in routes))  # fmt: skip
            cpu = max((v for r, v in rates.items() if ROUTES[r][0] == "cpu"), default=None)
            dev = max((v for r, v in rates.items() if ROUTES[r][0] == "cuda"), default=None)
            if wins is None and cpu is not None and dev is not None and dev > cpu:
                wins = S
        if gpu and any(ROUTES[r][0] == "cpu" for r in routes):
            table.note(
                f"({n}, {T}, {d}), {iters} iterations: the GPU beats the best CPU route "
                f"(one thread) from S = {wins} on." if wins else
                f"({n}, {T}, {d}), {iters} iterations: the GPU did not beat the CPU here."
            )  # fmt: skip
        if skipped:
            table.note(f"({n}, {T}, {d}): not run at {', '.join(skipped)}.")
    table.note(
        f"Seed-iterations per second of a whole `train_batch` call (param W, float64, the "
        f"cell's default {len(Cell().checkpoints())} checkpoints; inputs to the device and "
        f"checkpoints back to the host included), best of {args.repeat}, torch "
        f"{torch.__version__}, one CPU thread. `-`: skipped, the route's rate at the previous "
        f"S predicted more than {args.max_seconds:g} s (a GPU route: its last call took that "
        "long). Routes: cpu / cuda the torch loop, "
        "cpu-fused fused.c, cuda-fused fused_cuda.cu (`ATTNSVM_FUSED=1`, docs/science.md §3)."
    )
    table.write()


if __name__ == "__main__":
    main()
