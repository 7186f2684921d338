"""Figures E1-E6: every figure renders a non-empty PDF and PNG from synthetic sweeps with
NaN / missing / failed cells, passes the reviewer's checks (attnsvm.report.figure_check: no
bookkeeping in the image, no overlapping text, distinct legend entries), states the status
counts in its caption, and renders from a tiny sweep made by the real pipeline
(write_block -> collect_sweep -> summarize)."""

from __future__ import annotations

import json
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from attnsvm import codes  # noqa: E402
from attnsvm.report.captions import figure_caption  # noqa: E402
from attnsvm.report.draw import make_figure  # noqa: E402
from attnsvm.report.figure_check import assert_figure_ok  # noqa: E402
from attnsvm.report.figures import FIGURES as MODULES  # noqa: E402
from attnsvm.report.figures import figure_module  # noqa: E402
from attnsvm.report.style import caption_notes  # noqa: E402
from attnsvm.sweep.derived import figure_record  # noqa: E402
from attnsvm.sweep.store import write_atomic  # noqa: E402
from attnsvm.sweep.summary import nan_quantiles, nan_stats, summarize, write_summary  # noqa: E402

# grid axes, fixed settings, linear or general head, per figure
SPECS = {
    "e1": ({"param": ["W", "KQ"]}, {"n": 2, "T": 3, "d": 2}, "linear"),
    "e2": ({"param": ["W", "KQ"]}, {"n": 3, "T": 4, "d": 4}, "linear"),
    "e3": ({"n": [3, 4], "T": [3, 5], "d": [1, 2, 4]}, {"train": False}, "linear"),
    "e4": ({"d": [4, 6]}, {"n": 3, "T": 4, "head": "relu"}, "general"),
    "e5": ({"lam": [0.1, 1.0, 3.0]}, {"n": 3, "T": 4, "d": 5, "head": "lambda"}, "general"),
    "e6": ({"d": [2, 4, 8], "param": ["W", "KQ"]}, {"n": 3, "T": 4}, "linear"),
}
FIGURES = tuple(k for k in MODULES if k in SPECS)  # new figures: tests/test_beyond.py


def synthetic_sweep(
    fig: str, seeds: int = 4, checkpoints: int = 6, rng_seed: int = 0, damage: bool = True
) -> xr.Dataset:
    """A sweep Dataset shaped like ``attnsvm.sweep.collect`` output, with random plausible values.

    With ``damage``: one missing cell (all NaN), one failed cell, NaN / -1 ranks (infeasible
    SVMs), NaN correlations (undefined Gen-SVM) and a zero max masked probability.
    """
    rng = np.random.default_rng(rng_seed)
    axes, fixed, head = SPECS[fig]
    n = max([fixed.get("n", 0), *axes.get("n", [])]) or 3
    T = max([fixed.get("T", 0), *axes.get("T", [])]) or 4
    d = max([fixed.get("d", 0), *axes.get("d", [])]) or 4
    grid_shape = tuple(len(v) for v in axes.values()) + (seeds,)
    gdims = (*axes, "seed")
    coords = {
        k: np.array(v, dtype=object if isinstance(v[0], str) else None) for k, v in axes.items()
    }
    coords["seed"] = np.arange(seeds)
    K = 0 if fixed.get("train") is False else checkpoints
    coords["iteration"] = (
        "checkpoint",
        np.unique(np.geomspace(1, 2000, K).astype(int))[:K] if K else np.zeros(0, int),
    )
    K = coords["iteration"][1].size
    svms = (
        ["fro_alpha", "nuc_alpha", "fro_opt", "nuc_opt"]
        if head == "linear"
        else ["fro_alpha", "fro_opt"]
    )
    coords["svm"] = np.array(svms, dtype=object)

    def u(*shape, lo=0.0, hi=1.0):
        return rng.uniform(lo, hi, grid_shape + shape)

    k = np.arange(K) / max(K - 1, 1)
    data = {
        "status": (gdims, np.zeros(grid_shape, np.int8)),
        "convergence": (gdims, rng.integers(0, 3, grid_shape).astype(np.int8)),
        "convergence_strict": (gdims, rng.integers(0, 4, grid_shape).astype(np.int8)),
        "saturated": (gdims, (u() > 0.3).astype(float)),
        "corr_converged": (gdims, (u() > 0.2).astype(float)),
        "W": (
            (*gdims, "checkpoint", "row", "col"),
            np.cumsum(rng.normal(size=grid_shape + (K, d, d)), axis=len(grid_shape)),
        ),
        "svm_W": ((*gdims, "svm", "row", "col"), rng.normal(size=grid_shape + (len(svms), d, d))),
        "Z": ((*gdims, "example", "feature"), rng.normal(size=grid_shape + (n, d))),
        "curve_softmax_mass": ((*gdims, "checkpoint"), 0.2 + 0.8 * k * u(1)),
        "curve_corr_fro_alpha": ((*gdims, "checkpoint"), k * u(1, lo=0.8)),
        "curve_corr_nuc_alpha": ((*gdims, "checkpoint"), k * u(1, lo=0.7)),
        "corr_fro_alpha": (gdims, u(lo=0.8)),
        "corr_nuc_alpha": (gdims, u(lo=0.8)),
        "rank_fro_opt": (gdims, rng.integers(1, 5, grid_shape).astype(float)),
        "rank_nuc_opt": (gdims, rng.integers(1, 3, grid_shape).astype(float)),
        "feasible_fro_opt": (gdims, np.ones(grid_shape)),
        "feasible_nuc_opt": (gdims, np.ones(grid_shape)),
    }
    if head == "general":
        data.update(
            {
                "curve_corr_svmeq": ((*gdims, "checkpoint"), 1 - 0.5 * (1 - k) * u(1) - 1e-4),
                "curve_corr_mm_gen": ((*gdims, "checkpoint"), 1 - 0.5 * u(1) - 1e-3 + 0 * k),
                "curve_corr_single": ((*gdims, "checkpoint"), 1 - 0.7 * u(1) - 1e-3 + 0 * k),
                "corr_svmeq": (gdims, u(lo=0.9)),
                "corr_mm_gen": (gdims, u(lo=0.5)),
                "corr_single": (gdims, u(lo=0.3)),
                "max_masked_prob": (gdims, 10 ** u(lo=-40, hi=-3)),
                "ambiguous": (gdims, (u() > 0.5).astype(float)),
                "n_relevant": (gdims, u(lo=1, hi=T)),
            }
        )
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = {
        "experiment": fig,
        "axes": list(axes),
        "fixed": json.dumps(fixed),
        "seeds": list(range(seeds)),
    }
    if damage:
        first = {dim: 0 for dim in gdims}
        last = {dim: -1 for dim in gdims}
        for name in ds.data_vars:  # missing cell: fill values everywhere
            if name == "status":
                continue
            fill = -1 if ds[name].dtype.kind in "iu" else np.nan
            ds[name][first] = fill
        ds["status"][first] = codes.CELL_STATUS.index("missing")
        ds["status"][last] = codes.CELL_STATUS.index("failed")
        second = {dim: (1 if dim == "seed" else 0) for dim in gdims}
        ds["rank_fro_opt"][second] = -1
        ds["rank_nuc_opt"][second] = np.nan
        ds["feasible_fro_opt"][second] = 0
        ds["feasible_nuc_opt"][second] = 0
        if head == "general":
            ds["corr_svmeq"][second] = np.nan
            ds["curve_corr_svmeq"][second] = np.nan
            ds["max_masked_prob"][second] = 0.0
        ds["svm_W"][second] = np.nan  # infeasible SVMs
    counts = {s: int((ds["status"] == k).sum()) for k, s in enumerate(codes.CELL_STATUS)}
    ds.attrs["status_counts"] = json.dumps(counts)
    return ds


def all_text(fig) -> str:
    """Every text of the figure and its report caption notes (counts moved there)."""
    texts = [t.get_text() for t in fig.texts] + caption_notes(fig)
    for ax in fig.axes:
        texts += [t.get_text() for t in ax.texts]
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        leg = ax.get_legend()
        if leg is not None:
            texts += [t.get_text() for t in leg.get_texts()]
    return "\n".join(texts)


def expected_cells(ds: xr.Dataset) -> str:
    """The caption's cell counts (attnsvm.report.captions.status_text) of a sweep."""
    c = {s: int((ds["status"] == k).sum()) for k, s in enumerate(codes.CELL_STATUS)}
    return ", ".join(f"{c[s]} {s}" for s in codes.CELL_STATUS)


def caption_of(name: str, fig, summary: xr.Dataset) -> str:
    return figure_caption(name, summary, caption_notes(fig))


@pytest.mark.parametrize("name", FIGURES)
def test_figure_with_damaged_cells_writes_files_and_states_counts(name, tmp_path):
    sweep = synthetic_sweep(name)
    summary = summarize(sweep)
    fig = figure_module(name).plot(sweep, summary)
    caption = caption_of(name, fig, summary)
    try:
        assert_figure_ok(fig, name)  # nothing of the bookkeeping is drawn in the image
    finally:
        plt.close(fig)
    assert expected_cells(sweep) in caption
    assert "1 missing" in caption and "1 failed" in caption
    assert f"{sweep.sizes['seed']} seeds per grid point" in caption

    pdf, png = tmp_path / f"{name}.pdf", tmp_path / f"{name}.png"
    make_figure(name, sweep, summary, pdf, png)
    assert pdf.read_bytes()[:4] == b"%PDF" and pdf.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([pdf.name, png.name])


@pytest.mark.filterwarnings("ignore:Consolidated metadata")
@pytest.mark.parametrize("name", FIGURES)
def test_figure_from_zarr_and_netcdf_paths(name, tmp_path):
    sweep = synthetic_sweep(name, damage=False)
    for v in sweep.variables.values():
        if v.dtype == object:
            v.encoding.clear()
    sweep_path, summary_path = tmp_path / "sweep.zarr", tmp_path / "summary.nc"
    write_atomic(sweep, sweep_path, consolidated=True)  # as collect writes it (a manifest)
    write_summary(sweep_path, summary_path)  # as summarize writes it (a digest record)
    make_figure(name, str(sweep_path), str(summary_path), tmp_path / "f.pdf", tmp_path / "f.png")
    assert figure_record(tmp_path / "f.png").exists()
    assert (tmp_path / "f.pdf").stat().st_size > 1000
    assert (tmp_path / "f.png").stat().st_size > 1000


@pytest.mark.parametrize("name", FIGURES)
def test_all_cells_missing_does_not_crash(name, tmp_path):
    sweep = synthetic_sweep(name, damage=False)
    for var in sweep.data_vars:
        if var != "status":
            fill = -1 if sweep[var].dtype.kind in "iu" else np.nan
            sweep[var][...] = fill
    sweep["status"][...] = codes.CELL_STATUS.index("missing")
    summary = summarize(sweep)
    fig = figure_module(name).plot(sweep, summary)
    caption = caption_of(name, fig, summary)
    try:
        assert_figure_ok(fig, name)
    finally:
        plt.close(fig)
    assert f"0 ok, 0 nonfinite, 0 failed, {sweep['status'].size} missing" in caption


def test_e3_excludes_infeasible_ranks_and_counts_them():
    sweep = synthetic_sweep("e3")
    fig = figure_module("e3").plot(sweep, summarize(sweep))
    text = all_text(fig)
    plt.close(fig)
    # one infeasible (second seed of the first point) among the ok instances
    n_ok = int((sweep["status"] == 0).sum())
    assert f"Frobenius 1 of {n_ok}" in text and f"nuclear 1 of {n_ok}" in text


def test_e4_states_ambiguous_count():
    sweep = synthetic_sweep("e4")
    ok = sweep["status"] == 0
    n_amb = int(sweep["ambiguous"].where(ok).sum())
    fig = figure_module("e4").plot(sweep, summarize(sweep))
    text = all_text(fig)
    plt.close(fig)
    assert f"ambiguous: {n_amb} of {int(ok.sum())} runs" in text
    assert "1 run without a masked token" in text


def test_e6_bars_are_shares_of_ok_runs():
    sweep = synthetic_sweep("e6")
    fig = figure_module("e6").plot(sweep, summarize(sweep))
    ax = fig.axes[0]
    heights = np.zeros(len(sweep["d"]))
    hatched = np.zeros(len(sweep["d"]))
    for patch in ax.patches:
        x = int(round(patch.get_x() + patch.get_width() / 2))
        if patch.get_hatch():
            hatched[x] += patch.get_height()
        else:
            heights[x] += patch.get_height()
    text = all_text(fig)
    plt.close(fig)
    np.testing.assert_allclose(heights, 1.0)
    # hatched: the share of classified ok W runs that are unsaturated or below the threshold
    ok = (sweep["status"] == 0) & (sweep["convergence"] >= 0)
    bad = ok & ((sweep["saturated"] != 1) | (sweep["corr_converged"] != 1))
    w = {"param": "W"}
    expected = (bad.sel(w).sum("seed") / ok.sel(w).sum("seed")).values
    np.testing.assert_allclose(hatched, expected)
    assert "class of GD's selection" in text and "strict rule (W;" in text


def test_e6_classes_by_selection_from_the_run():
    """A real (tiny) E6 run: the stored class follows alpha, the strict rule is kept apart."""
    from attnsvm.config.cell import Cell
    from attnsvm.tasks import run_cells
    from attnsvm.tasks.metrics import convergence_type, selection_type

    cells = [Cell(n=4, T=5, d=2, param="W", iterations=60, seed=s) for s in range(6)]
    for r in run_cells(cells, device="cpu"):
        sc = r.scalars
        assert r.convergence == selection_type(
            alpha_is_opt=bool(sc["alpha_is_opt"]), locally_optimal=bool(sc["locally_optimal"])
        )
        assert r.convergence_strict == convergence_type(
            saturated=bool(sc["saturated"]),
            alpha_is_opt=bool(sc["alpha_is_opt"]),
            locally_optimal=bool(sc["locally_optimal"]),
            correlation=sc["corr_matching"],
            threshold=r.cell.corr_threshold,
        )
        assert sc["corr_converged"] == float(sc["corr_matching"] >= r.cell.corr_threshold)


def test_nan_helpers():
    v = np.array([[1.0, np.nan], [3.0, np.nan], [np.nan, np.nan]])
    mean, std, count = nan_stats(v)
    np.testing.assert_allclose(mean, [2.0, np.nan])
    np.testing.assert_allclose(std, [np.sqrt(2.0), np.nan])
    np.testing.assert_array_equal(count, [2, 0])
    (med,) = nan_quantiles(v, (0.5,))
    np.testing.assert_allclose(med, [2.0, np.nan])


@pytest.mark.parametrize("seed", range(4))
def test_nan_quantiles_equal_numpys(seed):
    """The one-sort quantiles equal ``np.nanquantile`` per slice (compare_runs's equality:
    NaN equals NaN, a tie of -0.0 and 0.0 may keep either), on every shape and axis, with
    NaN, infinities (counted as NaN), ties, empty axes and slices without a finite value."""
    rng = np.random.default_rng(seed)
    qs = (0.25, 0.5, 0.75, 0.0, 1.0, 0.1, 0.9)
    for _ in range(100):
        shape = tuple(int(k) for k in rng.integers(0, 6, size=rng.integers(1, 4)))
        axis = int(rng.integers(0, len(shape)))
        x = rng.standard_normal(shape)
        if rng.random() < 0.5:
            x = np.round(x, 1)  # ties
        u = rng.random(shape)
        x[u < 0.3] = np.nan
        x[(u >= 0.3) & (u < 0.35)] = np.inf
        x[(u >= 0.35) & (u < 0.38)] = -np.inf
        finite = np.where(np.isfinite(x), x, np.nan)
        for q, got in zip(qs, nan_quantiles(x, qs, axis=axis), strict=True):
            if x.shape[axis] == 0:
                want = np.full(np.delete(x.shape, axis), np.nan)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
                    want = np.nanquantile(finite, q, axis=axis)
            np.testing.assert_array_equal(got, want)


def test_unknown_figure_name():
    with pytest.raises(ValueError, match="unknown figure"):
        figure_module("e9")


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        (
            "e2",
            {
                "fixed": {"n": 3, "T": 3, "d": 3, "iterations": 30, "checkpoint_count": 5},
                "grid": {"param": ["W", "KQ"]},
                "seeds": 2,
            },
        ),
        (
            "e5",
            {
                "fixed": {
                    "generator": "orthonormal",
                    "head": "lambda",
                    "n": 2,
                    "T": 3,
                    "d": 6,
                    "iterations": 30,
                    "checkpoint_count": 5,
                },
                "grid": {"lam": [0.1, 3.0]},
                "seeds": 2,
            },
        ),
    ],
)
def test_figure_from_real_pipeline_with_a_missing_block(name, raw, tmp_path):
    from attnsvm.plan import parse_experiment
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.worker import write_block

    exp = parse_experiment(name, {**raw, "figures": [name]}, 64)
    blocks = exp.blocks()
    paths = {}
    for block in blocks[:-1]:  # the last block is left missing
        paths[block.name] = write_block(
            list(block.cells),
            tmp_path / f"{block.name}.zarr",
            experiment=name,
            block=block.name,
            device="cpu",
        )
    sweep = collect_sweep(exp, paths)
    summary = summarize(sweep)
    pdf, png = tmp_path / "f.pdf", tmp_path / "f.png"
    make_figure(name, sweep, summary, pdf, png)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    fig = figure_module(name).plot(sweep, summary)
    caption = caption_of(name, fig, summary)
    try:
        assert_figure_ok(fig, name)
    finally:
        plt.close(fig)
    missing = len(blocks[-1].cells)
    assert f", {missing} missing" in caption


def test_e4_main_curves_are_clear_runs_and_floored_values_are_marked():
    """Issue 12: clear runs are the main curves, ambiguous runs apart; values below 1e-12 are
    counted and marked on the axis, not drawn at a clip value."""
    sweep = synthetic_sweep("e4", damage=False)
    amb = np.zeros(sweep["ambiguous"].shape)
    amb[:, :2] = 1  # the first two seeds of each d are ambiguous
    sweep["ambiguous"][...] = amb
    curve = sweep["curve_corr_svmeq"].values
    curve[:, :2] = 0.5  # ambiguous: 1 - corr = 0.5
    curve[:, 2:] = 1 - 1e-3  # clear: 1 - corr = 1e-3
    sweep["curve_corr_svmeq"][...] = curve
    sweep["corr_svmeq"][{"d": 0, "seed": 2}] = 1.0  # 1 - corr = 0 < 1e-12
    fig = figure_module("e4").plot(sweep, summarize(sweep))
    ax = fig.axes[0]
    drawn = [ln for ln in ax.get_lines() if len(ln.get_ydata())]
    solid = [ln for ln in drawn if ln.get_linestyle() == "-"]
    dashed = [ln for ln in drawn if ln.get_linestyle() == "--"]
    # two clear runs per d, fewer than MIN_RUNS: each drawn, no median of two runs
    assert len(solid) == 2 * sweep.sizes["d"]
    for line in solid:
        np.testing.assert_allclose(line.get_ydata(), 1e-3, rtol=1e-9)
    np.testing.assert_allclose(dashed[0].get_ydata(), 0.5, rtol=1e-9)
    text = all_text(fig) + "\n".join(t.get_text() for leg in fig.legends for t in leg.get_texts())
    plt.close(fig)
    n = sweep.sizes["seed"] * sweep.sizes["d"]
    assert f"clear runs (main curves, the paper's accepted runs): {n - 2 * 2}" in text
    assert "1 run with 1 - corr below 1e-12 (markers on the bottom axis)" in text
    assert "below $10^{-12}$: 1 run" in text
    assert "$d=4$: 2 clear runs" in text and "each run" in text


def test_e4_draws_a_median_where_enough_clear_runs():
    """A d with at least MIN_RUNS clear runs gets its median curve (markers) and IQR band."""
    from attnsvm.report.figures.e4 import MIN_RUNS

    sweep = synthetic_sweep("e4", seeds=MIN_RUNS, damage=False)
    sweep["ambiguous"][...] = 0.0
    fig = figure_module("e4").plot(sweep, summarize(sweep))
    ax = fig.axes[0]
    medians = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_ydata())]
    bands = len(ax.collections)
    plt.close(fig)
    assert len(medians) == sweep.sizes["d"] and bands == sweep.sizes["d"]


def test_e1_draws_tokens_and_labels_the_kq_axis():
    sweep = synthetic_sweep("e1", damage=False)
    rng = np.random.default_rng(1)
    shape = sweep["status"].shape
    sweep["X"] = ((*sweep["status"].dims, "example", "token", "feature"),
                  rng.normal(size=shape + (2, 3, 2)))  # fmt: skip
    sweep["opt"] = ((*sweep["status"].dims, "example"), np.zeros(shape + (2,), int))
    fig = figure_module("e1").plot(sweep, summarize(sweep))
    labels = [ax.get_xlabel() for ax in fig.axes]
    text = all_text(fig) + "\n".join(t.get_text() for leg in fig.legends for t in leg.get_texts())
    assert_figure_ok(fig, "e1")
    plt.close(fig)
    assert any("K Q^{\\top} z_i" in lab for lab in labels)
    assert any("W z_i" in lab for lab in labels)
    assert "optimal token" in text and "tokens $x_{it}$" in text
