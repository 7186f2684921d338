"""E6: shares of convergence types (global / local / not-local / unsaturated) vs d.

One panel per parameterization (W, KQ); one stacked bar per d with the shares over the ok
runs that have a convergence type. Runs without one (non-ok cells, not applicable) are
counted in the footer and the number of classified runs is written above each bar.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.figures import style

VARIABLES = ("convergence",)


def _counts(sweep: xr.Dataset, param: str, d_values: list) -> np.ndarray:
    """(d, type) counts of convergence types over ok runs."""
    conv = style.select(style.ok_values(sweep, "convergence"), param=param)
    out = np.zeros((len(d_values), len(codes.CONVERGENCE)), dtype=int)
    for i, d in enumerate(d_values):
        v = np.asarray((style.select(conv, d=d) if d is not None else conv).values).ravel()
        for k in range(len(codes.CONVERGENCE)):
            out[i, k] = int(np.sum(v == k))
    return out


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    params = style.params_of(sweep)
    d_values = style.grid_values(sweep, "d") or [None]
    counts = {p: _counts(sweep, p, d_values) for p in params}
    n_ok = int(style.ok_mask(sweep).sum())
    classified = sum(int(c.sum()) for c in counts.values())
    fixed = style.fixed_settings(sweep)
    thr = fixed.get("corr_threshold", 0.99)
    tol = fixed.get("saturation_tol", 1e-3)
    extra = [
        f"ok runs without a convergence type (n/a): {n_ok - classified}; bars: share of the "
        "classified ok runs, number above each bar",
        f"global: α = opt and corr ≥ {thr:g}; local: α ≠ opt locally optimal, corr ≥ {thr:g}; "
        f"not-local: neither; unsaturated: min_i max_t s_it < 1 - {tol:g}. "
        "SVM: Frobenius for W, nuclear for KQ",
    ]
    footer = style.footer_text(sweep, band=None, extra=extra, unit="bar")
    fig, axes = style.new_figure(
        1,
        len(params),
        height=2.7,
        footer_lines=style.footer_lines(footer),
        squeeze=False,
        sharey=True,
    )
    xpos = np.arange(len(d_values))
    for j, (ax, p) in enumerate(zip(axes[0], params, strict=True)):
        c = counts[p]
        total = c.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total[:, None] > 0, c / np.maximum(total[:, None], 1), 0.0)
        bottom = np.zeros(len(d_values))
        for k, name in enumerate(codes.CONVERGENCE):
            ax.bar(
                xpos,
                share[:, k],
                bottom=bottom,
                width=0.72,
                color=style.CONVERGENCE_COLORS[name],
                label=name,
                edgecolor="white",
                linewidth=0.5,
            )
            bottom += share[:, k]
        for x, t in zip(xpos, total, strict=True):
            ax.text(
                x,
                1.01,
                f"{t}" if t else "no data",
                ha="center",
                va="bottom",
                fontsize=6,
                color="0.35",
            )
        ax.set_xticks(xpos)
        ax.set_xticklabels([str(d) for d in d_values])
        ax.set_xlabel("$d$")
        ax.set_ylim(0, 1.08)
        ax.set_yticks(np.linspace(0, 1, 6))
        style.panel_label(ax, "abcdefgh"[j], f"{style.PARAM_LABELS.get(p, p)} runs")
        if j == 0:
            ax.set_ylabel("share of runs")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", title="convergence type")
    style.add_footer(fig, footer)
    return fig
