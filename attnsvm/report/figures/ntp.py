"""Next-token prediction (docs/science.md §8; Li et al., arXiv 2403.08081), beyond the paper
of §6: GD on 1-layer self-attention with the cross-entropy of next-token prediction, on
acyclic, cyclic and text-derived token-priority graphs (grid axis ``generator``).

(a) corr(W(k), W_svm) (solid; band: the mean's confidence interval) and corr(W(k), W_fin +
R(k) W_svm/||W_svm||) (dashed, mean) over seeds vs iteration; (b) ||Pi_{S_fin} W(k) -
W_fin||_F, median and IQR (log y; over the datasets with a cyclic SCC: NaN where S_fin = {0});
(c) SCCs per dataset: cyclic SCCs and the largest SCC size (mean over seeds and its confidence
interval).
"""

from __future__ import annotations

import itertools

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.config.cell import Cell
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "curve_corr_ntp_svm",
    "curve_corr_ntp_pred",
    "curve_fin_dist",
    "ntp_cyclic_sccs",
    "ntp_largest_scc",
    "ntp_acyclic",
    "feasible_ntp_svm",
    "feasible_ntp_fin",
)
LABELS = {"ntp_acyclic": "acyclic", "ntp_cyclic": "cyclic", "ntp_text": "text (stdlib)"}
#: the paper's alignment level on acyclic graphs (docs/science.md §8)
CLAIM = 0.99


def _generators(sweep_or_summary: xr.Dataset) -> list[str]:
    vals = (
        sd.grid_values(sweep_or_summary, "generator")
        if "generator" in sweep_or_summary.dims
        else []
    )
    if vals:
        return [str(v) for v in vals]
    return [str(sweep_or_summary.attrs.get("fixed_generator", "ntp_acyclic"))]


def _notes(sweep: xr.Dataset) -> list[str]:
    out = []
    for g in _generators(sweep):
        parts = []
        for name, what in (("feasible_ntp_svm", "W_svm"), ("feasible_ntp_fin", "W_fin")):
            v = np.asarray(sd.select(sd.ok_values(sweep, name), generator=g).values).ravel()
            parts.append(f"{what} certified in {int(np.nansum(v == 1))} of {v.size}")
        out.append(f"{LABELS.get(g, g)}: " + ", ".join(parts))
    return out


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Bands over the ok seeds, from the summary (docs/science.md §8)."""
    x = sd.iterations_of(sweep)
    gens = _generators(sweep)
    notes = style.notes_text(
        f"(a, c) {style.MEAN_INTERVAL}; (b) median and interquartile range over seeds",
        _notes(sweep),
    )
    fig, axes = style.new_figure(1, 3, height=2.6)
    ax_c, ax_f, ax_s = axes
    for i, g in enumerate(gens):
        color = style.PALETTE[i % len(style.PALETTE)]
        stats = sd.pooled(summary, "curve_corr_ntp_svm", generator=g)
        style.mean_band(ax_c, x, stats, color, label=LABELS.get(g, g), clip=(-1.0, 1.0))
        pred = sd.pooled(summary, "curve_corr_ntp_pred", generator=g)
        ax_c.plot(x, pred[0], color=color, linestyle="--", lw=1.0)
        if "curve_fin_dist_q50" in summary:
            med, lo, hi = sd.quantile_band(summary, "curve_fin_dist", generator=g)
            if np.nanmax(med, initial=0.0) > 0:
                ax_f.plot(x, med, color=color, label=LABELS.get(g, g))
                ax_f.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
    ax_c.axhline(CLAIM, color="0.6", lw=0.5, ls=":")
    ax_c.set_xscale("log")
    ax_c.set_xlabel("iteration $k$")
    ax_c.set_ylabel("corr")
    style.panel_label(ax_c, "a", "direction")
    styles = [
        Line2D([], [], color="0.3", label=r"(a) corr with $W_{svm}$"),
        Line2D([], [], color="0.3", ls="--", lw=1.0, label=r"(a) with $W_{fin} + R\,\hat W_{svm}$"),
    ]
    ax_f.set_xscale("log")
    ax_f.set_yscale("log")
    if not ax_f.get_lines():
        ax_f.set_ylim(1e-3, 1.0)  # acyclic only: S_fin = {0}, nothing to draw
    ax_f.set_xlabel("iteration $k$")
    ax_f.set_ylabel(r"$\|\Pi_{S_{fin}} W(k) - W_{fin}\|_F$")
    style.panel_label(ax_f, "b", "finite part vs $W_{fin}$")
    # one legend above the panels for (a) and (b), never across a curve (the graphs share
    # their colours in both panels)
    style.outside_legend(fig, [ax_c, ax_f], loc="outside upper center", ncol=5, extra=styles)
    _scc_bars(ax_s, summary, gens)
    style.add_notes(fig, notes)
    return fig


def _scc_bars(ax, summary: xr.Dataset, gens: list[str]) -> None:
    pos = np.arange(len(gens))
    for j, (name, label) in enumerate(
        (("ntp_cyclic_sccs", "cyclic SCCs"), ("ntp_largest_scc", "largest SCC size"))
    ):
        stats = [sd.pooled(summary, name, generator=g) for g in gens]
        m, s, c = (np.asarray([float(np.ravel(x[i])[0]) for x in stats]) for i in range(3))
        lo, hi = style.mean_interval(m, s, c)
        err = np.nan_to_num(np.vstack([m - lo, hi - m]), nan=0.0)
        ax.bar(pos + (j - 0.5) * 0.38, m, 0.38, yerr=err, color=style.PALETTE[3 + j],
               label=label, error_kw={"elinewidth": 0.8, "capsize": 1.5})  # fmt: skip
    ax.set_xticks(pos, [LABELS.get(g, g) for g in gens])
    ax.set_ylim(0, 1.4 * max(ax.get_ylim()[1], 1.0))
    ax.set_ylabel("per dataset (mean)")
    style.panel_label(ax, "c", "strongly connected components")
    style.legend(ax, loc="upper left")


def _final(summary: xr.Dataset, name: str, g: str, p: str = "W") -> float:
    if name not in summary:
        return float("nan")
    da = sd.select(summary[name], generator=g, param=p)
    da = captions.last(da)
    return float(da.mean()) if da.size else float("nan")


def numbers(summary: xr.Dataset) -> list[str]:
    """Final correlations, distance to W_fin and SCC counts per graph kind, each with whether
    it agrees with the theory (docs/science.md §8)."""
    out = []
    for g, p in itertools.product(_generators(summary), captions.params(summary)):
        corr = _final(summary, "curve_corr_ntp_svm_mean", g, p)
        lo = _final(summary, "curve_corr_ntp_svm_q25", g, p)
        pred = _final(summary, "curve_corr_ntp_pred_mean", g, p)
        dist = _final(summary, "curve_fin_dist_mean", g, p)
        sccs = _final(summary, "ntp_cyclic_sccs_mean", g, p)
        big = _final(summary, "ntp_largest_scc_mean", g, p)
        acyc = _final(summary, "ntp_acyclic_mean", g, p)
        line = (
            f"*{LABELS.get(g, g)}* graphs, *{p}* runs: final corr(*W*, *W*\\ :sub:`svm`) mean "
            f"{captions.fmt(corr)} (lower quartile {captions.fmt(lo)}), with *W*\\ :sub:`fin` "
            f"+ *R* *Ŵ*\\ :sub:`svm` {captions.fmt(pred)}; "
            f"‖Π *W* − *W*\\ :sub:`fin`‖ {captions.fmt(dist)}; cyclic SCCs per dataset "
            f"{captions.fmt(sccs)}, largest SCC {captions.fmt(big)} tokens, acyclic share "
            f"{captions.fmt(acyc)}"
        )
        if np.isfinite(acyc) and acyc == 1.0 and np.isfinite(corr):
            verdict = "meets" if corr >= CLAIM else "misses"
            line += f" — {verdict} the paper's alignment claim (corr ≥ {CLAIM})"
        elif np.isfinite(pred) and np.isfinite(corr):
            better = "adds to" if pred > corr else "does not add to"
            lr = float(summary.attrs.get("fixed_lr", Cell.lr))
            near = "within" if dist <= lr else "farther than"
            line += (
                f" — the projection settles {near} the step lr = {lr:g} of W_fin, and W_fin "
                f"{better} the SVM direction's fit"
            )
        out.append(line)
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("ntp",)

FIGURE = Figure(
    name="ntp",
    label="next-token prediction",
    what=(
        "Beyond the paper, next-token prediction (Li et al., arXiv 2403.08081; "
        "docs/science.md §8): corr of the GD iterate with the NTP-SVM *W*\\ :sub:`svm` of the "
        "token-priority graphs and with *W*\\ :sub:`fin` + *R* *Ŵ*\\ :sub:`svm`, the "
        "distance of its projection on the cyclic subspace to *W*\\ :sub:`fin`, and the "
        "strongly connected components of the graphs, for acyclic, cyclic and "
        "text-derived (Python standard library) graphs."
    ),
    look=(
        "On acyclic graphs corr(*W*, *W*\\ :sub:`svm`) should exceed 0.99 (the paper's claim); "
        "on cyclic ones the projection should settle near *W*\\ :sub:`fin` (within the step "
        "of normalized GD) and *W*\\ :sub:`fin` + *R* *Ŵ*\\ :sub:`svm` should fit at least "
        "as well as the SVM direction alone."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
