"""A block job: the workflow job that runs a block's worker and survives its crash (a signal, an
uncaught error, a broken machine).

:func:`block_job` computes a block in a worker process: a fork of the machine's fork server
(:mod:`attnsvm.sweep.forkserver`), which imported everything once, else a process of its own.
What happens when the worker fails depends on who is at fault (docs/resume.md, "Failed
blocks"; :data:`attnsvm.codes.FAILURE_KINDS`):

- the *environment* (the worker killed by a signal: the out-of-memory killer, a bus error of
  a damaged library, a node going down; a full disk; a bad ``ATTNSVM_*`` variable; no GPU for
  ``device: cuda``; a training library that cannot be built): nothing is stored, the job fails
  (:class:`attnsvm.failures.EnvironmentFailure`) and the next run of the workflow recomputes
  the block, once the cause is gone;
- the *block* (an uncaught error in attnsvm's code): the job writes the block's store with
  every cell marked ``failed`` and the reason in its message, so the sweep records the failure
  instead of losing the grid points; it stays failed until forced (``--forcerun``).

Either way a record ``<experiment>/failures/<block>.json`` says what happened (kind, reason,
host, time): ``attnsvm status`` lists them and the workflow's end counts them (a run with a
failed block exits non-zero). A kill of the whole job (walltime, preemption, Ctrl-C) leaves
no store, and the block is simply rerun.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnsvm import codes
from attnsvm.atomic import write_text_atomic
from attnsvm.failures import DeviceUnavailableError, EnvironmentFailure
from attnsvm.sweep import forkserver, owner
from attnsvm.sweep.failed import clear_failure, record_failure
from attnsvm.sweep.integrity import clean_stale_partials
from attnsvm.sweep.worker import FAULT_ENV, spec_cells

logger = logging.getLogger(__name__)

RUNNING_SUFFIX = ".running"
__all__ = ["FAULT_ENV", "block_job", "claim_path", "planned_block_job"]


def _describe_exit(code: int) -> str:
    if code == codes.EXIT_ENVIRONMENT:
        return "environmental failure"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with status {code}"


def failure_kind(code: int) -> str:
    """``environment`` or ``reproducible`` (:data:`attnsvm.codes.FAILURE_KINDS`) for a worker
    that ended with ``code`` (a negative code: killed by that signal)."""
    environment = code < 0 or code in (codes.EXIT_ENVIRONMENT, codes.EXIT_DEVICE_UNAVAILABLE)
    return "environment" if environment else "reproducible"


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
    (:func:`attnsvm.plan.parse_config`); the worker builds only this block's cells from it,
    without validating them again (:meth:`attnsvm.config.grid.Experiment.block`), so this
    process imports nothing of the configuration. ``options``: those of :func:`block_job`.
    """
    return _run_block({"config": config}, out, experiment=experiment, block=block, **options)


def block_job(
    cells: Sequence[Any],
    out: str | os.PathLike,
    *,
    experiment: str = "",
    block: str = "",
    device: str = "auto",
    threads: int = 1,
    log: str | None = None,
) -> Path:
    """Compute one block in a worker process; returns the path of its store (the worker's, or
    a failed-block store if its code failed).

    ``cells``: planned cells, or their dicts (validated here). Raises
    :class:`attnsvm.failures.DeviceUnavailableError` at once, writing nothing, when ``device``
    asks for CUDA and there is none, and :class:`attnsvm.failures.EnvironmentFailure` when the
    worker failed for an environmental reason (module docstring); neither stores anything.
    """
    from attnsvm.config.cell import Cell, cells_text  # pydantic: only where cells are given

    text = cells_text([c if isinstance(c, Cell) else Cell.from_dict(c) for c in cells])
    return _run_block({"cells_json": text}, out, experiment=experiment, block=block,
                      device=device, threads=threads, log=log)  # fmt: skip


def _run_block(
    what: dict[str, Any],
    out: str | os.PathLike,
    *,
    experiment: str = "",
    block: str = "",
    device: str = "auto",
    threads: int = 1,
    log: str | None = None,
) -> Path:
    _check_device(device)
    started = time.time()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(out)
    claim = claim_path(out)
    write_text_atomic(claim, json.dumps(owner.identity()))
    spec = {
        **what,
        "job_started": started,
        "out": str(out),
        "experiment": experiment,
        "block": block,
        "device": device,
        "threads": max(1, int(threads)),
    }
    fd, name = tempfile.mkstemp(prefix="attnsvm-why-", suffix=".txt")
    os.close(fd)
    why = Path(name)
    spec["why"] = str(why)  # the worker's reason for an environmental failure
    try:
        code = _spawn_worker(spec, block)
        return _outcome(code, spec, out, log)
    finally:
        claim.unlink(missing_ok=True)
        why.unlink(missing_ok=True)


def _check_device(device: str) -> None:
    """Resolve an explicit device before any work (torch is imported only for those)."""
    if str(device).strip().lower() not in ("auto", "cpu"):
        from attnsvm.gd.device import resolve_device  # torch: only for an explicit device

        resolve_device(device)


def claim_path(out: Path) -> Path:
    """``.<block>.zarr.zip.running``: who is computing a block (read by ``attnsvm status``)."""
    return out.parent / f".{out.name}{RUNNING_SUFFIX}"


def _spawn_worker(spec: dict[str, Any], block: str) -> int:
    """Run the worker on ``spec`` in a fork of this machine's fork server (its imports done
    once for every job; :mod:`attnsvm.sweep.forkserver`), else in a process of its own; its
    exit status (negative: killed by that signal)."""
    fault = os.environ.get(FAULT_ENV, "")
    if fault.startswith("kill:") and fault[5:] and fault[5:] in block:
        return -signal.SIGKILL  # simulate the worker being OOM-killed
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(spec, fh)
        spec_path = fh.name
    try:
        logger.info("block %s: starting the worker", block)
        t0 = time.perf_counter()
        code = forkserver.run("attnsvm.sweep.worker:_main", [spec_path])
        logger.info(
            "block %s: worker exited with status %d after %.3f s (start-up included)",
            *(block, code, time.perf_counter() - t0),
        )
        return code
    finally:
        os.unlink(spec_path)


def _outcome(code: int, spec: dict[str, Any], out: Path, log: str | None) -> Path:
    """The store of a block whose worker ended with ``code``, or the environmental failure."""
    block = spec.get("block") or out.name
    if code == 0 and out.exists():
        clear_failure(out)  # an earlier failure of this block is over
        return out
    if code == 0:
        code = 1  # it said it succeeded, yet wrote nothing
    kind = failure_kind(code)
    tail = _log_tail(log)
    reason = _describe_exit(code)
    if kind == "environment":
        try:
            last = Path(spec["why"]).read_text().strip()
        except (KeyError, OSError):
            last = ""
        reason += f": {last}" if last else ""
        record_failure(out, spec.get("experiment", ""), block, kind, reason, code)
        clean_stale_partials(out)
        if code == codes.EXIT_DEVICE_UNAVAILABLE:  # the worker saw no GPU, this process did
            raise DeviceUnavailableError(f"block {block}: {last or 'no CUDA device'}")
        raise EnvironmentFailure(
            f"block {block}: {reason}; nothing stored, the next run of the workflow recomputes it"
        )
    message = f"block job failed: {reason}" + (f"\n--- worker log tail ---\n{tail}" if tail else "")
    print(f"attnsvm: {message}", file=sys.stderr)
    record_failure(out, spec.get("experiment", ""), block, kind, reason, code)
    # xarray, zarr and the cells: only after a crash
    from attnsvm.sweep.store import failed_block_dataset, write_atomic

    clean_stale_partials(out)
    attrs = {"experiment": spec.get("experiment", ""), "block": spec.get("block", "")}
    return write_atomic(failed_block_dataset(spec_cells(spec), message, attrs, kind), out)
