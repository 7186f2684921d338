"""Training speed: seed-iterations per second of a step, and the per-seed gain of batching.

Usage:
    python bench/bench_train.py [--device auto|cpu|cuda] [--iterations 2000]
    python bench/bench_train.py --steps [--before DIR]
    python bench/bench_train.py --floor [--iterations 2000]

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

``--floor`` prints how far one training step is above its arithmetic floor (issue 28) at the
E2 size (W and KQ, 100 seeds) and what ``torch.compile`` of the same step does, per step and
per block job (compile time included), and trains one W and one KQ cell at (256, 32, 64) for
``--iterations`` iterations (time and peak memory). The floor of a step is its floating-point
operations divided by this machine's float64 rate on one thread, measured in the same run as
the best of a 512 x 512 matrix product: the operations are torch's own count of the matrix
products (torch.utils.flop_counter, 2 per multiply-add) plus one per output element of every
other operation of the step (elementwise ops, reductions, exp/log counted as 1), read off the
operations the step dispatches (counted with a dispatch mode, views excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
from tables import Table  # noqa: E402  (bench/tables.py: BENCHMARKS.md's tables)
from torch import Tensor  # noqa: E402

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


def train_cpu(fields: dict, S: int, iterations: int) -> float:
    """Process CPU seconds of train_batch on S seeds of ``fields`` (data stacked before)."""
    cells = [Cell(iterations=iterations, seed=s, **fields) for s in range(S)]
    b = stack_cells(cells)
    data = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    t0 = time.process_time()
    train_batch(*data, cells[0].settings("train"), device="cpu")
    return time.process_time() - t0


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


# --floor: the step against its arithmetic floor, torch.compile, training at size (issue 28)

#: (label, Cell fields, seeds) of the floor cases: the E2 size
FLOOR_CASES = [STEP_CASES[0], STEP_CASES[1]]
#: (label, Cell fields) trained at size, one seed each
SIZE_CASES = [
    ("W (256,32,64)", {"param": "W", "n": 256, "T": 32, "d": 64}),
    ("KQ (256,32,64)", {"param": "KQ", "n": 256, "T": 32, "d": 64}),
]


def gemm_rate(size: int = 512, repeats: int = 5) -> float:
    """This machine's float64 rate on one thread, flop/s: best of a size x size matrix product."""
    a = torch.randn(size, size, dtype=torch.float64)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        a @ a
        best = min(best, time.process_time() - t0)
    return 2.0 * size**3 / best


def one_step(fields: dict, S: int) -> tuple[Callable, Tensor]:
    """One step of train_batch's loop for S seeds of ``fields`` (objective, normalized step,
    the update and the loss sum of its finiteness test) as ``step(theta, loss_sum)``, and
    the initial theta."""
    from attnsvm.gd.model import SingleHead
    from attnsvm.gd.optimizers import make_rule
    from attnsvm.gd.train import build

    cells = [Cell(iterations=2, seed=s, **fields) for s in range(S)]
    b = stack_cells(cells)
    settings = cells[0].settings("train")
    arrays = {k: b[k] for k in "XYZvV"}
    model, init = build(SingleHead, arrays, b["init"], settings, device="cpu")
    (theta,) = model.params(init)
    rule = make_rule(settings.optimizer, settings.lr, float(torch.finfo(theta.dtype).tiny))

    def step(th: Tensor, loss_sum: Tensor) -> tuple[Tensor, Tensor]:
        loss, _, _, (G,) = model([th], True)
        return rule(th, G, loss), loss_sum + loss

    return step, theta


def count_step(step: Callable, theta: Tensor) -> tuple[int, float]:
    """Operations dispatched by one step (views excluded) and its floating-point operations
    (module docstring)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops, self.elementwise = 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ not in VIEWS:
                self.ops += 1
                if func.overloadpacket not in (torch.ops.aten.bmm, torch.ops.aten.mm):
                    self.elementwise += sum(o.numel() for o in _tensors(out))
            return out

    loss_sum = torch.zeros(theta.shape[-3], dtype=theta.dtype)
    with torch.inference_mode():
        counter, flops = Count(), FlopCounterMode(display=False)
        with flops, counter:
            step(theta, loss_sum)
    return counter.ops, float(flops.get_total_flops() + counter.elementwise)


#: operations that only make a view of their input (no arithmetic, no copy): not counted
VIEWS = {"view", "_unsafe_view", "transpose", "t", "expand", "as_strided", "unsqueeze",
         "squeeze", "permute", "select", "slice", "alias", "detach", "unbind"}  # fmt: skip


def _tensors(out: Any) -> list[Tensor]:
    outs = out if isinstance(out, tuple | list) else (out,)
    return [o for o in outs if isinstance(o, Tensor)]


def loop_seconds(step: Callable, theta: Tensor, iterations: int) -> tuple[float, Tensor]:
    """CPU seconds of ``iterations`` steps from theta, and the last theta."""
    loss_sum = torch.zeros(theta.shape[-3], dtype=theta.dtype)
    with torch.inference_mode():
        th = theta.clone()
        t0 = time.process_time()
        for _ in range(iterations):
            th, loss_sum = step(th, loss_sum)
        return time.process_time() - t0, th


def child_floor(case: int, iterations: int, compiled: bool) -> None:
    """One floor case in this process; prints JSON (see :func:`floor`)."""
    _, fields, S = FLOOR_CASES[case]
    step, theta = one_step(fields, S)
    rec: dict[str, Any] = {}
    if not compiled:
        rec["ops"], rec["flops"] = count_step(step, theta)
        rec["gemm"] = gemm_rate()
        from attnsvm.gd import fused

        t0 = time.perf_counter()
        built = fused.library() is not None  # the parent gives an empty ATTNSVM_CACHE
        rec["build"] = time.perf_counter() - t0
        rec["fused_error"] = "; ".join(fused.UNAVAILABLE)
        rec["level"] = fused.level()
        rec["lanes"] = fused.lanes() if built else None
        best = {"0": float("inf"), "1": float("inf")}
        for _ in range(3):  # best of 3, the two loops alternating
            for flag in ("0", "1") if built else ("0",):
                os.environ["ATTNSVM_FUSED"] = flag
                train_cpu(fields, S, 20)  # warm-up
                best[flag] = min(best[flag], train_cpu(fields, S, iterations))
        rec["train"], rec["fused"] = best["0"], best["1"] if built else None
        loop_seconds(step, theta, 20)
        rec["loop"], th = loop_seconds(step, theta, iterations)
    else:
        t0 = time.perf_counter()
        step = torch.compile(step, dynamic=False)
        try:
            loop_seconds(step, theta, 1)  # compiles
        except Exception as err:  # no C++ compiler, or one that fails: torch's own message
            print(json.dumps({"error": f"{type(err).__name__}: {err}"[:300]}))
            return
        rec["compile"] = time.perf_counter() - t0
        loop_seconds(step, theta, 20)
        rec["loop"], th = loop_seconds(step, theta, iterations)
    rec["theta"] = th.flatten().tolist()
    print(json.dumps(rec))


def child_size(case: int, iterations: int) -> None:
    """Train one cell of SIZE_CASES; prints JSON wall and CPU seconds and peak memory."""
    import resource

    _, fields = SIZE_CASES[case]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu = time.process_time()
    sec, _ = train_seconds(fields, 1, iterations, "cpu")
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": sec, "cpu": cpu, "peak_mb": peak / 1024,
                      "added_mb": (peak - base) / 1024}))  # fmt: skip


def run_json(args: list[str], env: dict | None = None) -> dict:
    """The JSON record printed by a child run of this script."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def floor(args: argparse.Namespace) -> None:
    """The E2 step against its floor, eager and compiled, and training at size (``--floor``)."""
    import tempfile

    it = str(args.iterations)
    table = Table("training_floor", "cost", "Training step against its arithmetic floor",
                  ["case", "torch ops/step", "kflop/step", "floor us", "torch loop us/step",
                   "ratio to floor", "fused loop us/step", "ratio to floor", "fused build s",
                   "torch.compile us/step", "compile s (cold / cached)",
                   "block s eager / compiled", "compiled: same bits"], order=31)  # fmt: skip
    for case, (label, _, S) in enumerate(FLOOR_CASES):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, ATTNSVM_CACHE=cache)
            eager = run_json(["--child-floor", str(case), "--iterations", it], env)
        floor_us = eager["flops"] / eager["gemm"] * 1e6
        step_us = eager["train"] / args.iterations * 1e6
        print(f"{label}, {S} seeds: {eager['ops']} ops, {eager['flops'] / 1e3:.0f} kflop/step, "
              f"{eager['gemm'] / 1e9:.1f} Gflop/s -> floor {floor_us:.1f} us; torch loop "
              f"{step_us:.1f} us/step = {step_us / floor_us:.1f}x the floor")  # fmt: skip
        cells = [label, eager["ops"], f"{eager['flops'] / 1e3:.0f}", f"{floor_us:.1f}",
                 f"{step_us:.0f}", f"{step_us / floor_us:.1f}x"]  # fmt: skip
        if eager["fused"] is None:
            print(f"  fused loop unavailable: {eager['fused_error']}")
            cells += ["unavailable", "-", "-"]
        else:
            f_us = eager["fused"] / args.iterations * 1e6
            print(f"  fused loop: {f_us:.1f} us/step = {f_us / floor_us:.1f}x the floor, "
                  f"{eager['train'] / eager['fused']:.2f}x the torch loop; built in "
                  f"{eager['build']:.2f} s (once per machine), {eager['level']} build")  # fmt: skip
            build = f"{eager['build']:.2f} ({eager['level']}, {eager['lanes']} seeds per vector)"
            cells += [f"{f_us:.0f}", f"{f_us / floor_us:.1f}x", build]
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
            runs = [run_json(["--child-floor", str(case), "--iterations", it, "--compiled"],
                             env) for _ in range(2)]  # fmt: skip
        if "error" in runs[0]:
            print(f"  torch.compile failed: {runs[0]['error']}")
            cells += ["failed", "-", "-", "-"]
        else:
            c_us = runs[1]["loop"] / args.iterations * 1e6
            same = runs[1]["theta"] == eager["theta"]
            ref = torch.tensor(eager["theta"], dtype=torch.float64)
            diff = torch.tensor(runs[1]["theta"], dtype=torch.float64) - ref
            rel = float(diff.abs().max() / ref.abs().max())
            block_e, block_c = eager["loop"], runs[0]["compile"] + runs[1]["loop"]
            print(f"  torch.compile: {c_us:.1f} us/step (eager loop "
                  f"{eager['loop'] / args.iterations * 1e6:.1f}), compile {runs[0]['compile']:.1f}"
                  f" s cold, {runs[1]['compile']:.1f} s cached; block of {args.iterations} "
                  f"steps {block_e:.2f} s eager vs {block_c:.2f} s compiled; same bits {same} "
                  f"(max rel diff {rel:.1e})")  # fmt: skip
            compile_s = f"{runs[0]['compile']:.1f} / {runs[1]['compile']:.1f}"
            bits = "yes" if same else f"no ({rel:.0e})"
            cells += [f"{c_us:.0f}", compile_s, f"{block_e:.2f} / {block_c:.2f}", bits]
        table.add(*cells)
    size = Table("training_size", "cost", "Training at (256, 32, 64)",
                 ["cell", "iterations", "wall s", "cpu s", "peak memory MB (process)",
                  "added by training MB"], order=32)  # fmt: skip
    for case, (label, _) in enumerate(SIZE_CASES):
        rec = run_json(["--child-size", str(case), "--iterations", it])
        print(f"{label}: {rec['seconds']:.2f} s wall, {rec['cpu']:.2f} s cpu, peak "
              f"{rec['peak_mb']:.0f} MB (+{rec['added_mb']:.0f} MB)")  # fmt: skip
        size.add(label, it, f"{rec['seconds']:.2f}", f"{rec['cpu']:.2f}", f"{rec['peak_mb']:.0f}",
                 f"{rec['added_mb']:.0f}")  # fmt: skip
    table.note(FLOOR_NOTE.format(it=it))
    size.note(SIZE_NOTE)
    table.write()
    size.write()


FLOOR_NOTE = (
    "E2 size, 100 seeds, {it} iterations, one thread, process CPU seconds (the machine is "
    "shared: waiting for a core is not counted), compile times wall. Floor: the step's "
    "floating-point "
    "operations over this machine's float64 rate on one thread (a 512 x 512 matrix product, "
    "best of 5, same run); operations: torch's count of the matrix products plus one per "
    "output element of every other operation the torch step dispatches (bench/bench_train.py)."
    " Torch loop and fused loop: train_batch with ATTNSVM_FUSED=0 and 1 (attnsvm/gd/fused.py;"
    " the whole call over its iterations, checkpoints included), best of 3, alternating; the "
    "fused loop's build (gcc, into an empty cache, for the instruction-set level in brackets: "
    "attnsvm/gd/fused.py LEVELS, and the seeds per vector of that build) happens once per "
    "machine, not per block. "
    "torch.compile (Inductor, C++ code built with the machine's gcc): the torch step "
    "(objective, normalized step, update) in a loop of the bench, in a fresh process with an "
    "empty Inductor cache (cold) and again with the cache it left (cached); a block job is one "
    "process, so its cost is compile + steps against the eager steps. Same bits: the last "
    "theta equal to the eager loop's (else the largest difference relative to max |theta|)."
)
SIZE_NOTE = (
    "One seed each, train_batch on the CPU, one thread, the default checkpoints, in a fresh "
    "process; peak memory is the process's maximum resident set (torch and its imports "
    "included), added: its growth during the training call."
)


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
    ap.add_argument("--floor", action="store_true", help="the step against its floor")
    ap.add_argument("--child", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--child-floor", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--child-size", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.child >= 0:
        child(args.child, args.iterations, args.device)
    elif args.child_floor >= 0:
        child_floor(args.child_floor, args.iterations, args.compiled)
    elif args.child_size >= 0:
        child_size(args.child_size, args.iterations)
    elif args.floor:
        floor(args)
    elif args.steps:
        steps(args)
    else:
        batching(args)


if __name__ == "__main__":
    main()
