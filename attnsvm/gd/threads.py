"""The cores a computation is given, applied to every thread pool at once: BLAS, OpenMP and
torch's (issue 44).

Left alone, OpenBLAS, the OpenMP runtime and torch each start a thread per core of the
machine, whatever the job was given; on a shared node, or beside another job, those threads
fight for the cores (a solve 5x slower measured: BENCHMARKS.md). :func:`limited` sets every
pool loaded in the process to the job's cores with threadpoolctl (no environment variable to
set before an import), and torch's own count with it. Block jobs use the cores Snakemake gives
them (``threads``: SLURM's ``cpus_per_task``, or a share of ``--cores``), ``attnsvm run-cell``
its ``--threads`` and :func:`attnsvm.run_cells` its ``threads``, by default
:func:`given_cores`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def given_cores() -> int:
    """The cores this process was given: SLURM's ``SLURM_CPUS_PER_TASK`` in a SLURM job, else
    the CPUs it may run on (its affinity, which SLURM and container limits set), at least 1."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def limited(threads: int | None = None) -> Iterator[int]:
    """Every thread pool of this process (BLAS, OpenMP, torch's) limited to ``threads``
    (default :func:`given_cores`) inside the block; yields the count.

    threadpoolctl limits the pools of the libraries loaded when the block starts: call it once
    the computation's modules are imported (the solvers' BLAS loads with them)."""
    from threadpoolctl import threadpool_limits  # inspects loaded libraries: when used

    n = given_cores() if threads is None else max(1, int(threads))
    torch = sys.modules.get("torch")  # only where the computation loaded it
    before = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=n):
        if torch is not None:
            torch.set_num_threads(n)
        try:
            yield n
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
