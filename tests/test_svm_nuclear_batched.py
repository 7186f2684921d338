"""Nuclear Att-SVMs solved many at once (issue 28, E3): the same answers, bit for bit.

:func:`attnsvm.svm.nuclear_pd.solve_primal_dual_many` is a second implementation of the
primal-dual method that runs the instances of one shape together; every instance
must get exactly what the one-instance functions give it, so that a stored answer does not
depend on how cells are packed into blocks and batches (docs/science.md §4, "Stored values
across solver changes"). :func:`attnsvm.svm.nuclear.solve_nuclear_many` must give what
:func:`attnsvm.svm.nuclear.solve_nuclear` gives, and E3's untrained groups, which use it, what
their cells give solved one by one.
"""

from __future__ import annotations

import numpy as np
import pytest

import attnsvm.svm.nuclear as svm_nuclear
from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm import nuclear_pd, solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import Constraints, att_svm_constraints
from attnsvm.svm.nuclear import _Direct, _unique_rows, solve_nuclear_many
from attnsvm.tasks import run_cells


def _cases(shapes, seeds, random_every: int = 0, seed: int = 0) -> list[Constraints]:
    """Att-SVM rows of E3's data (opt tokens) and, every ``random_every``-th, a random
    selection (often infeasible, or feasible with other active rows)."""
    rng = np.random.default_rng(seed)
    out = []
    for n, T, d in shapes:
        for s in seeds:
            ds = make_dataset(Cell(n=n, T=T, d=d, seed=s, train=False))
            use_random = random_every and s % random_every == 0
            alpha = rng.integers(0, T, size=n) if use_random else optimal_tokens(ds)
            out.append(att_svm_constraints(ds.X, ds.Z, alpha))
    return out


def _reduced(cons: Constraints) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    prob = _Direct(cons)
    return prob.a, cons.right @ prob.U_r, cons.rhs


def _assert_same_ipm(a, b) -> None:
    """Two interior-point results equal to the last bit (or both None)."""
    assert (a is None) == (b is None)
    if a is None:
        return
    np.testing.assert_array_equal(a.M, b.M)
    np.testing.assert_array_equal(a.lam, b.lam)
    assert (a.gap == b.gap or (np.isnan(a.gap) and np.isnan(b.gap))) and a.gap is not None
    assert a.newton_steps == b.newton_steps


def _assert_same_svm(a, b) -> None:
    assert (a.status, a.solver) == (b.status, b.solver), (a.message, b.message)
    assert (a.W is None) == (b.W is None)
    if a.W is not None:
        np.testing.assert_array_equal(a.W, b.W)
    assert a.objective == b.objective or (np.isnan(a.objective) and np.isnan(b.objective))


#: the primal-dual method's E3 and E2 shapes, 20 to 150 rows
PD_SHAPES = [(5, 5, 5), (6, 8, 10), (5, 10, 10), (15, 5, 10), (5, 15, 5), (10, 10, 10),
             (15, 10, 15), (10, 15, 5)]  # fmt: skip


def test_primal_dual_many_gives_every_instance_its_own_answer():
    problems = [_reduced(c) for c in _cases(PD_SHAPES, range(6), random_every=3, seed=2)]
    alone = [nuclear_pd.solve_primal_dual(*p) for p in problems]
    assert sum(r is not None and r.gap <= 1e-8 for r in alone) >= 0.6 * len(problems)
    whole = nuclear_pd.solve_primal_dual_many(problems)
    order = np.random.default_rng(3).permutation(len(problems))
    shuffled = nuclear_pd.solve_primal_dual_many([problems[i] for i in order])
    for i, j in enumerate(order):
        _assert_same_ipm(alone[i], whole[i])
        _assert_same_ipm(alone[j], shuffled[i])


def test_primal_dual_many_stops_as_each_instance_would(monkeypatch):
    """Iterations cut short (every instance returns its last iterate's pair, as alone) and a
    batch of every size from one."""
    problems = [_reduced(c) for c in _cases([(10, 10, 10)], range(5))]
    short = [nuclear_pd.solve_primal_dual(*p, max_iter=6) for p in problems]
    assert all(r is not None and r.gap > 1e-8 for r in short)
    for a, b in zip(short, nuclear_pd.solve_primal_dual_many(problems, max_iter=6), strict=True):
        _assert_same_ipm(a, b)
    monkeypatch.setattr(nuclear_pd, "BATCH_MIN", 1)
    alone = [nuclear_pd.solve_primal_dual(*p) for p in problems]
    for size in (1, 2, 5):
        for a, b in zip(
            alone[:size], nuclear_pd.solve_primal_dual_many(problems[:size]), strict=True
        ):
            _assert_same_ipm(a, b)


def test_solve_nuclear_many_is_solve_nuclear():
    """Every route: infeasible (Frobenius verdict), primal-dual, an empty system,
    with and without the Frobenius answers as hints, in one call."""
    conss = _cases([(5, 5, 2), (5, 10, 10), (6, 8, 10), (10, 10, 10)], range(6), random_every=3)
    conss.append(conss[0].subset(np.zeros(conss[0].n_rows, dtype=bool)))  # no rows
    frob = [solve_frobenius(c) for c in conss]
    ref = [solve_nuclear(c, f) for c, f in zip(conss, frob, strict=True)]
    routes = {r.solver for r in ref}
    assert {"direct-primal-dual", "trivial"} <= routes
    assert any(r.status == "infeasible" for r in ref)
    for hints in (frob, None):
        for a, b in zip(ref, solve_nuclear_many(conss, hints), strict=True):
            _assert_same_svm(a, b)


def test_a_failed_batch_is_solved_one_by_one(monkeypatch):
    conss = _cases([(5, 5, 10), (10, 10, 10)], range(5))
    ref = [solve_nuclear(c) for c in conss]

    def broken(*args, **kwargs):
        raise RuntimeError("simulated batch failure")

    monkeypatch.setattr(svm_nuclear, "solve_primal_dual_many", broken)
    for a, b in zip(ref, solve_nuclear_many(conss), strict=True):
        _assert_same_svm(a, b)


def test_untrained_groups_solve_their_nuclear_svms_together(monkeypatch):
    """E3's path (run_cells of untrained cells: solve_nuclear_many per group) against every
    cell alone (its own run_cells, solve_nuclear): the same SVMs and scalars, bit for bit."""
    calls = []
    real = svm_nuclear.solve_nuclear_many
    monkeypatch.setattr(
        svm_nuclear, "solve_nuclear_many", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k)
    )
    cells = [Cell(n=n, T=T, d=d, seed=s, train=False) for n, T, d in [(5, 5, 10), (10, 10, 5)]
             for s in range(6)]  # fmt: skip
    together = run_cells(cells)
    assert calls == [6, 6]  # one call per group (shape), all its cells
    alone = [run_cells([c])[0] for c in cells]
    for a, b in zip(alone, together, strict=True):
        assert a.status == b.status == "ok"
        for key, svm in a.svms.items():
            _assert_same_svm(svm, b.svms[key])
        assert a.scalars == pytest.approx(b.scalars, rel=0, abs=0, nan_ok=True)


def test_unique_rows_is_numpys():
    """The distinct right vectors (``_Direct``'s Y = M R substitution): np.unique's rows and
    inverse, on repeated, shuffled, integer-valued (ties in the first columns) and signed-zero
    rows; with NaN rows (np.unique's own order among them) the rows and their inverse."""
    rng = np.random.default_rng(4)
    for trial in range(400):
        n, d = int(rng.integers(1, 9)), int(rng.integers(1, 5))
        base = rng.standard_normal((n, d)) if trial % 3 == 0 else rng.integers(-2, 3, (n, d)) * 1.0
        nan = trial % 5 == 0
        if nan:
            base[rng.integers(0, n)] = np.nan
        if trial % 7 == 0:
            base = np.where(base == 0, -0.0, base)
        right = np.repeat(base, rng.integers(1, 4, size=n), axis=0)
        if trial % 2:
            right = right[rng.permutation(len(right))]
        uniq, inv = np.unique(right, axis=0, return_inverse=True)
        got_u, got_i = _unique_rows(right)
        np.testing.assert_array_equal(got_u, uniq)
        np.testing.assert_array_equal(got_u[got_i], right)
        if not nan:
            np.testing.assert_array_equal(got_i, inv.ravel())
            assert got_i.dtype == inv.dtype
