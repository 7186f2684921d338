"""Checks of bench/gpu_session.sh on a lent GPU machine (issue 32).

``python bench/gpu_check.py versions``: Python, torch, CUDA, the GPU, the package versions, and
whether both fused loops build. ``fused``: the GPU's fused loop against the CPU's on E2 cells
(W and softmax must agree bit for bit, docs/science.md §3 "Fused step"). ``status RESULTS``:
the cell status counts of every run folder ``RESULTS/res_*`` (every cell must be ``ok``).
``tables LOG TITLE=NAME ...``: bench/tables/NAME.md from the rows a benchmark printed into a
session's log, where its own table file stayed on the GPU machine (the device tool returns
at most 8 files); the header names the log, the machine and the commit the log records.
"""

from __future__ import annotations

import collections
import importlib.metadata as md
import os
import re
import sys
from pathlib import Path

import numpy as np
import torch


def versions() -> None:
    print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda,
          torch.cuda.is_available(), torch.cuda.get_device_name(0))  # fmt: skip
    for p in ("numpy", "scipy", "xarray", "zarr", "cvxpy", "snakemake", "pandas", "pydantic"):
        print(p, md.version(p))
    from attnsvm.gd import fused, fused_cuda

    print("CPU fused loop:", fused.library() is not None, fused.UNAVAILABLE)
    dev = torch.device("cuda")
    ok = fused_cuda.available(dev)
    print("GPU fused loop:", fused_cuda.arch_of(dev), ok, fused_cuda.UNAVAILABLE)


def fused_agreement() -> None:
    os.environ["ATTNSVM_FUSED"] = "1"
    from attnsvm.config.cell import Cell
    from attnsvm.gd.train import train_cells

    for kw in ({"param": "W"}, {"param": "KQ"}, {"param": "KQ", "m": 4}):
        cells = [Cell(n=6, T=8, d=10, seed=s, iterations=2000, **kw) for s in range(37)]
        a, b = train_cells(cells, device="cpu"), train_cells(cells, device="cuda")
        rel = np.abs(a.loss - b.loss).max() / np.abs(a.loss).max()
        print(kw, b.device, "W equal:", np.array_equal(a.W, b.W), "softmax equal:",
              np.array_equal(a.softmax, b.softmax), f"loss max rel diff {rel:.2g}",
              "finite:", bool(b.finite.all()),
              f"{a.seconds:.2f} s CPU, {b.seconds:.2f} s GPU")  # fmt: skip


def status(results: Path) -> None:
    import xarray as xr

    from attnsvm.codes import CELL_STATUS

    for run in sorted(results.glob("res_*")):
        count: collections.Counter = collections.Counter()
        for store in sorted(run.glob("*/sweep.zarr")):
            with xr.open_zarr(store) as ds:
                count.update(CELL_STATUS[int(s)] for s in ds["status"].values.ravel())
        print(run.name, len(list(run.glob("*/sweep.zarr"))), "experiments", dict(count))


def _machine(log: str) -> str:
    """The machine a gpu_session.sh log records (its nvidia-smi and version lines)."""
    gpu = re.search(r"^(NVIDIA [^,]+), (\d+) MiB, ([\d.]+)", log, re.M)
    py = re.search(r"^(3\.\d+\.\d+) torch (\S+)", log, re.M)
    cores = re.search(r"^cores: (\d+)", log, re.M)
    versions = [f"{p} {v}" for p, v in re.findall(r"^(numpy|scipy|cvxpy) (\S+)$", log, re.M)]
    return (
        f"{cores.group(1) + ' cores' if cores else '16 cores (the lease description)'}, "
        f"{gpu.group(1)} ({int(gpu.group(2)) // 1024} GiB, driver {gpu.group(3)}); Python "
        f"{py.group(1)}, torch {py.group(2)}, {', '.join(versions)}"
    )


def _rows(log: str, first_column: str) -> tuple[list[str], list[list[str]]]:
    """The columns and rows of the Markdown table in ``log`` whose header starts with
    ``first_column`` (as :class:`tables.Table` prints them while measuring)."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column} |"))
    block = []
    for line in lines[start:]:  # the table: the lines that start with "|", in one run
        if not line.startswith("|"):
            break
        block.append([c.strip() for c in line.strip().strip("|").split("|")])
    return block[0], block[2:]


def tables_from_log(log_path: Path, wanted: list[str]) -> None:
    """Write bench/tables/NAME.md for each ``TITLE=NAME`` from the rows in ``log_path``."""
    import yaml
    from tables import TABLES, markdown_table

    log = log_path.read_text()
    meta_of = {
        "gpu_training": ("(n, T, d)", 10, "Batched training on a GPU and the CPU",
                         "python bench/bench_train_devices.py --routes "
                         "cpu,cpu-fused,cuda,cuda-fused --sizes 64,256,1024,4096,16384,65536 "
                         "--large-sizes 64,256,1024,4096,16384 --iterations 2000 "
                         "--max-seconds 4 --max-gib 4 --repeat 2"),
        "svm_batched_cuda": ("size", 20, "Batched Frobenius SVM on a GPU",
                             "python bench/bench_svm_batched.py --device cuda --repeat 2 "
                             "--batches 256,1024,4096,16384 --large-batches 64,256,1024"),
    }  # fmt: skip
    # the commit sent: the log's setup line, else the run folder's README (older sessions)
    readme = log_path.parent / "README.md"
    commit = re.search(r"^commit:? (\w+)", log, re.M) or re.search(
        r"^commit:? `?(\w+)", readme.read_text() if readme.exists() else "", re.M
    )
    load = re.search(r"load average: ([\d.]+)", log)
    for name in wanted:
        first, order, title, command = meta_of[name]
        columns, rows = _rows(log, first)
        shown = log_path.resolve().relative_to(TABLES.parent.parent).as_posix()
        notes = [f"Rows as the benchmark printed them in the session's log (`{shown}`); its "
                 "table file stayed on the GPU machine."]  # fmt: skip
        notes += NOTES[name](columns, rows)
        meta = {
            "section": "gpu", "order": order, "title": title, "command": command,
            "machine": _machine(log),
            "load": f"{load.group(1) if load else '?'} at the start of the lease (1-minute load "
                    "average); the benchmarks ran alone, before the suite and the sweeps",
            "date": re.search(r"(\d{4}-\d{2}-\d{2})", log_path.parent.name).group(1),
            "commit": commit.group(1) if commit else "unknown",
        }  # fmt: skip
        head = yaml.safe_dump(meta, sort_keys=False, width=1000, allow_unicode=True)
        body = markdown_table(columns, rows)
        text = f"---\n{head}---\n{body}\n" + "".join(f"\n- {n}" for n in notes) + "\n"
        (TABLES / f"{name}.md").write_text(text)
        print(f"wrote {TABLES / name}.md")


def _training_notes(columns: list[str], rows: list[list[str]]) -> list[str]:
    """Where the GPU beats the best CPU route, the best GPU rates, and what was skipped."""
    routes = [c.removesuffix(" seed-it/s") for c in columns[3:]]
    notes = []
    for size in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == size]
        rate = {(int(r[1]), k): float(v) for r in mine for k, v in zip(routes, r[3:], strict=True)
                if v != "-"}  # fmt: skip
        wins = None
        for S in sorted({S for S, _ in rate}):
            cpu = max((v for (s, k), v in rate.items() if s == S and k.startswith("cpu")),
                      default=None)  # fmt: skip
            gpu = max((v for (s, k), v in rate.items() if s == S and k.startswith("cuda")),
                      default=None)  # fmt: skip
            if wins is None and cpu is not None and gpu is not None and gpu > cpu:
                wins = S
        best = {k: max((v for (s, kk), v in rate.items() if kk == k), default=None)
                for k in routes}  # fmt: skip
        text = ", ".join(f"{k} {v:.3g}" for k, v in best.items() if v is not None)
        notes.append(f"{size}, {mine[0][2]} iterations: the GPU beats the best CPU route (one "
                     f"thread) from S = {wins} on; best seed-it/s per route: {text}.")  # fmt: skip
    notes.append(
        "`-`: skipped by the benchmark's rule at that commit, which predicted every route's "
        "time from its rate at the previous S. That holds for a CPU route, not for a GPU "
        "route, whose rate grows with S: the torch loop on the GPU (`cuda`) was skipped at "
        "every S after the first where the next call was predicted above 4 s. The rule now "
        "skips a GPU route only once a call took that long (bench_train_devices.py)."
    )
    notes.append(
        "Seed-iterations per second of a whole `train_batch` call (param W, float64, the "
        "cells' log-spaced checkpoints; inputs to the device and checkpoints back to the host "
        "included), best of 2, one CPU thread. Routes: cpu / cuda the torch loop, cpu-fused "
        "fused.c, cuda-fused fused_cuda.cu (`ATTNSVM_FUSED=1`, docs/science.md §3)."
    )
    return notes


def _svm_notes(columns: list[str], rows: list[list[str]]) -> list[str]:
    best = max(float(r[3].split("/")[0]) for r in rows if r[0].startswith("(6, 8, 10)"))
    return [
        f"Best batched rate at the E2 size (6, 8, 10): {best:.0f} certified instances per "
        "second of wall time (every instance certified), against the issue's target of 10^4.",
        "Instances per second, wall time / process CPU time, best of 2, batched route on "
        "cuda. loop: `solve_frobenius` per instance on the CPU; batched: "
        "`solve_frobenius_batched` with everything included (stacking, Gram matrices, "
        "pivoting, certificate, per-instance finish).",
    ]


NOTES = {"gpu_training": _training_notes, "svm_batched_cuda": _svm_notes}


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "versions":
        versions()
    elif what == "fused":
        fused_agreement()
    elif what == "status":
        status(Path(sys.argv[2]))
    elif what == "tables":
        tables_from_log(Path(sys.argv[2]), sys.argv[3:])
    else:
        raise SystemExit(f"unknown check {what!r}: versions, fused, status or tables")
