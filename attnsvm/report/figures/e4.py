"""E4: relu head, GD vs Gen-SVM (W_svmeq), W_mm_gen and the single-token SVM
(docs/science.md §6, E4; §4 for the Gen-SVM).

(a)-(c): 1 - corr(W(k), .) vs iteration on a log y axis, one line per d: the paper's accepted
(clear) runs are the main curves (median over seeds, band: interquartile range, since a mean
and its symmetric interval are meaningless on a log axis); a d with fewer than ``MIN_RUNS``
clear runs has no median: each of its clear runs is drawn as a thin line, and the legend says
how many runs each curve rests on. Ambiguous runs (a final softmax entry in (1e-6,
relevant_tol)), which the paper rejects, are drawn apart as a thin dashed median.
(d): final 1 - corr(W, W_svmeq) against the largest masked softmax probability (log-log); the
ambiguous zone (1e-6, 1e-3) is shaded and ambiguous runs are drawn hollow. Values below
``FLOOR`` are not piled up at a clip value: they are drawn as markers on the axis, labelled
"below 1e-12" with their count. Runs that cannot be placed (no masked token, undefined
W_svmeq) are counted. :func:`run_counts` gives the clear and ambiguous counts for the caption.
"""

from __future__ import annotations

import matplotlib.transforms as mtransforms
import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure
from attnsvm.sweep.summary import nan_quantiles

VARIABLES = (
    "curve_corr_svmeq",
    "curve_corr_mm_gen",
    "curve_corr_single",
    "corr_svmeq",
    "max_masked_prob",
    "ambiguous",
    "n_relevant",
)
FLOOR = 1e-12
#: fewest clear runs of a d summarized by a median and band (the claims' fewest values)
MIN_RUNS = style.MIN_RUNS
CURVES = (
    ("svmeq", rf"$1-\mathrm{{corr}}(W(k), {style.W_SVMEQ})$", "W_svmeq"),
    ("mm_gen", rf"$1-\mathrm{{corr}}(W(k), {style.W_MM_GEN})$", "W_mm_gen"),
    ("single", rf"$1-\mathrm{{corr}}(W(k), {style.W_MM})$", "single-token SVM"),
)
TITLES = (
    rf"Gen-SVM ${style.W_SVMEQ}$",
    rf"${style.W_MM_GEN}$",
    rf"single-token SVM ${style.W_MM}$ (GD's $\alpha$)",
)


def _flat(da: xr.DataArray, trailing: tuple[str, ...] = ()) -> np.ndarray:
    lead = [d for d in da.dims if d not in trailing]
    da = da.transpose(*lead, *trailing)
    size = int(np.prod([da.sizes[t] for t in trailing])) if trailing else 1
    return np.asarray(da.values, dtype=float).reshape(-1, size)


def _d_values(sweep: xr.Dataset) -> list:
    return sd.grid_values(sweep, "d") or [None]


def _sub(da: xr.DataArray, d) -> xr.DataArray:
    return sd.select(da, d=d) if d is not None else da


def run_counts(sweep: xr.Dataset) -> dict[str, object]:
    """Clear and ambiguous ok runs, in all and per d (for the figure's footer and caption).

    ``{"clear": int, "ambiguous": int, "unknown": int, "per_d": {d: (clear, ambiguous)}}``;
    unknown: ok runs without an ambiguity flag.
    """
    amb = sd.ok_values(sweep, "ambiguous")
    per_d = {}
    for d in _d_values(sweep):
        v = _sub(amb, d).values.ravel()
        per_d[d] = (int(np.sum(v == 0)), int(np.sum(v > 0)))
    v = amb.values.ravel()
    n_ok = int(sd.ok_mask(sweep).sum())
    clear, ambiguous = int(np.sum(v == 0)), int(np.sum(v > 0))
    return {
        "clear": clear,
        "ambiguous": ambiguous,
        "unknown": n_ok - clear - ambiguous,
        "per_d": per_d,
    }


def counts_text(sweep: xr.Dataset) -> str:
    """One caption sentence with the clear / ambiguous counts of :func:`run_counts`."""
    c = run_counts(sweep)
    per = "; ".join(
        f"d={d}: {cl} clear, {am} ambiguous" for d, (cl, am) in c["per_d"].items() if d is not None
    )
    text = (
        f"clear runs (main curves, the paper's accepted runs): {c['clear']}; ambiguous runs "
        f"(final softmax has values in (1e-6, 1e-3); dashed, hollow in (d)): {c['ambiguous']}"
    )
    if c["unknown"]:
        text += f"; ok runs without the flag: {c['unknown']}"
    return text + (f" ({per})" if per else "")


def _at_axis(ax, values, other, axis: str, color, hollow: bool) -> None:
    """Markers on the x (or y) axis for points whose value is below ``FLOOR``."""

    if not len(values):
        return
    if axis == "y":  # value on y is below the floor: marker on the bottom axis
        tr = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
        xs, ys, marker = other, np.zeros(len(other)), "v"
    else:
        tr = mtransforms.blended_transform_factory(ax.transAxes, ax.transData)
        xs, ys, marker = np.zeros(len(other)), other, "<"
    ax.scatter(xs, ys, s=16, marker=marker, transform=tr, clip_on=False, zorder=4,
               color=color, facecolors="none" if hollow else color, linewidths=1.0)  # fmt: skip


def _notes(sweep: xr.Dataset, amb: xr.DataArray, mv, ev, okv) -> tuple[list[str], dict]:
    """Caption notes (ambiguous, clear, unplaced and floored runs) and the counts for (d)."""
    n = {
        "amb": int(np.nansum(amb.values)),
        "amb_known": int(np.isfinite(amb.values).sum()),
        "no_mask": int(np.sum(okv & np.isfinite(mv) & (mv <= 0))),
        "undefined": int(np.sum(okv & ~np.isfinite(ev))),
        "floored": int(np.sum(okv & np.isfinite(ev) & (ev < FLOOR))),
        "tiny": int(np.sum(okv & np.isfinite(mv) & (mv > 0) & (mv < FLOOR))),
    }
    undefined_curves = []
    for key, _, name in CURVES:
        c = _flat(sd.ok_values(sweep, f"curve_corr_{key}"), ("checkpoint",))
        bad = int(np.sum(okv & ~np.isfinite(c).any(axis=1))) if c.size else 0
        if bad:
            undefined_curves.append(f"{name}: {bad}")
    extra = [
        f"ambiguous runs (final softmax has values in (1e-6, 1e-3)): {n['amb']} of "
        f"{n['amb_known']} ok runs, kept and drawn apart",
        counts_text(sweep),
        (
            f"(d): {style.runs(n['no_mask'])} without a masked token (all tokens relevant); "
            f"{style.runs(n['undefined'])} with undefined corr(W, W_svmeq) (not drawn); "
            f"{style.runs(n['tiny'])} with max masked prob below {FLOOR:g} (markers on the left "
            f"axis) and {style.runs(n['floored'])} with 1 - corr below {FLOOR:g} (markers on the "
            "bottom axis)"
        ),
    ]
    if undefined_curves:
        extra.append(
            "runs without a curve (undefined SVM, excluded from (a)-(c)): "
            + ", ".join(undefined_curves)
        )
    return extra, n


def _draw_curves(axes, sweep: xr.Dataset, ds: list, x, amb: xr.DataArray, colors: dict) -> list:
    """(a)-(c): 1 - corr vs iteration; clear runs: median and IQR band (each run where too
    few), ambiguous: dashed median (split per run, so read from the sweep: the summary does not
    split them). Returns the legend handles of what was drawn."""
    used: dict[str, Line2D] = {}
    labels: dict = {}
    for letter, ax, title, (key, ylabel, _) in zip("abc", axes, TITLES, CURVES, strict=True):
        for d in ds:
            c = _flat(_sub(sd.ok_values(sweep, f"curve_corr_{key}"), d), ("checkpoint",))
            a = _sub(amb, d).values.ravel()
            if c.size == 0:
                continue
            clear, ambiguous = c[a == 0], c[a > 0]
            labels[d] = f"$d={d}$: {style.runs(len(clear), 'clear run')}"
            if len(clear) >= MIN_RUNS:
                style.plot_band(ax, x, np.maximum(1.0 - clear, FLOOR), colors[d],
                                stat="median", marker="o", ms=2)  # fmt: skip
                used["median"] = Line2D([], [], color="0.3", marker="o", ms=2,
                                        label="clear: median, IQR")  # fmt: skip
            elif len(clear):  # too few for a median: every run, thin
                for run in np.maximum(1.0 - clear, FLOOR):
                    ax.plot(x, run, color=colors[d], lw=0.7)
                used["each"] = Line2D([], [], color="0.3", lw=0.7,
                                      label=f"clear, fewer than {MIN_RUNS}: each run")  # fmt: skip
            if len(ambiguous):
                (med,) = nan_quantiles(np.maximum(1.0 - ambiguous, FLOOR), (0.5,), axis=0)
                ax.plot(x, med, color=colors[d], ls="--", lw=0.8, alpha=0.8)
                used["amb"] = Line2D([], [], color="0.3", ls="--", lw=0.8,
                                     label="ambiguous: median")  # fmt: skip
        ax.set_yscale("log")
        style.plain_log_axis(ax)
        ax.set_xlabel("iteration $k$")
        ax.set_ylabel(ylabel)
        style.panel_label(ax, letter, title)
    handles = [
        Line2D([], [], color=colors[d], lw=1.4, label=lab)
        for d, lab in labels.items()
        if d is not None
    ]
    return handles + [used[k] for k in ("median", "each", "amb") if k in used]


def _scatter_d(ax, m, e, a, color) -> None:
    """One d's runs in (d): clear filled, ambiguous hollow; values below FLOOR on the axes."""
    keep = np.isfinite(m) & np.isfinite(e) & (m > 0)
    low_m, low_e = m < FLOOR, e < FLOOR
    for flag in (False, True):
        sel = keep & (a == flag)
        main = sel & ~low_m & ~low_e
        if main.any():
            ax.scatter(m[main], e[main], s=16, color=color, linewidths=1.0,
                       facecolors="none" if flag else color, zorder=3)  # fmt: skip
        below_e = sel & low_e & ~low_m
        below_m = sel & low_m & ~low_e
        _at_axis(ax, e[below_e], m[below_e], "y", color, flag)
        _at_axis(ax, m[below_m], e[below_m], "x", color, flag)
        if (sel & low_m & low_e).any():  # below the floor on both axes: at the corner
            ax.scatter([0], [0], s=16, marker="s", color=color, clip_on=False,
                       transform=ax.transAxes, zorder=4)  # fmt: skip


def _draw_scatter(ax, ds, mmp, err, amb, colors, mv, ev, okv, n: dict) -> None:
    """(d): final 1 - corr(W, W_svmeq) against the largest masked softmax probability."""
    ax.axvspan(1e-6, 1e-3, color="0.86", zorder=0, label="ambiguous zone $(10^{-6}, 10^{-3})$")
    for d in ds:
        m, e = _sub(mmp, d).values.ravel(), _sub(err, d).values.ravel()
        _scatter_d(ax, m, e, _sub(amb, d).values.ravel() > 0, colors[d])
    ax.set_xscale("log")
    ax.set_yscale("log")
    # limits over every drawn value (also those only marked on the other axis)
    placed = okv & np.isfinite(mv) & np.isfinite(ev) & (mv > 0)
    for vals, setter in ((mv, ax.set_xlim), (ev, ax.set_ylim)):
        v = vals[placed & (vals >= FLOOR)]
        if v.size:
            setter(v.min() / 1.6, v.max() * 1.6)
    if placed.any():
        ax.set_xlim(min(ax.get_xlim()[0], 1e-6 / 1.6), max(ax.get_xlim()[1], 1e-3 * 1.6))
    below = f"below $10^{{{int(np.log10(FLOOR))}}}$"
    style.plain_log_axis(ax)
    ax.set_xlabel(r"largest masked softmax probability at $k_{\max}$")
    ax.set_ylabel(rf"final $1-\mathrm{{corr}}(W, {style.W_SVMEQ})$")
    style.panel_label(ax, "d", f"ambiguous: {n['amb']} of {n['amb_known']} runs")
    handles = [
        Line2D([], [], ls="", marker="o", color=colors[d], label=f"$d={d}$")
        for d in ds
        if d is not None
    ]
    handles += [
        Line2D([], [], ls="", marker="o", color="0.3", label="clear"),
        Line2D([], [], ls="", marker="o", color="0.3", markerfacecolor="none", label="ambiguous"),
        ax.patches[0] if ax.patches else Line2D([], []),
    ]
    if n["floored"]:
        handles.append(Line2D([], [], ls="", marker="v", color="0.3",
                              label=f"1 − corr {below}: {style.runs(n['floored'])}"))  # fmt: skip
    if n["tiny"]:
        handles.append(Line2D([], [], ls="", marker="<", color="0.3",
                              label=f"masked prob. {below}: {style.runs(n['tiny'])}"))  # fmt: skip
    ax.legend(handles=handles, loc="upper left", ncol=2)
    ax.set_ylim(None, ax.get_ylim()[1] * 30)  # room for the legend above the runs


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E4 (docs/science.md §6): per-run data (clear / ambiguous split, scatter) from the sweep;
    the summary gives the caption's numbers only."""
    ds = _d_values(sweep)
    amb = sd.ok_values(sweep, "ambiguous")
    mmp = sd.ok_values(sweep, "max_masked_prob")
    err = 1.0 - sd.ok_values(sweep, "corr_svmeq")
    mv, ev = mmp.values.ravel(), err.values.ravel()
    okv = sd.ok_mask(sweep).values.ravel()
    extra, n = _notes(sweep, amb, mv, ev, okv)
    notes = style.notes_text(
        f"(a)-(c) median and interquartile range over the clear runs of a d with at least "
        f"{MIN_RUNS}, each run drawn where fewer",
        extra,
    )
    fig, axes = style.new_figure(2, 2, height=4.8, squeeze=False)
    colors = {d: style.PALETTE[j % len(style.PALETTE)] for j, d in enumerate(ds)}
    curve_axes = [axes[0, 0], axes[0, 1], axes[1, 0]]
    handles = _draw_curves(curve_axes, sweep, ds, sd.iterations_of(sweep), amb, colors)
    if handles:
        fig.legend(handles=handles, loc="outside upper center", ncol=len(handles))
    _draw_scatter(axes[1, 1], ds, mmp, err, amb, colors, mv, ev, okv, n)
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Final corr with the Gen-SVM parts per d, and the ambiguous runs."""
    return [
        *captions.gen_svm_lines(summary, ["d"]),
        "runs with an ambiguous softmax: " + captions.pooled_share(summary, "ambiguous"),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e4",
    label="E4: relu head and the Gen-SVM",
    what=(
        "Relu head: 1 − corr of GD with the Gen-SVM solution *W*\\ :sub:`svmeq`, its "
        "max-margin part *W*\\ :sub:`mm,gen` and the single-token SVM against the iteration "
        "(log scale), and the final 1 − corr(*W*, *W*\\ :sub:`svmeq`) against the largest "
        "masked softmax probability. The main curves (median, interquartile band) are the "
        f"clear runs, the paper's accepted runs (a *d* with fewer than {MIN_RUNS} clear runs: "
        "each run drawn; the legend gives each curve's runs); ambiguous runs (a final softmax "
        "entry in (10\\ :sup:`−6`, 10\\ :sup:`−3`)), which the paper rejects, are drawn "
        "apart (dashed median; hollow markers in the scatter). Values below "
        "10\\ :sup:`−12` are marked on the axis with their count instead of being clipped."
    ),
    look=(
        "GD should follow *W*\\ :sub:`svmeq` (smallest 1 − corr) in the clear runs; the "
        "counts of clear and ambiguous runs are in the notes."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
