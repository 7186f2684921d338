"""The worker process of a block job: compute the block's cells and write its store atomically.

:func:`attnsvm.sweep.job.block_job` starts it (``python -m attnsvm.sweep.worker SPEC.json``)
and survives it if it dies. The spec holds the block's cells serialized once
(:func:`attnsvm.config.cell.cells_text`); the worker parses them, runs them through their
tasks (:func:`attnsvm.tasks.run_cells`) and stores that same text with its digest.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnsvm import codes, provenance
from attnsvm.config.cell import Cell, cells_from_text, cells_text, text_digest
from attnsvm.failures import DeviceUnavailableError, is_environmental
from attnsvm.logs import configure, stage

log = logging.getLogger("attnsvm.sweep.worker")  # also when run as __main__ (the worker)

FAULT_ENV = "ATTNSVM_FAULT_INJECT"
"""Fault injection for tests (read by the worker and by :func:`attnsvm.sweep.job.block_job`):
``kill:<substring>`` makes the worker of every block whose name contains the substring
SIGKILL itself before computing (as the out-of-memory killer would); ``enospc:<substring>``
makes it fail as on a full disk."""


def write_block(
    cells: Sequence[Cell | dict[str, Any]],
    out: str | os.PathLike,
    *,
    experiment: str = "",
    block: str = "",
    device: str = "auto",
    threads: int = 1,
    job_started: float | None = None,
    cells_json: str | None = None,
) -> Path:
    """Train and solve ``cells`` (docs/science.md §1-5) and write its store to ``out``.

    The store records the cells and their digest, package versions, attnsvm commit, host,
    device, start/end time and per-stage timings. Per-cell failures are recorded as statuses.
    Cell dicts are validated (:meth:`Cell.from_dict`); the worker's own cells come validated,
    with ``cells_json``, their one serialization (:func:`attnsvm.config.cell.cells_text`),
    which the store records and digests as it is. ``job_started`` (Unix time) is when the
    workflow job began, before the worker's start-up: ``attnsvm status`` estimates the
    remaining time from these wall times per job.
    """
    job_started = time.time() if job_started is None else float(job_started)
    t_start = time.perf_counter()
    cells = [c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells]
    cells_json = cells_text(cells) if cells_json is None else cells_json
    trains = any(c.train for c in cells)  # SVM-only blocks (E3) do not need torch at all
    if trains:
        from attnsvm.gd.device import resolve_device  # torch: SVM-only blocks (E3) never load it

        resolve_device(device)  # DeviceUnavailableError before any work when CUDA is missing
    with stage(log, "imports"):  # timed: the worker's start-up, logged per job
        from attnsvm.sweep.store import results_to_dataset, write_atomic
        from attnsvm.tasks import run_cells
        from attnsvm.tasks.result import left_fused_loop

        if trains:
            import torch  # loaded by the tasks that train; SVM-only blocks (E3) never need it

            torch.set_num_threads(max(1, int(threads)))
    log.info(
        "block %s of experiment %s: %d cell(s), device %s, %d torch thread(s), out %s",
        *(block or "-", experiment or "-", len(cells), device, int(threads), out),
    )
    start, t0 = provenance.now(), time.perf_counter()
    with stage(log, "compute", cells=len(cells)):
        results = run_cells(cells, device=device)
    compute = time.perf_counter() - t0
    attrs = {
        "experiment": experiment,
        "block": block,
        "cells_digest": text_digest(cells_json),
        "versions": provenance.package_versions(),
        "git_commit": provenance.git_commit(),
        "host": provenance.host(),
        "device": sorted({r.device for r in results}),
        "torch_threads": int(threads),
        "started": start,
        "seconds_compute": compute,
        "job_started": job_started,
        "status_counts": json.dumps(
            {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})}
        ),
        "cells_torch_loop": sum(left_fused_loop(r.device) for r in results),
        "seconds_stages": {
            stage: float(sum(r.timings.get(stage, 0.0) for r in results))
            for stage in ("train", "solve", "metrics")
        },
    }
    with stage(log, "dataset") as info:
        ds = results_to_dataset(results, attrs, cells_json)
        info["variables"] = len(ds.data_vars)
        info["MB"] = f"{ds.nbytes / 1e6:.2f}"
    t1 = time.perf_counter()
    ds.attrs["finished"] = provenance.now()
    ds.attrs["seconds_total_before_write"] = t1 - t0
    with stage(log, "write", store=Path(out).name):
        path = write_atomic(ds, out)
    counts = {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})}
    log.info(
        "block %s done in %.3f s (compute %.3f s: train %.3f, solve %.3f, metrics %.3f); cells %s",
        *(block or "-", time.perf_counter() - t_start, compute),
        *(attrs["seconds_stages"][k] for k in ("train", "solve", "metrics")),
        ", ".join(f"{k} {v}" for k, v in counts.items()),
    )
    return path


def _main(argv: list[str]) -> int:
    """``python -m attnsvm.sweep.worker SPEC.json``: worker of :func:`attnsvm.sweep.job.block_job`.

    The spec's cells (``cells_json``, their one serialization) were validated when the plan
    was built (or by ``block_job``): they are rebuilt without validation (:meth:`Cell.trusted`).

    Logs to stderr, which the job shares with the rule's log file. Exits with
    :data:`codes.EXIT_DEVICE_UNAVAILABLE` when CUDA was asked for and is missing
    (one line), and with :data:`codes.EXIT_ENVIRONMENT` after another environmental failure
    (disk full, quota exceeded).
    """
    configure()
    spec = json.loads(Path(argv[0]).read_text())
    fault = os.environ.get(FAULT_ENV, "")
    try:
        if fault.startswith("enospc:") and fault[7:] and fault[7:] in spec.get("block", ""):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), spec["out"])  # fault test
        write_block(
            cells_from_text(spec["cells_json"]),  # validated when the plan was built
            spec["out"],
            cells_json=spec["cells_json"],
            experiment=spec.get("experiment", ""),
            block=spec.get("block", ""),
            device=spec.get("device", "auto"),
            threads=spec.get("threads", 1),
            job_started=spec.get("job_started"),
        )
    except DeviceUnavailableError as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        return codes.EXIT_DEVICE_UNAVAILABLE
    except Exception as err:
        if not is_environmental(err):
            raise
        traceback.print_exc()
        print(f"attnsvm: environmental failure: {err}", file=sys.stderr)
        return codes.EXIT_ENVIRONMENT
    return 0


if __name__ == "__main__":
    code = _main(sys.argv[1:])
    # The store is complete and renamed into place: skip the interpreter's teardown (torch,
    # zarr's event loop; ~2 s per block measured under load), as nothing is left to save.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
