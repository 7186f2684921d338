"""attnsvm.report.figure_check: each rule catches the defect it names on a small,
deliberately bad figure (one per defect issue 41 found in the report's figures), and a clean
figure passes; the house style's readable names and intervals."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from attnsvm.report import style  # noqa: E402
from attnsvm.report.figure_check import RULES, check_figure  # noqa: E402


def rules_of(fig) -> list[str]:
    try:
        return [d.rule for d in check_figure(fig)]
    finally:
        plt.close(fig)


def messages(fig) -> str:
    try:
        return "\n".join(map(str, check_figure(fig)))
    finally:
        plt.close(fig)


def new(ncols: int = 1, **kw):
    return style.new_figure(1, ncols, width=3.3 * ncols, height=2.4, **kw)


def test_a_clean_figure_passes():
    fig, ax = new()
    x = np.arange(1, 6)
    ax.plot(x, x, "-o", color=style.PALETTE[0], label="solid")
    ax.plot(x, x + 2, "--s", color=style.PALETTE[1], mfc="white", label="dashed")
    ax.set_yscale("log")
    ax.set_xlabel("$k$")
    ax.set_ylabel("value")
    style.panel_label(ax, "a", "clean")
    ax.legend(loc="lower right")
    assert rules_of(fig) == []


def test_overlapping_texts():
    """e3's counts written over each other; the optimizer legend on panel (c)'s title."""
    fig, ax = new()
    ax.plot([0, 1], [0, 1])
    ax.text(0.5, 0.5, "6", transform=ax.transAxes)
    ax.text(0.505, 0.505, "1", transform=ax.transAxes)
    assert "overlap" in rules_of(fig)

    style.apply_style()
    fig, axes = plt.subplots(1, 2, figsize=(6.6, 2.4))  # no layout engine to make room
    style.panel_label(axes[1], "c", "a long title that runs right into the legend")
    for k, ax in enumerate(axes):
        ax.plot([0, 1], [0, 1], color=style.PALETTE[k], label=f"line {k}")
    fig.legend(loc="upper right", bbox_to_anchor=(0.85, 1.0))
    assert "overlap" in rules_of(fig)


def test_text_leaving_the_canvas():
    fig, ax = new()
    ax.plot([0, 1], [0, 1], label="x")
    fig.legend(["a legend entry far too long to fit on this canvas"], loc="center left",
               bbox_to_anchor=(0.9, 0.5))  # fmt: skip
    assert "canvas" in rules_of(fig)


def test_legend_entries_drawn_alike():
    """joint_head: "fixed" solid and "trained" dashed with a marker; the dash's gap falls
    under the marker of a short handle, so both glyphs look solid."""
    fig, ax = new()
    x = np.arange(3)
    ax.plot(x, x, "-", color=style.PALETTE[0], marker="o", ms=3, label="W, fixed head")
    ax.plot(x, x + 1, "--", color=style.PALETTE[0], marker="o", ms=3, label="W, trained head")
    ax.legend(handlelength=2.0, fontsize=5.5)
    found = messages(fig)
    assert "[legend]" in found and "same glyph" in found

    fig, ax = new()  # the same with a handle long enough to show the dash: distinct
    ax.plot(x, x, "-", color=style.PALETTE[0], marker="o", ms=3, label="W, fixed head")
    ax.plot(x, x + 1, "--", color=style.PALETTE[0], marker="o", ms=3, label="W, trained head")
    ax.legend(handlelength=3.0)
    assert "legend" not in rules_of(fig)


def test_unexplained_line_style():
    """rank_gd: solid and dashed lines, a legend that draws every entry solid."""
    fig, ax = new()
    x = np.arange(3)
    ax.plot(x, x, "-", color=style.PALETTE[0])
    ax.plot(x, x + 1, "--", color=style.PALETTE[0])
    from matplotlib.lines import Line2D

    ax.legend(handles=[Line2D([], [], color=style.PALETTE[0], label="W runs")])
    assert "unexplained" in rules_of(fig)


def test_several_series_without_a_legend():
    fig, ax = new()
    ax.plot([0, 1], [0, 1], color=style.PALETTE[0])
    ax.plot([0, 1], [1, 0], color=style.PALETTE[1], ls="--")
    assert "unexplained" in rules_of(fig)


def test_log_axis_with_bars_and_a_zero_tick():
    """rates: bars on a symlog axis labelled 0."""
    fig, ax = new()
    ax.bar([0, 1, 2], [0.05, 12.0, 10.0])
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(0, 20)
    found = messages(fig)
    assert "bars on its log y axis" in found and "0 tick" in found


def test_log_axis_reaching_zero():
    fig, ax = new()
    ax.plot([1, 2], [1, 2])
    ax.set_yscale("log")
    # what an empty log panel may end with (matplotlib itself refuses to set it)
    ax.viewLim.intervaly = (-0.05, 1.0)
    assert "log-axis" in rules_of(fig)


def test_text_on_a_marker():
    """e3: the count written on its point."""
    fig, ax = new()
    ax.plot([1, 2, 3], [1, 2, 3], "o", ms=8)
    ax.annotate("6", (2, 2), ha="center", va="center")
    assert "marker-text" in rules_of(fig)


def test_legend_across_a_line():
    fig, ax = new()
    ax.plot([0, 1], [0.5, 0.5], color=style.PALETTE[0], label="flat line through the middle")
    ax.legend(loc="center")
    assert "legend-line" in rules_of(fig)


def test_bookkeeping_in_the_image():
    """Every figure's old footer."""
    fig, ax = new()
    ax.plot([0, 1], [0, 1])
    fig.text(0.0, 0.0, "4 seeds per point; cells: 8 ok, 0 failed, 0 nonfinite, 0 missing")
    assert "bookkeeping" in rules_of(fig)


@pytest.mark.parametrize(
    "text", ["mirror1p5 (W)", "adam, beta2 = 0.95", "adam, β2 = 0.95", "corr(W,  SVM)"]
)
def test_raw_names_and_double_spaces(text):
    fig, ax = new()
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel(text)
    assert "label" in rules_of(fig)


def test_math_labels_pass():
    fig, ax = new()
    ax.plot([0, 1], [0, 1])
    ax.set_ylabel(style.axis_value("adam_beta2", 0.95) + ", " + style.optimizer_label("mirror1p5"))
    assert rules_of(fig) == []


def test_unknown_rule():
    fig, _ = new()
    with pytest.raises(ValueError, match="unknown rules"):
        check_figure(fig, rules=("overlap", "colour"))
    plt.close(fig)
    assert len(set(RULES)) == len(RULES)


def test_every_optimizer_has_a_readable_name():
    from attnsvm.config.fields import FIELDS

    choices = next(f.choices for f in FIELDS if f.name == "optimizer")
    assert set(choices) <= set(style.OPTIMIZER_LABELS) == set(style.OPTIMIZER_SHORT)


def test_intervals_are_scipys():
    """The drawn intervals are scipy's: Student t of a mean, Clopper-Pearson of a share."""
    v = np.array([0.2, 0.5, 0.9, 0.4])
    lo, hi = style.mean_interval(v.mean(), v.std(ddof=1), v.size)
    want = stats.t.interval(style.CONFIDENCE, v.size - 1, v.mean(), stats.sem(v))
    np.testing.assert_allclose([lo, hi], want)
    lo, hi = style.mean_interval(1.0, np.nan, 1)
    assert np.isnan(lo) and np.isnan(hi)  # one seed: no interval
    lo, hi = style.share_interval([2, 0], [3, 0])
    ci = stats.binomtest(2, 3).proportion_ci(style.CONFIDENCE, method="exact")
    np.testing.assert_allclose([lo[0], hi[0]], [ci.low, ci.high])
    assert np.isnan(lo[1]) and np.isnan(hi[1])
