"""Constraint builders (docs/science.md §4) against brute-force loops."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.svm.constraints import (
    Constraints,
    att_svm_constraints,
    concatenate,
    gen_svm_constraints,
    sequence_constraints,
)


def _brute_att(X, Z, alpha, W):
    out = []
    n, T, _ = X.shape
    for i in range(n):
        for t in range(T):
            if t != alpha[i]:
                out.append((i, t, (X[i, alpha[i]] - X[i, t]) @ W @ Z[i]))
    return out


def _check_matrix(cons: Constraints, W: np.ndarray) -> None:
    np.testing.assert_allclose(cons.matrix() @ W.ravel(), cons.values(W), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention", ["cross", "self"])
def test_att_svm_constraints_match_brute_force(attention):
    ds = make_dataset(Cell(n=4, T=5, d=3, seed=1, attention=attention))
    if attention == "self":
        np.testing.assert_array_equal(ds.Z, ds.X[:, 0])
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 3))
    alpha = optimal_tokens(ds)
    cons = att_svm_constraints(ds.X, ds.Z, alpha)
    brute = _brute_att(ds.X, ds.Z, alpha, W)
    assert cons.n_rows == 4 * 4
    np.testing.assert_array_equal(cons.example, [b[0] for b in brute])
    np.testing.assert_array_equal(cons.token, [b[1] for b in brute])
    np.testing.assert_allclose(cons.values(W), [b[2] for b in brute], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(cons.rhs, 1.0)
    assert not cons.equality.any()
    np.testing.assert_array_equal(cons.selected, alpha[cons.example])
    _check_matrix(cons, W)


def test_matrix_is_row_major_vec():
    cons = att_svm_constraints(
        np.array([[[1.0, 0.0], [0.0, 0.0]]]), np.array([[0.0, 1.0]]), np.array([0])
    )
    # row vec(e_0 e_1^T) in row-major order has its 1 at index 0 * d + 1
    np.testing.assert_array_equal(cons.matrix(), [[0.0, 1.0, 0.0, 0.0]])


@pytest.mark.parametrize("causal", [False, True])
def test_sequence_constraints_match_brute_force(causal):
    ds = make_dataset(Cell(n=3, T=4, d=3, seed=2))
    X = ds.X
    n, T, _ = X.shape
    rng = np.random.default_rng(3)
    alpha = np.stack([[rng.integers(0, (k + 1) if causal else T) for k in range(T)] for _ in X])
    W = rng.standard_normal((3, 3))
    cons = sequence_constraints(X, alpha, causal=causal)
    brute = []
    for i in range(n):
        for k in range(T):
            A = range(k + 1) if causal else range(T)
            if len(A) == 1:
                continue
            for t in A:
                if t != alpha[i, k]:
                    brute.append((i, k, t, (X[i, alpha[i, k]] - X[i, t]) @ W @ X[i, k]))
    assert cons.n_rows == len(brute)
    np.testing.assert_array_equal(cons.example, [b[0] for b in brute])
    np.testing.assert_array_equal(cons.query, [b[1] for b in brute])
    np.testing.assert_array_equal(cons.token, [b[2] for b in brute])
    np.testing.assert_allclose(cons.values(W), [b[3] for b in brute], rtol=1e-12, atol=1e-14)
    _check_matrix(cons, W)
    if causal:
        assert not np.any(cons.query == 0)  # A(0) = {0}: no rows


def test_sequence_causal_rejects_future_selection():
    X = make_dataset(Cell(n=1, T=3, d=2, seed=0)).X
    with pytest.raises(ValueError):
        sequence_constraints(X, np.array([[0, 2, 0]]), causal=True)


def test_gen_svm_constraints_match_brute_force():
    ds = make_dataset(Cell(n=3, T=5, d=4, seed=4))
    rel = np.zeros((3, 5), dtype=bool)
    rel[0, [1, 3]] = True
    rel[1, [0]] = True
    rel[2, [0, 2, 4]] = True
    rng = np.random.default_rng(5)
    W = rng.standard_normal((4, 4))
    eq, ineq = gen_svm_constraints(ds.X, ds.Z, rel)
    X, Z = ds.X, ds.Z
    # equalities: spanning set (t0_i, tau) for tau in O_i \ {t0_i}
    exp_eq = [(0, 1, 3), (2, 0, 2), (2, 0, 4)]
    assert [
        (int(i), int(a), int(t)) for i, a, t in zip(eq.example, eq.selected, eq.token, strict=True)
    ] == (exp_eq)
    assert eq.equality.all() and np.all(eq.rhs == 0)
    np.testing.assert_allclose(
        eq.values(W), [(X[i, a] - X[i, t]) @ W @ Z[i] for i, a, t in exp_eq], rtol=1e-12
    )
    exp_in = [
        (i, t, tau) for i in range(3) for t in range(5) for tau in range(5)
        if rel[i, t] and not rel[i, tau]
    ]  # fmt: skip
    got = [
        (int(i), int(a), int(t))
        for i, a, t in zip(ineq.example, ineq.selected, ineq.token, strict=True)
    ]
    assert got == exp_in
    np.testing.assert_allclose(
        ineq.values(W), [(X[i, a] - X[i, t]) @ W @ Z[i] for i, a, t in exp_in], rtol=1e-12
    )
    assert not ineq.equality.any() and np.all(ineq.rhs == 1)
    both = concatenate(eq, ineq)
    assert both.n_rows == eq.n_rows + ineq.n_rows
    _check_matrix(both, W)


def test_bad_shapes_rejected():
    ds = make_dataset(Cell(n=3, T=4, d=2, seed=0))
    with pytest.raises(ValueError):
        att_svm_constraints(ds.X, ds.Z, np.array([0, 1]))
    with pytest.raises(ValueError):
        att_svm_constraints(ds.X, ds.Z, np.array([0, 1, 4]))
