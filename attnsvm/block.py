"""One workflow job: run a block of cells and write its self-contained store atomically."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnsvm import codes, provenance
from attnsvm.cell import Cell

FAULT_ENV = "ATTNSVM_FAULT_INJECT"
"""Fault injection for tests (read by the worker and by :func:`attnsvm.job.run_job`):
``kill:<substring>`` makes the worker of every block whose name contains the substring
SIGKILL itself before computing (as the out-of-memory killer would); ``enospc:<substring>``
makes it fail as on a full disk."""


def cells_digest(cells: Sequence[Cell | dict[str, Any]]) -> str:
    """SHA-256 of the block's cell descriptions (order included; cells or their dicts)."""
    dicts = [Cell.from_dict(c).to_dict() if isinstance(c, dict) else c.to_dict() for c in cells]
    text = json.dumps(dicts, sort_keys=True, separators=(",", ":"))
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

    torch.set_num_threads(max(1, int(threads)))
    cells = [c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells]
    try:
        resolve_device(device)  # before any work: no GPU on a GPU node is the machine's fault
    except ValueError as err:
        raise EnvironmentFailure(str(err)) from err
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


class EnvironmentFailure(RuntimeError):
    """The machine, not the block, made the block fail (see :data:`codes.FAILURE_KINDS`)."""


ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""OSErrors that say the machine is at fault: disk full, quota exceeded."""


def is_environmental(err: BaseException) -> bool:
    """Whether ``err`` is an environmental failure (retried by the next run, not recorded)."""
    if isinstance(err, EnvironmentFailure):
        return True
    return isinstance(err, OSError) and err.errno in ENVIRONMENT_ERRNOS


def _main(argv: list[str]) -> int:
    """``python -m attnsvm.block SPEC.json``: the worker process of :func:`attnsvm.job.run_job`.

    Exits with :data:`codes.EXIT_ENVIRONMENT` after an environmental failure.
    """
    spec = json.loads(Path(argv[0]).read_text())
    fault = os.environ.get(FAULT_ENV, "")
    try:
        if fault.startswith("enospc:") and fault[7:] and fault[7:] in spec.get("block", ""):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), spec["out"])  # fault test
        run_block(
            spec["cells"],
            spec["out"],
            experiment=spec.get("experiment", ""),
            block=spec.get("block", ""),
            device=spec.get("device", "auto"),
            threads=spec.get("threads", 1),
        )
    except Exception as err:
        if not is_environmental(err):
            raise
        traceback.print_exc()
        print(f"attnsvm: environmental failure: {err}", file=sys.stderr)
        return codes.EXIT_ENVIRONMENT
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
