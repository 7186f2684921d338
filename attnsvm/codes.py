"""The one table of codes: integer status codes used in stores (CF ``flag_values`` /
``flag_meanings`` style) and in results; every other module uses these tables."""

from __future__ import annotations

CELL_STATUS = ("ok", "nonfinite", "failed", "missing")
"""ok; nonfinite: training produced NaN/inf (frozen there, flagged); failed: an exception in this
cell (message kept); missing: the cell's block has no finished store (not run yet or killed)."""

SVM_STATUS = (
    "optimal",
    "optimal_inaccurate",
    "infeasible",
    "solver_error",
    "not_solved",
    "infeasible_uncertified",
)
"""Status of one SVM solve (docs/science.md §4): optimal only with its certificate (rows and
duality gap), infeasible only with a checked Farkas vector (:mod:`attnsvm.svm.farkas`);
optimal_inaccurate and infeasible_uncertified are the same answers without their certificate
(not solved, counted apart); not_solved: that SVM was not attempted for this cell. Appended,
never reordered: stored codes keep their meaning."""

CONVERGENCE = ("global", "local", "not-local")
"""Convergence type of a GD run by its selection alpha, the paper's rule (docs/science.md §5,
Metrics; :func:`attnsvm.tasks.metrics.selection_type`); -1 where not applicable."""

CONVERGENCE_STRICT = ("global", "local", "not-local", "unsaturated")
"""Convergence type by the strict rule (unsaturated first, then corr >= threshold;
docs/science.md §5, Metrics; :func:`attnsvm.tasks.metrics.convergence_type`); -1 where not
applicable."""

NOT_APPLICABLE = -1

FAILURE_KINDS = ("environment", "reproducible")
"""Why a block's worker crashed (attribute ``failure_kind`` of a failed block store).
environment: the machine, not the block (disk full, CUDA asked for but absent); the next run
of the workflow retries it. reproducible: anything else (an uncaught error, a segfault, the
out-of-memory killer); the block stays failed until forced (``--forcerun``)."""

EXIT_ENVIRONMENT = 75
"""Exit status of a block worker that failed for an environmental reason (sysexits'
EX_TEMPFAIL)."""

EXIT_DEVICE_UNAVAILABLE = 69
"""Exit status of a block worker (``python -m attnsvm.sweep.worker``) whose device is not
available (sysexits' EX_UNAVAILABLE; :func:`attnsvm.sweep.job.block_job` raises, stores
nothing, and the next run retries the block: an environmental failure, as
:data:`EXIT_ENVIRONMENT` is)."""

OLD_MARK = ".old-"
"""Marks an output moved aside while its replacement is renamed into place:
``.<name>.old-<id>`` (removed right after; left only by a killed writer)."""

PARTIAL_MARK = ".partial-"
"""Marks an output being written: ``.<name>.partial-<host>-<pid>-<id>`` (hidden, never finished;
:func:`attnsvm.atomic.partial_path`)."""


def encode(value: str, table: tuple[str, ...]) -> int:
    """Code of ``value`` in ``table`` (-1 for the empty string)."""
    return NOT_APPLICABLE if value == "" else table.index(value)


def flag_attrs(table: tuple[str, ...], doc: str = "") -> dict[str, object]:
    """CF-style attributes describing a code table."""
    attrs: dict[str, object] = {
        "flag_values": list(range(len(table))),
        "flag_meanings": " ".join(table),
    }
    if doc:
        attrs["description"] = doc
    return attrs
