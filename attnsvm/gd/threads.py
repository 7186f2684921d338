"""The cores a computation is given, applied to every thread pool at once: BLAS, OpenMP and
torch's (issue 44).

Left alone, OpenBLAS, the OpenMP runtime and torch each start a thread per core of the
machine, whatever the job was given; on a shared node, or beside another job, those threads
fight for the cores (``python bench/bench_threads.py`` measures a job beside another).
:func:`limited` sets the pools loaded in the process with threadpoolctl (no environment
variable to set before an import): torch's and the OpenMP runtime's to the job's cores, the
BLAS pools to one thread.

One BLAS thread, because numpy and scipy each load their own OpenBLAS: the SVM solvers call
one and then the other (numpy's products, scipy's LAPACK factorizations) thousands of times
on matrices of tens to hundreds of rows, and with more than one thread each, one library's
idle threads spin on the cores the other's need; a second BLAS thread helps little even at
the solvers' largest matrices (both measured: bench/tables/blas_pools.md,
``python bench/bench_threads.py --pools``). Answers then do not depend on the cores given
either: every BLAS call splits its sums the same way (tests/test_threads.py).

Block jobs use the cores Snakemake gives them (``threads``: SLURM's ``cpus_per_task``, or a
share of ``--cores``), ``attnsvm run-cell`` its ``--threads`` and
:func:`attnsvm.run_cells` its ``threads``, by default :func:`given_cores`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

#: threads of every BLAS pool inside :func:`limited` (module docstring: numpy's and scipy's
#: OpenBLAS pools with more than one thread each slow the SVM solvers down)
BLAS_THREADS = 1


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
    """torch's and the OpenMP pools of this process limited to ``threads`` (default
    :func:`given_cores`) and its BLAS pools to one thread (module docstring) inside the
    block; yields the count.

    threadpoolctl limits the pools of the libraries loaded when the block starts: call it once
    the computation's modules are imported (the solvers' BLAS loads with them)."""
    from threadpoolctl import threadpool_limits  # inspects loaded libraries: when used

    n = given_cores() if threads is None else max(1, int(threads))
    torch = sys.modules.get("torch")  # only where the computation loaded it
    before = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=n), threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        if torch is not None:
            torch.set_num_threads(n)
        try:
            yield n
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
