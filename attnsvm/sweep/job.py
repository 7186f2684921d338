"""A block job: the workflow job that runs a block's worker and survives its crash (out-of-memory,
a signal, a bug).

:func:`block_job` computes a block in a worker process (``python -m attnsvm.sweep.worker``). If the
worker dies (killed by the out-of-memory killer, a segfault, an uncaught error), the job
still writes the block's store, with every cell marked ``failed`` and the reason in its
message, so the sweep records the failure instead of losing the grid points. A kill of the
whole job (walltime, preemption, Ctrl-C) leaves no store, and the block is simply rerun.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnsvm import codes
from attnsvm.config.cell import Cell, cells_text
from attnsvm.config.grid import planned_experiment
from attnsvm.failures import DeviceUnavailableError
from attnsvm.sweep.integrity import clean_stale_partials
from attnsvm.sweep.worker import FAULT_ENV

logger = logging.getLogger(__name__)

RUNNING_SUFFIX = ".running"
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
__all__ = ["FAULT_ENV", "clean_stale_partials", "claim_path", "block_job", "planned_block_job"]


def _describe_exit(code: int) -> str:
    if code == codes.EXIT_ENVIRONMENT:
        return "environmental failure (retried by the next run of the workflow)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with status {code}"


def _log_tail(path: str | None, lines: int = 15) -> str:
    if not path or not Path(path).exists():
        return ""
    text = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def planned_block_job(
    config: dict[str, Any],
    experiment: str,
    block: str,
    out: str | os.PathLike,
    **options: Any,
) -> Path:
    """Rule ``block``: compute block ``block`` of ``experiment`` as planned from ``config``.

    The Snakemake process that planned the job validated ``config`` and every cell
    (:func:`attnsvm.plan.parse_config`); here only this block's cells are built from it,
    without validating them again (:meth:`attnsvm.config.grid.Experiment.block`), and
    :func:`block_job` serializes them once, for its worker. ``options``: those of :func:`block_job`.
    """
    cells = planned_experiment(config, experiment).block(block).cells
    return block_job(cells, out, experiment=experiment, block=block, **options)


def block_job(
    cells: Sequence[Cell | dict[str, Any]],
    out: str | os.PathLike,
    *,
    experiment: str = "",
    block: str = "",
    device: str = "auto",
    threads: int = 1,
    log: str | None = None,
) -> Path:
    """Compute one block in a worker process and guarantee a store at ``out``.

    ``cells``: planned cells, or their dicts (validated here). Returns the path of the store:
    the worker's, or a failed-block store if it crashed.
    Raises :class:`attnsvm.failures.DeviceUnavailableError` at once, writing nothing, when
    ``device`` asks for CUDA and there is none (an environmental failure: no cell is failed
    for it, and a rerun on a machine with a GPU computes the block).
    """
    _check_device(device)
    text = cells_text([c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells])
    started = time.time()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(out)
    claim = claim_path(out)
    claim.write_text(
        json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
    )
    try:
        return _spawn_worker(text, out, experiment, block, device, threads, log, started)
    finally:
        claim.unlink(missing_ok=True)


def _check_device(device: str) -> None:
    """Resolve an explicit device before any work (torch is imported only for those)."""
    if str(device).strip().lower() not in ("auto", "cpu"):
        from attnsvm.gd.device import resolve_device  # torch: only for an explicit device

        resolve_device(device)


def claim_path(out: Path) -> Path:
    """``.<block>.zarr.running``: who is computing a block (read by ``attnsvm status``)."""
    return out.parent / f".{out.name}{RUNNING_SUFFIX}"


def _spawn_worker(
    cells_json: str,
    out: Path,
    experiment: str,
    block: str,
    device: str,
    threads: int,
    log: str | None,
    started: float,
) -> Path:
    spec = {
        "job_started": started,
        "cells_json": cells_json,  # the one serialization of the cells: the store keeps it
        "out": str(out),
        "experiment": experiment,
        "block": block,
        "device": device,
        "threads": threads,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(spec, fh)
        spec_path = fh.name
    env = dict(os.environ)
    # BLAS pools sized to the job's cores: the default (all cores per process) makes
    # parallel jobs fight over the machine (a 1 s -> 0.2 s difference for small lstsq calls).
    for var in BLAS_THREAD_VARS:
        env[var] = str(max(1, int(threads)))
    fault = env.get(FAULT_ENV, "")
    try:
        if fault.startswith("kill:") and fault[5:] and fault[5:] in block:
            code = -signal.SIGKILL  # simulate the worker being OOM-killed
        else:
            sys.stderr.flush()
            try:
                err = sys.stderr if sys.stderr.fileno() >= 0 else None
            except (AttributeError, OSError, ValueError):
                err = None  # e.g. pytest's capture: let the worker inherit our stderr
            cmd = [sys.executable, "-m", "attnsvm.sweep.worker", spec_path]
            logger.info("block %s: starting the worker process", block)
            t0 = time.perf_counter()
            code = subprocess.call(cmd, env=env, stderr=err)
            logger.info(
                "block %s: worker exited with status %d after %.3f s (start-up included)",
                *(block, code, time.perf_counter() - t0),
            )
    finally:
        os.unlink(spec_path)
    if code == 0 and out.exists():
        return out
    if code == codes.EXIT_DEVICE_UNAVAILABLE:  # the worker saw no GPU although this process did
        tail = _log_tail(log, 1)
        raise DeviceUnavailableError(f"block {block or out.name}: {tail or 'no CUDA device'}")
    reason = _describe_exit(code)
    tail = _log_tail(log)
    message = f"block job failed: {reason}" + (f"\n--- worker log tail ---\n{tail}" if tail else "")
    print(f"attnsvm: {message}", file=sys.stderr)
    from attnsvm.sweep.store import failed_block_dataset, write_atomic  # xarray, zarr: on a crash

    kind = "environment" if code == codes.EXIT_ENVIRONMENT else "reproducible"
    clean_stale_partials(out)
    attrs = {"experiment": experiment, "block": block}
    return write_atomic(failed_block_dataset(cells_json, message, attrs, kind), out)
