"""SLURM arrays that slurmctld accepts and that run the right blocks
(attnsvm.sweep.slurm_arrays): the plugin's submission gets at most ``max_array_size`` jobs per
call, and no more than keep its ``--wrap`` argument within Linux's limit; tests/test_slurm.py
runs it on a real slurmctld whose MaxArraySize is smaller than the sweep."""

from __future__ import annotations

import base64
import json
import zlib

import snakemake_executor_plugin_slurm as plugin  # a test dependency (pyproject.toml)

from attnsvm.sweep.slurm_arrays import (
    WRAP_BUDGET,
    array_size,
    chunks,
    encoded_chars,
    fit_arrays_to_cluster,
)

#: a block job's command as the plugin formats it: about 1.5 kB (measured at 10^4 blocks)
COMMAND = "python -m snakemake --target-jobs 'block:experiment=big,block=seeds=0' " + " ".join(
    f"--opt{i}=value{i * 7919 % 1000}" for i in range(60)
)


def test_chunks_cover_every_job_once_in_order():
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], 3) == [] and chunks([1, 2], 0) == [[1], [2]]


def test_the_estimate_matches_the_plugins_payload():
    """encoded_chars is the size of the plugin's payload per task (zlib, hex, JSON, base64)."""
    execs = {str(i): zlib.compress(COMMAND.encode(), level=9).hex() for i in range(2, 42)}
    payload = base64.b64encode(json.dumps(execs).encode()).decode()
    assert 0.95 < 40 * encoded_chars(COMMAND) / len(payload) < 1.1


def test_arrays_stay_within_max_array_size_and_the_argument_limit():
    size = array_size(999, COMMAND)
    assert 1 < size < 999 and size * encoded_chars(COMMAND) < WRAP_BUDGET < 131072
    assert array_size(4, COMMAND) == 4  # a small MaxArraySize decides
    assert array_size(999, "x" * 200_000) == 1  # a huge command: one task per array


def test_the_plugin_submits_fitted_arrays(monkeypatch):
    calls = []
    monkeypatch.setattr(plugin.Executor, "run_array_jobs", lambda self, jobs: calls.append(jobs))
    assert fit_arrays_to_cluster() and fit_arrays_to_cluster()  # wrapped once, however often

    class Fake:
        max_array_size = 999

        def format_job_exec(self, job):
            return COMMAND

    plugin.Executor.run_array_jobs(Fake(), list(range(2500)))
    size = array_size(999, COMMAND)
    assert [len(c) for c in calls[:-1]] == [size] * (len(calls) - 1)
    assert sum(calls, []) == list(range(2500))
