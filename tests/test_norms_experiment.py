"""Issue 15's experiment (docs/science.md §10): the norm_svms cell field, the per-norm SVMs and
margin ratios of a trained cell, and the norms figure from a tiny pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell, CellError
from attnsvm.svm.norms import NORMS, WIDE_FACE

SMALL = dict(n=3, T=4, d=4, iterations=150, lr=0.05)


def test_norm_svms_field_keeps_existing_cells_and_is_refused_for_ntp():
    assert Cell(seed=3).digest() == Cell(seed=3, norm_svms=False).digest()
    assert "norm_svms" not in Cell().to_dict()
    assert Cell(norm_svms=True).digest() != Cell().digest()
    with pytest.raises(CellError, match="norm_svms"):
        Cell(task="ntp", generator="ntp_acyclic", T=4, K=6, norm_svms=True)
    with pytest.raises(CellError, match="optimizer must be one of"):
        Cell(optimizer="rmsprop")  # polyak is one now (docs/science.md §10)


def test_trained_cell_measures_every_norm_and_its_own_svm_has_ratio_at_most_one():
    from attnsvm.tasks import run_cells

    plain, extra = run_cells([Cell(seed=1, **SMALL), Cell(seed=1, norm_svms=True, **SMALL)])
    assert not any(k.startswith("mratio_") for k in plain.scalars)
    for key in ("corr_fro_alpha", "corr_nuc_alpha"):  # the existing values are unchanged
        assert plain.scalars[key] == extra.scalars[key]
    for norm in (*NORMS, "fro", "nuc"):
        r = extra.svms[f"{norm}_alpha"]
        assert r.status == "optimal", r.message
        assert extra.scalars[f"mratio_{norm}_alpha"] <= 1 + 1e-7  # no direction beats the SVM
        if norm in WIDE_FACE:  # its corr would depend on the solver: not stored (issue 29)
            assert f"corr_{norm}_alpha" not in extra.scalars
            assert f"corr_{norm}_alpha" not in extra.curves
            continue
        assert -1 <= extra.scalars[f"corr_{norm}_alpha"] <= 1
        assert len(extra.curves[f"corr_{norm}_alpha"]) == len(extra.iterations)


def test_sign_descent_ends_closest_to_the_max_entry_svm():
    """The linear theory's prediction on a small instance: sign descent's final W correlates
    more with the max-entry SVM than with any other norm's (3 seeds, mean)."""
    from attnsvm.tasks import run_cells

    cells = [Cell(seed=s, optimizer="sign", norm_svms=True, **{**SMALL, "iterations": 300})
             for s in range(3)]  # fmt: skip
    res = run_cells(cells)
    norms = [n for n in ("fro", "nuc", *NORMS) if n not in WIDE_FACE]
    mean = {n: np.mean([r.scalars[f"corr_{n}_alpha"] for r in res]) for n in norms}
    assert max(mean, key=mean.get) == "max", mean


def test_norms_figure_renders_from_tiny_pipeline(tmp_path):
    import matplotlib.pyplot as plt
    from docutils.core import publish_parts

    from attnsvm.report.draw import make_figure
    from attnsvm.report.figures import figure_module
    from tests.workflow_helpers import tiny_sweep

    fixed = {k: v for k, v in SMALL.items() if k != "d"}
    raw = {"fixed": {**fixed, "iterations": 60, "norm_svms": True},
           "grid": {"d": [3, 4], "optimizer": ["normalized", "sign", "spectral"]}}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_norms", {**raw, "seeds": 2, "figures": ["norms"]})
    from attnsvm.variables import UNDESCRIBED

    for ds in (sweep, summary):  # every new variable is described (CF attributes)
        for name, var in ds.variables.items():
            assert var.attrs.get("description") not in (None, "", UNDESCRIBED), name
    for n in (*NORMS, "fro"):
        assert "margin" in sweep[f"mratio_{n}_alpha"].attrs["description"]
        if n in WIDE_FACE:
            assert f"corr_{n}_alpha" not in sweep and f"curve_corr_{n}_alpha" not in sweep
            continue
        assert sweep[f"corr_{n}_alpha"].attrs["units"] == "1"
    pdf, png, cap = tmp_path / "n.pdf", tmp_path / "n.png", tmp_path / "n.caption.rst"
    make_figure("norms", sweep, summary, pdf, png, cap)
    assert png.stat().st_size > 1000
    text = cap.read_text()
    assert "*sign* on *W*: predicted max" in text and "the prediction" in text
    # the spectral prediction is read in the margin ratios (its corr is not stored)
    assert "*spectral* on *W*: predicted spec, margin ratio" in text
    assert "by the margin ratios the prediction" in text
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
    fig = figure_module("norms").plot(sweep, summary)
    assert len(fig.axes) == 4 and fig.legends  # heatmaps, curves, vs d; legend outside
    plt.close(fig)


def test_norms_figure_has_a_row_per_adam_beta(tmp_path):
    """An ``adam_beta2`` grid axis (issue 29) splits the norms figure's rows: one per value,
    with its own numbers in the caption, read from the summary at that beta."""
    import matplotlib.pyplot as plt

    from attnsvm.report.figures import figure_module
    from tests.workflow_helpers import tiny_sweep

    raw = {"fixed": {**SMALL, "iterations": 60, "optimizer": "adam", "norm_svms": True},
           "grid": {"adam_beta2": [0.9, 0.999]}, "seeds": 2, "figures": ["norms"]}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_betas", raw)
    mod = figure_module("norms")
    rows = mod.rows_of(summary)
    assert [r[2] for r in rows] == [(("adam_beta2", 0.9),), (("adam_beta2", 0.999),)]
    lines = mod.numbers(summary)
    for b2 in (0.9, 0.999):
        want = summary["corr_max_alpha_mean"].sel(adam_beta2=b2).mean().item()
        line = next(x for x in lines if x.startswith(f"*adam, β₂ = {b2}* on *W*"))
        assert f"predicted max, final corr {mod.captions.fmt(want)}" in line
    plt.close(mod.plot(sweep, summary))


def test_norms_figure_has_a_row_per_optimizer_and_batch_size(tmp_path):
    """Signum and Muon with a ``batch_size`` grid axis (issue 42, experiment
    b16_optimizer_batch): one row per (optimizer, batch size), each with its own numbers,
    Signum's and Muon's predictions (max-entry, spectral) outlined, the figure passes the
    figure checks."""
    import matplotlib.pyplot as plt

    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from tests.workflow_helpers import tiny_sweep

    raw = {"fixed": {**SMALL, "iterations": 60, "norm_svms": True},
           "grid": {"optimizer": ["signum", "muon"], "batch_size": [1, 3]}, "seeds": 2,
           "figures": ["norms"]}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_batch", raw)
    mod = figure_module("norms")
    rows = mod.rows_of(summary)
    assert [(o, sp) for o, _, sp in rows] == [
        (o, (("batch_size", b),)) for o in ("signum", "muon") for b in (1.0, 3.0)
    ]
    assert [mod.predicted(o, p) for o, p, _ in rows] == ["max", "max", "spec", "spec"]
    lines = mod.numbers(summary)
    for b in (1, 3):
        want = summary["corr_max_alpha_mean"].sel(optimizer="signum", batch_size=b).mean()
        line = next(x for x in lines if x.startswith(f"*signum, batch size = {b}* on *W*"))
        assert f"predicted max, final corr {mod.captions.fmt(want.item())}" in line
    fig = mod.plot(sweep, summary)
    assert_figure_ok(fig)
    plt.close(fig)


def test_a_batch_size_grid_with_the_full_batch_is_planned_and_drawn(tmp_path):
    """``batch_size: [1, null]`` (one example per step and the full batch) is a valid grid:
    the config is accepted (planning compared grid points holding None with ints before), the
    collected coordinate holds "1" and "null", and the norms figure selects each row by it and
    names the full batch in words."""
    import matplotlib.pyplot as plt

    from attnsvm.report import style
    from attnsvm.report.figure_check import assert_figure_ok
    from attnsvm.report.figures import figure_module
    from tests.workflow_helpers import tiny_sweep

    raw = {"fixed": {**SMALL, "iterations": 60, "norm_svms": True, "optimizer": "signum"},
           "grid": {"batch_size": [1, None]}, "seeds": 2, "figures": ["norms"]}  # fmt: skip
    sweep, summary = tiny_sweep(tmp_path, "t_full", raw)
    assert list(summary["batch_size"].values) == ["1", "null"]
    mod = figure_module("norms")
    rows = mod.rows_of(summary)
    assert [sp for _, _, sp in rows] == [(("batch_size", "1"),), (("batch_size", "null"),)]
    assert mod.label(rows[1]).endswith("$b$ = full") and mod.caption_label(rows[0]).endswith("= 1")
    assert style.axis_value("adam_beta2", 0.95) == r"$\beta_2 = 0.95$"  # numbers stay math
    for row, value in zip(rows, ("1", "null"), strict=True):
        want = summary["corr_max_alpha_mean"].sel(batch_size=value).mean().item()
        assert mod.table(summary, "corr")[rows.index(row), mod.NORMS.index("max")] == want
    fig = mod.plot(sweep, summary)
    assert_figure_ok(fig)
    plt.close(fig)
