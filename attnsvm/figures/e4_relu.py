"""E4: relu head, GD vs Gen-SVM (W_svmeq), W_mm_gen and the single-token SVM.

(a)-(c): 1 - corr(W(k), .) vs iteration on a log y axis, one line per d (median over seeds,
band: interquartile range, since a mean ± std band is meaningless on a log axis).
(d): final 1 - corr(W, W_svmeq) against the largest masked softmax probability (log-log); the
ambiguous zone (1e-6, 1e-3) is shaded and ambiguous runs are drawn hollow and counted.
Runs that cannot be placed on a log axis (no masked token, undefined W_svmeq) are counted.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.figures import style

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
    return style.grid_values(sweep, "d") or [None]


def _sub(da: xr.DataArray, d) -> xr.DataArray:
    return style.select(da, d=d) if d is not None else da


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    ds = _d_values(sweep)
    x = style.iterations_of(sweep)
    ok = style.ok_mask(sweep)
    amb = style.ok_values(sweep, "ambiguous")
    n_amb = int(np.nansum(amb.values))
    n_amb_known = int(np.isfinite(amb.values).sum())
    mmp = style.ok_values(sweep, "max_masked_prob")
    err = 1.0 - style.ok_values(sweep, "corr_svmeq")
    mv, ev = mmp.values.ravel(), err.values.ravel()
    okv = ok.values.ravel()
    no_mask = int(np.sum(okv & np.isfinite(mv) & (mv <= 0)))
    undefined = int(np.sum(okv & ~np.isfinite(ev)))
    floored = int(np.sum(okv & np.isfinite(ev) & (ev < FLOOR)))
    tiny = int(np.sum(okv & np.isfinite(mv) & (mv > 0) & (mv < FLOOR)))
    undefined_curves = []
    for key, _, name in CURVES:
        c = _flat(style.ok_values(sweep, f"curve_corr_{key}"), ("checkpoint",))
        bad = int(np.sum(okv & ~np.isfinite(c).any(axis=1))) if c.size else 0
        if bad:
            undefined_curves.append(f"{name}: {bad}")
    extra = [
        f"ambiguous runs (final softmax has values in (1e-6, 1e-3)): {n_amb} of {n_amb_known} "
        "ok runs, kept and drawn hollow in (d)",
        (
            f"(d): {style.runs(no_mask)} without a masked token (all tokens relevant); "
            f"{style.runs(undefined)} with undefined corr(W, W_svmeq) (not drawn); "
            f"{style.runs(tiny)} with max masked prob < {FLOOR:g} and {style.runs(floored)} with "
            f"1 - corr < {FLOOR:g} drawn at {FLOOR:g}"
        ),
    ]
    if undefined_curves:
        extra.append(
            "runs without a curve (undefined SVM, excluded from (a)-(c)): "
            + ", ".join(undefined_curves)
        )
    footer = style.footer_text(sweep, band="median, interquartile range", extra=extra)
    fig, axes = style.new_figure(
        2, 2, height=4.6, footer_lines=style.footer_lines(footer), squeeze=False
    )
    colors = {d: style.PALETTE[j % len(style.PALETTE)] for j, d in enumerate(ds)}
    curve_axes = [axes[0, 0], axes[0, 1], axes[1, 0]]
    for letter, ax, title, (key, ylabel, _) in zip("abc", curve_axes, TITLES, CURVES, strict=True):
        for d in ds:
            c = _flat(_sub(style.ok_values(sweep, f"curve_corr_{key}"), d), ("checkpoint",))
            if c.size == 0:
                continue
            style.plot_band(
                ax,
                x,
                np.maximum(1.0 - c, FLOOR),
                colors[d],
                label=f"$d={d}$" if d is not None else None,
                stat="median",
                marker="o",
                ms=2,
            )
        ax.set_yscale("log")
        style.plain_log_axis(ax)
        ax.set_xlabel("iteration $k$")
        ax.set_ylabel(ylabel)
        style.panel_label(ax, letter, title)
        if len(ds) > 1 or ds[0] is not None:
            style.legend(ax, loc="best", ncol=2)
    ax = axes[1, 1]
    ax.axvspan(1e-6, 1e-3, color="0.9", zorder=0, label="ambiguous zone $(10^{-6}, 10^{-3})$")
    for d in ds:
        m = _sub(mmp, d).values.ravel()
        e = _sub(err, d).values.ravel()
        a = _sub(amb, d).values.ravel() > 0
        keep = np.isfinite(m) & np.isfinite(e) & (m > 0)
        m, e = np.maximum(m, FLOOR), np.maximum(e, FLOOR)
        for flag in (False, True):
            sel = keep & (a == flag)
            if sel.any():
                ax.scatter(
                    m[sel],
                    e[sel],
                    s=16,
                    color=colors[d],
                    linewidths=1.0,
                    facecolors="none" if flag else colors[d],
                    zorder=3,
                )
    if tiny:
        ax.axvline(FLOOR, color="0.6", lw=0.6, ls=":", zorder=1)
        ax.annotate(
            rf"$\leq 10^{{{int(np.log10(FLOOR))}}}$",
            (FLOOR, 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            fontsize=6,
            color="0.4",
            va="top",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    style.plain_log_axis(ax)
    ax.set_xlabel(r"largest masked softmax probability at $k_{\max}$")
    ax.set_ylabel(rf"final $1-\mathrm{{corr}}(W, {style.W_SVMEQ})$")
    style.panel_label(ax, "d", f"ambiguous: {n_amb} of {n_amb_known} runs")
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
    ax.legend(handles=handles, loc="best", ncol=2)
    style.add_footer(fig, footer)
    return fig
