"""Acceptance checks of the science core at the E2 setting (SCIENCE.md sections 3-6).

The setting is E2's in the default sweep (config/config.yaml, experiment e2_local), run here
with more seeds than the sweep has.
"""

import numpy as np
import pytest

from attnsvm import Cell
from attnsvm.tasks import run_cells
from tests.workflow_helpers import real_config

SEEDS = range(20)
E2 = real_config()["experiments"]["e2_local"]["fixed"]  # n, T, d, iterations


@pytest.fixture(scope="module")
def e2_results():
    cells = [Cell(**E2, param=p, seed=s) for p in ("W", "KQ") for s in SEEDS]
    res = run_cells(cells, device="cpu")
    assert all(r.status == "ok" for r in res)
    return {p: [r for r in res if r.cell.param == p] for p in ("W", "KQ")}


def test_e2_gd_matches_its_svm_and_not_the_other(e2_results):
    w = e2_results["W"]
    kq = e2_results["KQ"]
    assert np.mean([r.scalars["corr_fro_alpha"] for r in w]) >= 0.99
    assert np.mean([r.scalars["corr_nuc_alpha"] for r in kq]) >= 0.99
    # cross pairs: the W run vs the nuclear SVM, the KQ run vs the Frobenius SVM
    assert np.mean([r.scalars["corr_nuc_alpha"] for r in w]) < 0.95
    assert np.mean([r.scalars["corr_fro_alpha"] for r in kq]) < 0.95


def test_e2_softmax_saturates_and_types_are_counted(e2_results):
    for runs in e2_results.values():
        assert np.mean([r.scalars["softmax_mass"] for r in runs]) > 0.99
        types = [r.convergence for r in runs]
        assert set(types) <= {"global", "local", "not-local", "unsaturated"}
        assert types.count("global") + types.count("local") >= 0.8 * len(types)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_no_late_decay_to_20000_iterations(dtype):
    """corr(W(k), W_mm(alpha)) does not decrease between E2's 2000 and 20000 iterations."""
    long = {**E2, "iterations": 20000, "checkpoint_count": 40}
    cells = [Cell(**long, dtype=dtype, seed=s) for s in SEEDS]
    res = run_cells(cells, device="cpu")
    for r in res:
        assert r.status == "ok"
        late = r.iterations >= E2["iterations"]
        curve = r.curves["corr_fro_alpha"][late]
        assert np.all(np.diff(curve) >= -1e-9), (r.cell.seed, curve)
    assert np.mean([r.scalars["corr_fro_alpha"] for r in res]) >= 0.99
