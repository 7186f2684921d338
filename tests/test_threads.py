"""The cores a computation is given (attnsvm.gd.threads, issue 44): torch's and the OpenMP
pools at the cores given, the BLAS pools at one thread, so that numpy's and scipy's OpenBLAS
pools do not spin against each other in the SVM solvers (bench/tables/blas_pools.md) and an
answer does not depend on the cores a job was given."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg  # noqa: F401 - scipy's BLAS pool, loaded as the solvers load it
import torch
from threadpoolctl import threadpool_info

from attnsvm.config.cell import Cell
from attnsvm.gd.threads import BLAS_THREADS, limited
from attnsvm.tasks import run_cells


def _threads(api: str) -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == api]


def test_limited_gives_blas_one_thread_and_torch_the_cores():
    """Inside :func:`limited` every BLAS pool has one thread, torch and every OpenMP pool
    the cores given; outside, what they had before."""
    torch_before, blas_before = torch.get_num_threads(), _threads("blas")
    assert blas_before, "numpy's BLAS pool is loaded"
    with limited(3) as n:
        assert n == 3
        assert _threads("blas") == [BLAS_THREADS] * len(blas_before) == [1] * len(blas_before)
        assert all(t == 3 for t in _threads("openmp"))
        assert torch.get_num_threads() == 3
    assert torch.get_num_threads() == torch_before
    assert _threads("blas") == blas_before


@pytest.mark.parametrize("train", [False, True])
def test_answers_do_not_depend_on_the_cores_given(train):
    """The same cells with 1 and 2 cores: the same SVM answers and scalars, bit for bit
    (every BLAS call splits its sums the same way). At (15, 15, 20) the nuclear SVM's
    210-row Schur complements are large enough for OpenBLAS to split a call between two
    threads, which changed the answers' last bits before :data:`BLAS_THREADS`."""
    shapes = [(15, 15, 20), (5, 5, 10)] if not train else [(6, 8, 10)]
    cells = [Cell(n=n, T=T, d=d, seed=s, train=train, iterations=200, param=p)
             for n, T, d in shapes for s in range(4) for p in ("W", "KQ")]  # fmt: skip
    one = run_cells(cells, device="cpu", threads=1)
    two = run_cells(cells, device="cpu", threads=2)
    for a, b in zip(one, two, strict=True):
        assert a.status == b.status == "ok"
        assert a.svms.keys() == b.svms.keys()
        for key, svm in a.svms.items():
            other = b.svms[key]
            assert svm.status == other.status
            if svm.W is not None:
                np.testing.assert_array_equal(svm.W, other.W)
        assert a.scalars == pytest.approx(b.scalars, rel=0, abs=0, nan_ok=True)
