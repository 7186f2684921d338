import numpy as np

from attnsvm.config.cell import Cell
from attnsvm.gd.data import make_dataset, make_init, optimal_tokens, token_scores


def test_gaussian_shapes_and_norms():
    ds = make_dataset(Cell(n=5, T=4, d=7, seed=3))
    assert ds.X.shape == (5, 4, 7) and ds.Z.shape == (5, 7) and ds.v.shape == (7,)
    np.testing.assert_allclose(np.linalg.norm(ds.X, axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(ds.Z, axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(ds.v), 1.0)
    assert set(np.unique(ds.Y)) <= {-1.0, 1.0}
    assert ds.X.dtype == np.float64 and ds.V is None


def test_seed_fixes_data_and_init_bit_for_bit():
    a, b = Cell(seed=11), Cell(seed=11)
    da, db = make_dataset(a).__dict__, make_dataset(b).__dict__
    for x, y in zip(da.values(), db.values(), strict=True):
        if x is not None:
            assert np.array_equal(x, y)
    assert np.array_equal(make_init(a)["W"], make_init(b)["W"])
    assert not np.array_equal(make_init(a)["W"], make_init(Cell(seed=12))["W"])


def test_init_does_not_depend_on_data_shape_fields_other_than_d():
    # the init stream is its own: changing n or T keeps W(0) for the same seed and d
    assert np.array_equal(make_init(Cell(n=3, seed=5))["W"], make_init(Cell(n=9, seed=5))["W"])


def test_uniform_and_zero_init():
    w = make_init(Cell(d=9))["W"]
    assert np.abs(w).max() <= 1 / 3
    kq = make_init(Cell(param="KQ", m=4, d=9))
    assert kq["K"].shape == (9, 4) and kq["Q"].shape == (9, 4)
    z = make_init(Cell(param="KQ", init="zero"))
    assert np.all(z["Q"] == 0) and np.any(z["K"] != 0)
    assert np.all(make_init(Cell(init="zero"))["W"] == 0)


def test_relu_orthonormal_toy_self():
    r = make_dataset(Cell(generator="relu", head="relu", d=5))
    assert r.V.shape == (5, 5) and np.isclose(np.linalg.norm(r.V), 1.0)
    assert np.all(r.v == 1.0)
    o = make_dataset(Cell(generator="orthonormal", head="lambda", d=8, T=4, n=3))
    for i in range(3):
        np.testing.assert_allclose(o.X[i] @ o.X[i].T, np.eye(4), atol=1e-12)
    assert np.all(o.Y == 1)
    t = make_dataset(Cell(generator="toy2d", n=2, T=3, d=2))
    assert t.X.shape == (2, 3, 2)
    s = make_dataset(Cell(attention="self", seed=4))
    assert np.array_equal(s.Z, s.X[:, 0])


def test_token_scores_and_opt():
    ds = make_dataset(Cell(seed=2))
    g = token_scores(ds)
    i, t = 1, 3
    assert np.isclose(g[i, t], ds.Y[i] * ds.v @ ds.X[i, t])
    assert np.array_equal(optimal_tokens(ds), g.argmax(1))


def test_toy2d_separates_frobenius_and_nuclear_rays():
    from attnsvm.svm import solve_frobenius, solve_nuclear
    from attnsvm.svm.constraints import att_svm_constraints
    from attnsvm.tasks.metrics import corr

    ds = make_dataset(Cell(generator="toy2d", n=2, T=3, d=2))
    cons = att_svm_constraints(ds.X, ds.Z, optimal_tokens(ds))
    fro, nuc = solve_frobenius(cons), solve_nuclear(cons)
    assert fro.feasible and nuc.feasible
    assert corr(fro.W, nuc.W) < 0.95  # the two implicit biases are visibly different here
