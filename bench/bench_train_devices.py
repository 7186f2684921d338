"""Training throughput, CPU and CUDA side by side, against the batch size S (issue 16).

Run: ``python bench/bench_train_devices.py`` (CPU only here: small S by default) or, on a
GPU machine, ``python bench/bench_train_devices.py --devices cpu,cuda --sizes
64,256,1024,4096,16384,65536``. For (n, T, d) = (6, 8, 10) and (50, 20, 100) and each S it
trains S seeds of param W (the workflow's ``train_batch``, float64, analytic gradient) for
``--iterations`` steps and prints seed-iterations per second per device (training only:
data generation and the host copy of inputs excluded, checkpoints and the copy back
included), then, per size, the smallest S at which CUDA is faster than the CPU.
"""

from __future__ import annotations

import argparse
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy: one BLAS thread, as the other benches

import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)

from attnsvm.config.cell import Cell  # noqa: E402
from attnsvm.gd.train import stack_cells, train_batch  # noqa: E402

SIZES = ((6, 8, 10), (50, 20, 100))


def rate(n: int, T: int, d: int, S: int, iterations: int, device: str, repeat: int) -> float:
    """Best of ``repeat``: seed-iterations per second of one batch of S seeds."""
    cells = [Cell(n=n, T=T, d=d, iterations=iterations, seed=s) for s in range(S)]
    b, c = stack_cells(cells), cells[0]
    best = 0.0
    for _ in range(repeat):
        res = train_batch(
            b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"],
            param=c.param, head=c.head, lam=c.lam, optimizer=c.optimizer, lr=c.lr,
            iterations=iterations, checkpoints=c.checkpoints(), dtype=c.dtype, device=device,
        )  # fmt: skip
        best = max(best, S * iterations / res.seconds)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="cpu", help="comma-separated: cpu, cuda")
    ap.add_argument("--sizes", default="64,256,1024", help="batch sizes S at (6, 8, 10)")
    ap.add_argument("--large-sizes", default="64", help="batch sizes S at (50, 20, 100)")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--large-iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    devices = args.devices.split(",")
    gpu = "cuda" in devices
    table = Table(
        "gpu_training" if gpu else "training_batch_cpu",
        "gpu" if gpu else "cost",
        "Batched training on a GPU and the CPU" if gpu else "Batched training on the CPU",
        ["(n, T, d)", "S", *(f"{dev} seed-it/s" for dev in devices)],
        order=10 if gpu else 40,
    )
    for (n, T, d), sizes, iters in zip(
        SIZES,
        (args.sizes, args.large_sizes),
        (args.iterations, args.large_iterations),
        strict=True,
    ):
        for dev in devices:
            rate(n, T, d, 2, 2, dev, 1)  # warm-up
        wins = None
        for S in (int(s) for s in sizes.split(",")):
            rates = {dev: rate(n, T, d, S, iters, dev, args.repeat) for dev in devices}
            table.add(f"({n}, {T}, {d})", S, *(f"{rates[dev]:.3g}" for dev in devices))
            if wins is None and gpu and "cpu" in rates and rates["cuda"] > rates["cpu"]:
                wins = S
        if gpu and "cpu" in devices:
            table.note(
                f"({n}, {T}, {d}), {iters} iterations: CUDA faster than the CPU from S = {wins}."
            )
    table.note(
        f"Seed-iterations per second of `train_batch` (param W, float64), best of {args.repeat}, "
        f"torch {torch.__version__}, {args.threads} CPU thread(s); training only (data "
        "generation and the host copy of inputs excluded, checkpoints and the copy back "
        "included)."
    )
    table.write()


if __name__ == "__main__":
    main()
