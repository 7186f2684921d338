"""SLURM job arrays within the cluster's ``MaxArraySize`` (workflow/profiles/README.md, "Job
arrays").

snakemake-executor-plugin-slurm (2.6-2.8.0, the newest release) submits one scheduling round
of N ready array jobs in chunks of M = ``MaxArraySize - 1`` tasks numbered on from one chunk
to the next: ``--array=1-M``, ``--array=M+1-2M``, ... But ``MaxArraySize`` bounds a task's
*index*, not the number of tasks, so slurmctld refuses every chunk after the first ("Invalid
job array specification") and the plugin reports its blocks failed. A sweep of more than M
blocks ready at once (the 10^4-block rehearsal, bench/bench_rehearsal.py, at the common
default ``MaxArraySize = 1001``) loses all but its first M blocks, again after the retry.
:func:`fit_arrays_to_cluster` hands the plugin at most M jobs per submission, so that every
array is ``--array=1-k`` with k <= M; the plugin numbers, logs and tracks the tasks of each
as it does for a single chunk.
"""

from __future__ import annotations

import functools
from typing import Any

#: marks the plugin's submission method once it is wrapped (the Snakefile may be read twice)
_WRAPPED = "_attnsvm_fits_max_array_size"


def chunks(jobs: list[Any], size: int) -> list[list[Any]]:
    """``jobs`` in consecutive runs of at most ``size`` (at least 1) jobs, in order."""
    size = max(1, int(size))
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


def fit_arrays_to_cluster() -> bool:
    """Wrap the SLURM plugin's array submission (``Executor.run_array_jobs``) so that each
    call submits at most the plugin's own ``max_array_size`` jobs (module docstring). False
    when the plugin is not installed (nothing to do)."""
    try:
        from snakemake_executor_plugin_slurm import Executor
    except ImportError:
        return False
    submit = Executor.run_array_jobs
    if getattr(submit, _WRAPPED, False):
        return True

    @functools.wraps(submit)
    def run_array_jobs(self, jobs):
        for part in chunks(list(jobs), self.max_array_size):
            submit(self, part)

    setattr(run_array_jobs, _WRAPPED, True)
    Executor.run_array_jobs = run_array_jobs
    return True
