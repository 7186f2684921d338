"""SLURM job arrays that slurmctld accepts and that run the right blocks (workflow/profiles/
README.md, "Job arrays").

snakemake-executor-plugin-slurm (2.6-2.8.0, the newest release) has two faults with large
arrays, both met by the 10^4-block rehearsal (bench/bench_rehearsal.py):

1. It submits one scheduling round of N ready array jobs in chunks of M = ``MaxArraySize -
   1`` tasks numbered on from chunk to chunk: ``--array=1-M``, ``--array=M+1-2M``, ... But
   ``MaxArraySize`` bounds a task's *index*, not the number of tasks, so slurmctld refuses
   every chunk after the first ("Invalid job array specification") and the plugin reports
   its blocks failed, again after the retry.
2. Every task's command travels in the ``sbatch --wrap`` argument (zlib-compressed, hex,
   then base64: about 2.5 kB a block). Past Linux's limit on one argument (``MAX_ARG_STRLEN``,
   128 KiB: some 50 blocks) the plugin falls back to an ``sbatch`` script that puts the
   command's last two arguments on lines of their own, so that every task of the array runs
   the array's *first* block and then fails ("--slurm-jobstep-array-execs: not found").

:func:`fit_arrays_to_cluster` hands the plugin's array submission at most M jobs at a time,
and at most as many as keep the ``--wrap`` argument within :data:`WRAP_BUDGET`: every array
is then ``--array=1-k`` and submitted the way that works. The plugin numbers, logs and tracks
the tasks of each as it does for one chunk.
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

#: marks the plugin's submission method once it is wrapped (the Snakefile may be read twice)
_WRAPPED = "_attnsvm_fits_arrays"
#: characters of the ``sbatch`` command line (one argument to ``sh -c``) kept for the tasks'
#: encoded commands: well under Linux's MAX_ARG_STRLEN (131072), which also has to hold the
#: sbatch options and the first task's command
WRAP_BUDGET = 96_000
#: the estimate of one task's encoded command is the first task's, times this (the commands
#: of one rule differ only in their wildcards)
MARGIN = 1.25


def chunks(jobs: list[Any], size: int) -> list[list[Any]]:
    """``jobs`` in consecutive runs of at most ``size`` (at least 1) jobs, in order."""
    size = max(1, int(size))
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


def encoded_chars(command: str) -> int:
    """Characters one task's command takes in the plugin's payload: zlib level 9, hex, a JSON
    entry, base64 (snakemake_executor_plugin_slurm's ``run_array_jobs``)."""
    entry = 2 * len(zlib.compress(command.encode("utf-8"), level=9)) + 16
    return 4 * (entry + 2) // 3


def array_size(max_array_size: int, first_command: str) -> int:
    """How many tasks one array may hold: within ``MaxArraySize - 1`` (the plugin's
    ``max_array_size``) and within :data:`WRAP_BUDGET` characters of encoded commands."""
    per_task = MARGIN * encoded_chars(first_command)
    room = WRAP_BUDGET - 2 * len(first_command)
    return max(1, min(int(max_array_size), int(room // per_task)))


def fit_arrays_to_cluster() -> bool:
    """Wrap the SLURM plugin's array submission (``Executor.run_array_jobs``) so that each
    call submits at most :func:`array_size` jobs (module docstring). False when the plugin is
    not installed (nothing to do)."""
    try:
        from snakemake_executor_plugin_slurm import Executor  # the [slurm] extra: optional
    except ImportError:
        return False
    submit = Executor.run_array_jobs
    if getattr(submit, _WRAPPED, False):
        return True

    @functools.wraps(submit)
    def run_array_jobs(self, jobs):
        jobs = list(jobs)
        if not jobs:
            return
        size = array_size(self.max_array_size, self.format_job_exec(jobs[0]))
        for part in chunks(jobs, size):
            submit(self, part)

    setattr(run_array_jobs, _WRAPPED, True)
    Executor.run_array_jobs = run_array_jobs
    return True
