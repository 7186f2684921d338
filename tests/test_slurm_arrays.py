"""SLURM arrays within MaxArraySize (attnsvm.sweep.slurm_arrays): the plugin's submission gets
at most ``max_array_size`` jobs per call, in order; tests/test_slurm.py runs it on a real
slurmctld whose MaxArraySize is smaller than the sweep."""

from __future__ import annotations

from attnsvm.sweep.slurm_arrays import chunks, fit_arrays_to_cluster


def test_chunks_cover_every_job_once_in_order():
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], 3) == [] and chunks([1, 2], 0) == [[1], [2]]


def test_the_plugin_submits_at_most_max_array_size_jobs_per_array(monkeypatch):
    import snakemake_executor_plugin_slurm as plugin  # a test dependency (pyproject.toml)

    calls = []
    monkeypatch.setattr(plugin.Executor, "run_array_jobs", lambda self, jobs: calls.append(jobs))
    assert fit_arrays_to_cluster() and fit_arrays_to_cluster()  # wrapped once, however often

    class Fake:
        max_array_size = 999

    plugin.Executor.run_array_jobs(Fake(), list(range(2500)))
    assert [len(c) for c in calls] == [999, 999, 502]
    assert sum(calls, []) == list(range(2500))
