"""The route tables of the Frobenius and nuclear SVMs (attnsvm/svm/routes.py, docs/science.md
§4) and the cell field ``svm_route`` that reorders them: a route ablation is one config line,
and every answer still takes its certificate."""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.routes as R
from attnsvm.config.cell import Cell, CellError
from attnsvm.config.fields import BY_NAME, SVM_ROUTES
from attnsvm.tasks import run_cells


def _i(rows, d=10, size=20, equality=False, positive=True, batch=1):
    return R.Instance(rows, d, equality, positive, size, batch)


def test_the_frobenius_table_in_its_order():
    fro = R.FROBENIUS
    assert R.routes(fro, _i(0)) == ("trivial",)
    assert R.routes(fro, _i(30, equality=True)) == R.PRIMAL
    assert R.routes(fro, _i(42)) == (*R.DUAL, *R.PRIMAL)  # E2's 42 rows, d = 10
    assert R.routes(fro, _i(42, batch=R.BATCH_MIN))[0] == "batched-dual"
    assert R.routes(fro, _i(42, batch=R.BATCH_MIN - 1))[0] == "nnls-dual"
    assert R.routes(fro, _i(70, d=4))[0] == "ldp-dual"  # 4 d^2 <= N: least distance first
    big = R.routes(fro, _i(R.WORKING_SET_MIN_ROWS + 1, d=64))
    assert big == ("ws-dual", *R.DUAL, *R.PRIMAL)
    huge = R.routes(fro, _i(2 * 10**5, d=64))  # no N x N Gram matrix, not even the lifted rows
    assert huge == ("ws-dual",)


def test_the_nuclear_table_in_its_order():
    nuc = R.NUCLEAR
    assert R.routes(nuc, _i(42, size=20)) == ("primal-dual", "clarabel", "scs")  # E2, E6
    assert R.routes(nuc, _i(950, size=150)) == ("primal-dual", "scs", "clarabel")
    assert R.routes(nuc, _i(1001, size=128))[0] == "ws-primal-dual"
    assert R.routes(nuc, _i(1001, size=300)) == ("scs", "clarabel")
    assert R.routes(nuc, _i(20, positive=False)) == ("clarabel", "scs")  # no interior point


def test_an_override_goes_first_only_where_it_applies():
    assert R.routes(R.FROBENIUS, _i(42), "osqp-dual")[0] == "osqp-dual"
    assert R.routes(R.FROBENIUS, _i(42), "scs") == R.routes(R.FROBENIUS, _i(42))  # not its
    equality = _i(30, equality=True)
    assert R.routes(R.FROBENIUS, equality, "nnls-dual") == R.PRIMAL  # needs inequality rows
    assert R.routes(R.NUCLEAR, _i(200, size=20), "clarabel")[0] == "clarabel"
    assert R.routes(R.NUCLEAR, _i(20, positive=False), "primal-dual")[0] == "clarabel"
    for table in (R.FROBENIUS, R.NUCLEAR):
        assert len(table) <= 8  # readable in one screen


def test_the_cell_field_lists_every_route_and_keeps_digests():
    assert set(SVM_ROUTES) == set(R.NAMES["frobenius"]) | set(R.NAMES["nuclear"])
    assert set(R.APPLIES) == set(SVM_ROUTES)
    assert BY_NAME["svm_route"].choices == ("auto", *SVM_ROUTES)
    assert Cell(svm_route="auto").digest() == Cell().digest()
    assert "svm_route" in Cell(svm_route="primal-dual").to_dict()
    with pytest.raises(CellError, match="svm_route must be one of"):
        Cell(svm_route="newton")


def test_a_route_ablation_is_one_field_and_keeps_the_certificates():
    """E2's shape: the table solves the nuclear SVM with the primal-dual method and the
    Frobenius one with the NNLS dual; ``svm_route`` runs Clarabel (directly) and Clarabel's
    dual QP instead, with the same answers within their certificates."""
    base = dict(n=6, T=8, d=10, param="KQ", iterations=200)
    auto = run_cells([Cell(**base, seed=s) for s in range(2)], device="cpu")
    for route, key, solver in (("clarabel", "nuc_opt", "direct-clarabel"),
                               ("clarabel-dual", "fro_opt", "clarabel-dual")):  # fmt: skip
        other = run_cells([Cell(**base, seed=s, svm_route=route) for s in range(2)], "cpu")
        for a, b in zip(auto, other, strict=True):
            assert a.svms[key].solver != solver and b.svms[key].solver == solver
            assert b.svms[key].status == "optimal"
            np.testing.assert_allclose(b.svms[key].objective, a.svms[key].objective, rtol=2e-7)
            np.testing.assert_array_equal(a.W, b.W)  # training does not see the field
