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
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnsvm import codes, provenance
from attnsvm.failures import DeviceUnavailableError, EnvironmentFailure, is_environmental
from attnsvm.logs import configure, stage

if TYPE_CHECKING:
    from attnsvm.config.cell import Cell

log = logging.getLogger("attnsvm.sweep.worker")  # also when run as __main__ (the worker)

FAULT_ENV = "ATTNSVM_FAULT_INJECT"
"""Fault injection for tests (read by the worker and by :func:`attnsvm.sweep.job.block_job`;
:data:`attnsvm.sweep.environment.FAULTS`): ``kill:<substring>`` makes the worker of every
block whose name contains the substring be killed by SIGKILL before computing (as the
out-of-memory killer would), ``segv:<substring>`` die of SIGSEGV, ``enospc:<substring>``
fail as on a full disk and ``raise:<substring>`` with an uncaught error (a bug of the code: a
reproducible failure)."""


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
    from attnsvm.config.cell import Cell, cells_text, text_digest  # pydantic: not in the job

    job_started = time.time() if job_started is None else float(job_started)
    t_start = time.perf_counter()
    cells = [c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells]
    cells_json = cells_text(cells) if cells_json is None else cells_json
    trains = any(c.train for c in cells)  # SVM-only blocks (E3) do not need torch at all
    if trains:
        from attnsvm.gd.device import resolve_device  # torch: SVM-only blocks (E3) never load it

        resolve_device(device)  # DeviceUnavailableError before any work when CUDA is missing
        _check_training_library()
    with stage(log, "imports"):  # timed: the worker's start-up, logged per job
        from attnsvm.sweep.store import results_to_dataset, write_atomic
        from attnsvm.tasks import run_cells
        from attnsvm.tasks.result import left_fused_loop

    log.info(
        "block %s of experiment %s: %d cell(s), device %s, %d torch thread(s), out %s",
        *(block or "-", experiment or "-", len(cells), device, int(threads), out),
    )
    start, t0 = provenance.now(), time.perf_counter()
    with stage(log, "compute", cells=len(cells)):
        results = run_cells(cells, device=device, threads=threads)
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


def _check_training_library() -> None:
    """Raise :class:`EnvironmentFailure` when this machine has a C compiler but the fused
    loop's library cannot be built, checked or loaded even after its rebuild
    (:mod:`attnsvm.gd.native`): training would silently take the torch loop here and give
    other last bits than elsewhere. A machine without a compiler takes the torch loop, as
    documented (docs/science.md §3, "Fused step")."""
    from attnsvm.gd import fused, native  # torch: blocks that train load it anyway

    if fused.enabled() and fused.library() is None and native.PROBLEMS:
        raise EnvironmentFailure(f"the fused training loop is unusable here: {native.PROBLEMS[-1]}")


def spec_cells(spec: dict[str, Any]) -> str:
    """The spec's cells as text: given, or this block's cells built from the planned config
    (validated by the process that planned the job: not again)."""
    if "cells_json" in spec:
        return spec["cells_json"]
    # pydantic and the config models: in the worker, not in the job that starts it
    from attnsvm.config.cell import cells_text
    from attnsvm.config.grid import planned_experiment
    from attnsvm.sweep import packs

    exp = planned_experiment(spec["config"], spec["experiment"])
    exp = packs.kept(exp, Path(spec["out"]).parent.parent)  # the packs of the job's plan
    return cells_text(exp.block(spec["block"]).cells)


def _inject(fault: str, spec: dict[str, Any]) -> None:
    """The test faults of :data:`FAULT_ENV` that happen in the worker."""
    kind, _, part = fault.partition(":")
    if not part or part not in spec.get("block", ""):
        return
    if kind == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), spec["out"])
    if kind == "raise":
        raise RuntimeError(f"fault injected by {FAULT_ENV}={fault}")
    if kind == "segv":
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)


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
    try:
        # pydantic and the config models: in the worker, not in the job that starts it
        from attnsvm.config.cell import cells_from_text
        from attnsvm.sweep.environment import check_environment

        check_environment()  # this node's ATTNSVM_* variables (a cluster node's may differ)
        _inject(os.environ.get(FAULT_ENV, ""), spec)
        cells_json = spec_cells(spec)
        write_block(
            cells_from_text(cells_json),  # validated when the plan was built
            spec["out"],
            cells_json=cells_json,
            experiment=spec.get("experiment", ""),
            block=spec.get("block", ""),
            device=spec.get("device", "auto"),
            threads=spec.get("threads", 1),
            job_started=spec.get("job_started"),
        )
    except DeviceUnavailableError as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        _tell_why(spec, f"attnsvm: error: {err}")
        return codes.EXIT_DEVICE_UNAVAILABLE
    except Exception as err:
        if not is_environmental(err):
            raise
        traceback.print_exc()
        print(f"attnsvm: environmental failure: {err}", file=sys.stderr)
        _tell_why(spec, str(err))
        return codes.EXIT_ENVIRONMENT
    return 0


def _tell_why(spec: dict[str, Any], line: str) -> None:
    """Leave the reason of an environmental failure where the job reads it (``why``)."""
    if spec.get("why"):
        try:
            Path(spec["why"]).write_text(line.splitlines()[0] if line else "")
        except OSError:
            pass


if __name__ == "__main__":
    code = _main(sys.argv[1:])
    # The store is complete and renamed into place: skip the interpreter's teardown (torch,
    # zarr's event loop; ~2 s per block measured under load), as nothing is left to save.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
