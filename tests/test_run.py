"""run_cells end to end: batching, failure isolation, determinism, CLI."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import attnsvm
import attnsvm.svm.routes as routes
from attnsvm import Cell
from attnsvm.tasks import run_cells

SMALL = dict(n=3, T=4, d=5, iterations=200, checkpoint_count=8)


def test_results_in_input_order_and_batched_equal_alone():
    cells = [Cell(seed=s, param=p, **SMALL) for s in (0, 1, 2) for p in ("W", "KQ")]
    res = run_cells(cells, device="cpu")
    assert [r.cell for r in res] == cells
    alone = run_cells([cells[3]], device="cpu")[0]
    np.testing.assert_array_equal(alone.W, res[3].W)
    assert alone.scalars == pytest.approx(res[3].scalars, nan_ok=True)


def test_identical_constraint_sets_are_solved_once(monkeypatch):
    import attnsvm.tasks.measure as run_mod

    calls = {"fro": 0, "nuc": 0}
    real_fro, real_nuc = run_mod.solve_frobenius, run_mod.solve_nuclear

    def fro(cons):
        calls["fro"] += 1
        return real_fro(cons)

    def nuc(cons, **hints):
        calls["nuc"] += 1
        return real_nuc(cons, **hints)

    # W and KQ runs of one seed share data: their opt rows (and often alpha rows) are equal
    cells = [Cell(seed=s, param=p, **SMALL) for s in (0, 1) for p in ("W", "KQ")]
    alone = [run_cells([c], device="cpu")[0] for c in cells]
    monkeypatch.setattr(run_mod, "solve_frobenius", fro)
    monkeypatch.setattr(run_mod, "solve_nuclear", nuc)
    res = run_cells(cells, device="cpu")
    distinct = {(r.cell.seed, tuple(sel)) for r in res for sel in (r.alpha, r.opt)}
    assert calls["fro"] == calls["nuc"] == len(distinct) < 2 * len(cells)
    assert res[0].svms["fro_opt"] is res[1].svms["fro_opt"]
    for r, a in zip(res, alone, strict=True):
        for key, svm in a.svms.items():
            np.testing.assert_array_equal(r.svms[key].W, svm.W)
        assert r.scalars == pytest.approx(a.scalars, nan_ok=True)


def test_block_solves_frobenius_svms_batched_with_the_per_cell_answers(monkeypatch):
    import attnsvm.svm.frobenius_batched as SB

    cells = [Cell(seed=s, param=p, **SMALL) for s in range(12) for p in ("W", "KQ")]
    monkeypatch.setattr(routes, "BATCH_MIN", 10**9)  # per instance, as before batching
    one_by_one = run_cells(cells, device="cpu")
    monkeypatch.setattr(routes, "BATCH_MIN", 1)  # every new instance batched, even alone
    batched = run_cells(cells, device="cpu")
    solvers = {r.svms[k].solver for r in batched for k in ("fro_alpha", "fro_opt")}
    assert solvers == {SB.SOLVER}
    assert SB.SOLVER not in {r.svms["fro_alpha"].solver for r in one_by_one}
    for b, o in zip(batched, one_by_one, strict=True):
        assert b.status == o.status == "ok"
        for key, svm in o.svms.items():
            assert b.svms[key].status == svm.status
            np.testing.assert_allclose(b.svms[key].W, svm.W, rtol=1e-8, atol=1e-10)
        assert b.scalars == pytest.approx(o.scalars, rel=1e-7, abs=1e-9, nan_ok=True)
        assert b.timings["solve"] > 0


def test_failed_batched_solve_falls_back_to_per_cell_solves(monkeypatch, caplog):
    import attnsvm.svm.frobenius_batched as SB

    cells = [Cell(seed=s, **SMALL) for s in range(3)]
    reference = run_cells(cells, device="cpu")

    def broken(*args, **kwargs):
        raise RuntimeError("simulated batched-solver crash")

    monkeypatch.setattr(SB, "solve_many", broken)
    res = run_cells(cells, device="cpu")
    assert "batched SVM solve failed" in caplog.text  # a logged warning (the block's log)
    for r, ref in zip(res, reference, strict=True):
        assert r.status == "ok"
        for key, svm in ref.svms.items():
            np.testing.assert_array_equal(r.svms[key].W, svm.W)


def test_untrained_cells_solve_opt_svms_only():
    (r,) = run_cells([Cell(train=False, n=5, T=5, d=10, seed=1)])
    assert r.status == "ok" and len(r.iterations) == 0
    assert r.svms["fro_opt"].status == "optimal"
    assert r.scalars["rank_fro_opt"] == 5  # min(n, d)
    assert r.scalars["rank_nuc_opt"] <= r.scalars["rank_fro_opt"]
    assert r.convergence == ""


def test_solver_failure_is_recorded_and_others_go_on(monkeypatch):
    import attnsvm.tasks.measure as run_mod

    real = run_mod.solve_nuclear
    calls = {"n": 0}

    def flaky(cons, **hints):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated solver crash")
        return real(cons, **hints)

    monkeypatch.setattr(run_mod, "solve_nuclear", flaky)
    res = run_cells([Cell(seed=s, **SMALL) for s in range(3)])
    assert res[0].status == "failed" and "simulated solver crash" in res[0].message
    assert [r.status for r in res[1:]] == ["ok", "ok"]


def test_nonfinite_training_is_flagged_not_dropped():
    cells = [Cell(seed=s, optimizer="plain", lr=1e300, param="KQ", **SMALL) for s in range(2)]
    res = run_cells(cells)
    assert all(r.status == "nonfinite" for r in res)
    assert all("non-finite at iteration" in r.message for r in res)
    assert all(r.svms["fro_opt"].feasible for r in res)  # data-only SVMs are still solved


def test_relu_head_gen_svm():
    (r,) = run_cells(
        [
            Cell(
                generator="relu",
                head="relu",
                n=3,
                T=4,
                d=6,
                seed=0,
                iterations=500,
                checkpoint_spacing="linear",
                checkpoint_count=5,
            )
        ]
    )
    assert r.status == "ok" and r.gen is not None
    for key in ("corr_svmeq", "corr_mm_gen", "corr_single", "max_masked_prob", "n_relevant"):
        assert key in r.scalars
    assert r.gen.relevant.shape == (3, 4)


def test_cli_run_cell_text_and_json():
    base = [
        sys.executable,
        "-m",
        "attnsvm.cli",
        "run-cell",
        "--d",
        "5",
        "--T",
        "4",
        "--n",
        "3",
        "--iterations",
        "100",
        "--seed",
        "2",
    ]
    out = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Att-SVM   (Frobenius, GD's alpha)" in out.stdout and "convergence" in out.stdout
    js = subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=300)
    data = json.loads(js.stdout)
    assert data["cell"]["seed"] == 2 and data["svms"]["fro_alpha"]["status"] == "optimal"
    bad = subprocess.run(base[:4] + ["--T", "1"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "T must be an integer >= 2, got 1" in bad.stderr


def test_cli_run_cell_cuda_without_gpu_is_one_error_line():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU, whatever the machine has
    cmd = [sys.executable, "-m", "attnsvm.cli", "run-cell", "--device", "cuda", "--iterations"]
    out = subprocess.run([*cmd, "5000"], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("attnsvm: error: device 'cuda' requested but CUDA is not available")


def test_top_level_run_cells():
    (r,) = attnsvm.run_cells([Cell(seed=0, **SMALL)])
    assert r.status == "ok"


def test_an_uncertified_svm_answer_is_not_solved(monkeypatch):
    """optimal_inaccurate: no rank, objective or correlation, feasible_* NaN (issue 12); the
    summary counts it neither as feasible nor as infeasible."""
    import dataclasses

    import attnsvm.tasks.measure as run_mod
    from attnsvm.sweep.summary import summarize

    real = run_mod.solve_frobenius

    def inaccurate(cons):
        return dataclasses.replace(real(cons), status="optimal_inaccurate")

    monkeypatch.setattr(run_mod, "solve_frobenius", inaccurate)
    cell = Cell(seed=0, param="W", **SMALL)
    r = run_cells([cell], device="cpu")[0]
    sc = r.scalars
    assert r.status == "ok"
    assert sc["rank_fro_alpha"] == -1 and np.isnan(sc["objective_fro_alpha"])
    assert np.isnan(sc["feasible_fro_alpha"]) and np.isnan(sc["corr_fro_alpha"])
    assert np.isnan(sc["svm_margin"]) and sc["locally_optimal"] == 0
    assert np.all(np.isnan(r.curves["corr_fro_alpha"]))
    assert sc["feasible_nuc_alpha"] == 1  # the nuclear SVM is certified as usual
    # a proven infeasible SVM is 0, a not-solved one NaN: the feasible share excludes it
    import xarray as xr

    sweep = xr.Dataset(
        {
            "status": (("seed",), np.zeros(3, np.int8)),
            "feasible_fro_opt": (("seed",), np.array([1.0, 0.0, np.nan])),
        },
        coords={"seed": [0, 1, 2]},
    )
    sweep.attrs["axes"] = []
    s = summarize(sweep)
    assert int(s["feasible_fro_opt_count"]) == 2 and float(s["feasible_fro_opt_mean"]) == 0.5


def test_cell_result_repr_is_short_and_cell_dataset_describes_itself():
    from attnsvm.variables import UNDESCRIBED

    res = run_cells([Cell(seed=1, param="KQ", **SMALL)], device="cpu")[0]
    text = repr(res)
    assert "\n" not in text and len(text) < 200
    assert "seed=1" in text and "status='ok'" in text and "KQ" in text
    from attnsvm.sweep.store import cell_dataset

    ds = cell_dataset(res)
    assert "cell" not in ds.dims and int(ds["seed"]) == 1
    np.testing.assert_array_equal(ds["W"].values, res.W)
    assert float(ds["corr_fro_alpha"]) == res.scalars["corr_fro_alpha"]
    for dim in ds.dims:
        assert dim in ds.coords, dim
    for name, var in ds.variables.items():
        assert var.attrs["description"] != UNDESCRIBED, name
