"""One workflow job: run a block of cells and write its self-contained store atomically."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnsvm import provenance
from attnsvm.cell import Cell


def cells_digest(cells: Sequence[Cell]) -> str:
    """SHA-256 of the block's cell descriptions (order included)."""
    text = json.dumps([c.to_dict() for c in cells], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def run_block(
    cells: Sequence[Cell | dict[str, Any]],
    out: str | os.PathLike,
    *,
    experiment: str = "",
    block: str = "",
    device: str = "auto",
    threads: int = 1,
) -> Path:
    """Train and solve ``cells`` (SCIENCE.md sections 1-5) and write the block store to ``out``.

    The store records the cells and their digest, package versions, attnsvm commit, host,
    device, start/end time and per-stage timings. Per-cell failures are recorded as statuses.
    """
    import torch

    from attnsvm.block_store import results_to_dataset, write_atomic
    from attnsvm.device import resolve_device
    from attnsvm.run import run_cells

    resolve_device(device)  # DeviceUnavailableError before any work when CUDA is missing
    torch.set_num_threads(max(1, int(threads)))
    cells = [c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells]
    start, t0 = provenance.now(), time.perf_counter()
    results = run_cells(cells, device=device)
    compute = time.perf_counter() - t0
    attrs = {
        "experiment": experiment,
        "block": block,
        "cells_digest": cells_digest(cells),
        "versions": provenance.package_versions(),
        "git_commit": provenance.git_commit(),
        "host": provenance.host(),
        "device": sorted({r.device for r in results}),
        "torch_threads": int(threads),
        "started": start,
        "seconds_compute": compute,
        "seconds_stages": {
            stage: float(sum(r.timings.get(stage, 0.0) for r in results))
            for stage in ("train", "solve", "metrics")
        },
    }
    ds = results_to_dataset(results, attrs)
    t1 = time.perf_counter()
    ds.attrs["finished"] = provenance.now()
    ds.attrs["seconds_total_before_write"] = t1 - t0
    return write_atomic(ds, out)


def _main(argv: list[str]) -> int:
    """``python -m attnsvm.block SPEC.json``: the worker process of :func:`attnsvm.job.run_job`."""
    from attnsvm.device import EXIT_DEVICE_UNAVAILABLE, DeviceUnavailableError

    spec = json.loads(Path(argv[0]).read_text())
    try:
        run_block(
            spec["cells"],
            spec["out"],
            experiment=spec.get("experiment", ""),
            block=spec.get("block", ""),
            device=spec.get("device", "auto"),
            threads=spec.get("threads", 1),
        )
    except DeviceUnavailableError as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        return EXIT_DEVICE_UNAVAILABLE
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
