"""Real tokens (docs/science.md §9): the digits and photos generators."""

import numpy as np
import pytest
from scipy.optimize import minimize

from attnsvm.config.cell import Cell, CellError
from attnsvm.config.errors import ConfigError
from attnsvm.gd import real_tokens as RT
from attnsvm.gd.data import make_dataset, optimal_tokens
from attnsvm.plan import parse_config
from attnsvm.svm import solve_frobenius
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.tasks import run_cells


@pytest.mark.parametrize("generator", RT.REAL_GENERATORS)
@pytest.mark.parametrize("patch", RT.PATCHES)
@pytest.mark.parametrize("positional", [False, True])
def test_shapes_and_unit_norms(generator, patch, positional):
    cell = Cell(generator=generator, n=7, patch=patch, positional=positional, seed=2)
    T = (8 // patch) ** 2
    d = RT.channels(generator) * patch**2 + (T if positional else 0)
    assert (cell.T, cell.d) == (T, d)
    ds = make_dataset(cell)
    assert ds.X.shape == (7, T, d) and ds.Z.shape == (7, d) and ds.v.shape == (d,)
    np.testing.assert_allclose(np.linalg.norm(ds.X, axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(ds.Z, axis=-1), 1.0)
    np.testing.assert_allclose(np.linalg.norm(ds.v), 1.0)
    assert sorted(ds.Y.tolist()) == [-1.0] * 3 + [1.0] * 4  # ceil(n/2) of label +1
    means = ds.X.mean(axis=1)
    np.testing.assert_allclose(ds.Z, means / np.linalg.norm(means, axis=1, keepdims=True))


def test_seed_fixes_the_dataset_and_picks_the_images():
    a = make_dataset(Cell(generator="digits", n=10, seed=5))
    b = make_dataset(Cell(generator="digits", n=10, seed=5))
    for x, y in ((a.X, b.X), (a.Y, b.Y), (a.Z, b.Z), (a.v, b.v)):
        assert np.array_equal(x, y)
    c = make_dataset(Cell(generator="digits", n=10, seed=6))
    assert not np.array_equal(a.X, c.X)


def test_patches_are_row_major_blocks_of_the_image():
    images = np.arange(2 * 8 * 8 * 3, dtype=float).reshape(2, 8, 8, 3)
    cut = RT.patches(images, 4)
    assert cut.shape == (2, 4, 48)
    np.testing.assert_array_equal(cut[1, 1], images[1, 0:4, 4:8].ravel())
    np.testing.assert_array_equal(cut[0, 2], images[0, 4:8, 0:4].ravel())


def test_positional_encoding_is_a_scaled_one_hot_and_separates_equal_patches():
    ds = make_dataset(Cell(generator="digits", n=12, patch=2, positional=True, seed=1))
    T = ds.T
    for x in ds.X:
        np.testing.assert_allclose(x[:, -T:], np.eye(T) / np.sqrt(2))
        assert len(np.unique(x.round(12), axis=0)) == T
    plain = make_dataset(Cell(generator="digits", n=12, patch=2, seed=1))
    np.testing.assert_allclose(ds.X[..., :-T] * np.sqrt(2), plain.X)


def test_identical_tokens_make_the_svm_of_opt_infeasible():
    # without positions, equal patches (blank corners) are equal tokens; when the optimal
    # token has a copy, no W separates them: the SVM of opt is infeasible (docs/science.md §4)
    for seed in range(40):
        ds = make_dataset(Cell(generator="digits", n=8, patch=2, seed=seed))
        opt = optimal_tokens(ds)
        copies = [np.sum(np.all(x == x[a], axis=1)) for x, a in zip(ds.X, opt, strict=True)]
        if max(copies) > 1:
            res = solve_frobenius(att_svm_constraints(ds.X, ds.Z, opt))
            assert res.status == "infeasible"
            return
    pytest.fail("no digits dataset with a repeated optimal token in 40 seeds")


def _logistic_direction(means: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The same penalized logistic regression, minimized by scipy (a second solver)."""

    def loss(w):
        margins = Y * (means @ w)
        grad = w - RT.HEAD_C * means.T @ (Y / (1 + np.exp(margins)))
        return 0.5 * w @ w + RT.HEAD_C * np.logaddexp(0, -margins).sum(), grad

    w = minimize(loss, np.zeros(means.shape[1]), jac=True, method="L-BFGS-B",
                 options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 100_000}).x  # fmt: skip
    return w / np.linalg.norm(w)


@pytest.mark.parametrize("generator", RT.REAL_GENERATORS)
def test_head_is_the_logistic_regression_of_the_mean_tokens(generator):
    ds = make_dataset(Cell(generator=generator, n=10, patch=4, seed=3))
    means = ds.X.mean(axis=1)
    assert ds.v @ _logistic_direction(means, ds.Y) > 0.999
    # a fitted classifier is better than chance on its own training set
    assert np.mean(np.sign(means @ ds.v) == ds.Y) > 0.5


def test_config_errors_name_the_problem():
    def parse(fixed, grid=None):
        parse_config({"experiments": {"x": {"fixed": fixed, "grid": grid or {}}}})

    with pytest.raises(ConfigError, match="'d' is set, but generator 'digits' derives d"):
        parse({"generator": "digits", "d": 4})
    with pytest.raises(ConfigError, match="'T' is set, but generator 'photos'"):
        parse({"n": 4}, {"generator": ["gaussian", "photos"], "T": [4]})
    with pytest.raises(ConfigError, match="patch must be 2 or 4"):
        parse({"generator": "digits", "patch": 3})
    with pytest.raises(ConfigError, match="n must be at most"):
        parse({"generator": "digits", "n": 1000})
    with pytest.raises(ConfigError, match="digit_pos and digit_neg must differ"):
        parse({"generator": "digits", "digit_pos": 1, "digit_neg": 1})
    with pytest.raises(CellError, match="digit 0..9"):
        Cell(generator="digits", digit_pos=10)


def test_real_fields_do_not_change_other_cells():
    keys = Cell().to_dict().keys()
    assert not {"patch", "positional", "digit_pos", "digit_neg"} & set(keys)
    assert Cell(patch=4).digest() == Cell().digest()
    photos = Cell(generator="photos", digit_pos=1).to_dict()
    assert photos["patch"] == 2 and "digit_pos" not in photos
    planned = parse_config(
        {"experiments": {"x": {"fixed": {"generator": "digits", "n": 4}, "grid": {"patch": [4]}}}}
    )["x"]
    (cell,) = planned.blocks()[0].cells
    assert (cell.d, cell.T) == (16, 4) and cell == Cell(generator="digits", n=4, patch=4)


def test_gd_on_digit_patches_converges_to_the_svm_of_its_selection():
    # docs/science.md §4: W(k) / ||W(k)|| -> W_mm(alpha) / ||W_mm(alpha)|| on real tokens too
    cells = [Cell(generator="digits", n=4, patch=4, iterations=2000, seed=s) for s in range(3)]
    for res in run_cells(cells, device="cpu"):
        assert res.status == "ok" and res.scalars["feasible_fro_alpha"] == 1
        assert res.scalars["corr_fro_alpha"] >= 0.99


def test_real_tokens_figure_renders_from_a_tiny_pipeline(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from docutils.core import publish_parts

    from attnsvm.report.draw import make_figure
    from tests.workflow_helpers import tiny_sweep

    raw = {
        "fixed": {"generator": "digits", "iterations": 100},
        "grid": {"n": [2, 4], "patch": [2, 4], "positional": [False, True], "param": ["W", "KQ"]},
        "seeds": 2,
        "figures": ["real_tokens"],
    }
    sweep, summary = tiny_sweep(tmp_path, "t_real", raw)
    assert set(summary["patch"].values) == {2, 4}
    pdf, png, caption = (tmp_path / f"f.{x}" for x in ("pdf", "png", "caption.rst"))
    make_figure("real_tokens", sweep, summary, pdf, png, caption)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    text = caption.read_text()
    n_ok = int(summary["count_status"].sel(status="ok").sum())
    assert n_ok == 32 and f"{n_ok} ok, 0 nonfinite, 0 failed, 0 missing" in text
    assert "patch 4, positional" in text and "SVM of opt feasible" in text
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})  # valid RST
