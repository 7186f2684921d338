"""Checks of bench/gpu_session.sh on a lent GPU machine (issue 32).

``python bench/gpu_check.py versions``: Python, torch, CUDA, the GPU, the package versions, and
whether both fused loops build. ``fused``: the GPU's fused loop against the CPU's on E2 cells
(W and softmax must agree bit for bit, docs/science.md §3 "Fused step"). ``status RESULTS``:
the cell status counts of every run folder ``RESULTS/res_*`` (every cell must be ``ok``).
"""

from __future__ import annotations

import collections
import importlib.metadata as md
import os
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


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "versions":
        versions()
    elif what == "fused":
        fused_agreement()
    elif what == "status":
        status(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown check {what!r}: versions, fused or status")
