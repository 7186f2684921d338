"""Logging and progress for long work: every stage of a job names its sizes and timings.

The library logs with the standard :mod:`logging` module under the ``attnsvm`` logger (one
child logger per module); it never configures handlers itself. Entry points do:
workflow scripts call :func:`log_to` with the rule's log file, the block worker and the
command line call :func:`configure`. Progress bars (:func:`progress_bar`) write to stderr and
are off unless asked for, so that block logs stay line-oriented.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATEFMT = "%Y-%m-%d %H:%M:%S"


def configure(level: int = logging.INFO, stream: IO[str] | None = None) -> logging.Logger:
    """Send ``attnsvm`` log records of ``level`` and above to ``stream`` (default stderr).

    Idempotent: a second call replaces the handler of the first instead of adding one.
    """
    root = logging.getLogger("attnsvm")
    for h in list(root.handlers):
        if getattr(h, "_attnsvm", False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT, DATEFMT))
    handler._attnsvm = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    return root


def log_to(path: str) -> None:
    """A workflow script's first call: stderr (warnings, tracebacks, worker output) and the
    ``attnsvm`` log records go to the rule's log file ``path``."""
    sys.stderr = open(path, "w", buffering=1)  # noqa: SIM115 - lives as long as the job
    configure(stream=sys.stderr)
    logging.getLogger("attnsvm.logs").info("%s %.3f", JOB_START_MARK, time.time())


JOB_START_MARK = "job log opened at unix time"
"""First line of every rule's log: ``attnsvm status`` reads job start times from it."""


def job_start_time(path: str) -> float | None:
    """The Unix time at which :func:`log_to` opened the log ``path``, if it did."""
    try:
        with open(path) as fh:
            first = fh.readline()
    except OSError:
        return None
    _, mark, rest = first.partition(JOB_START_MARK)
    try:
        return float(rest.split()[0]) if mark else None
    except (IndexError, ValueError):
        return None


@contextmanager
def stage(logger: logging.Logger, name: str, **sizes: Any) -> Iterator[dict[str, Any]]:
    """Log ``name`` with its ``sizes`` when it starts and its wall time when it ends.

    The yielded dict may be filled with more ``key=value`` pairs for the end line.
    """
    extra: dict[str, Any] = {}
    detail = " ".join(f"{k}={v}" for k, v in sizes.items())
    logger.info("stage %s: start%s", name, f" ({detail})" if detail else "")
    t0 = time.perf_counter()
    try:
        yield extra
    except BaseException:
        logger.error("stage %s: failed after %.3f s", name, time.perf_counter() - t0)
        raise
    more = " ".join(f"{k}={v}" for k, v in extra.items())
    logger.info(
        "stage %s: done in %.3f s%s", name, time.perf_counter() - t0, f" ({more})" if more else ""
    )


def progress_bar(enabled: bool, total: int, desc: str, unit: str = "it"):
    """A tqdm bar on stderr, or ``None`` when ``enabled`` is false (callers check)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm  # only where a bar is shown (run-cell)

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=True, dynamic_ncols=True)
