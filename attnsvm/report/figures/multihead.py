"""Multi-head attention vs the number of heads H (docs/science.md §12).

Grid axes ``heads`` and ``param`` (W, KQ), optionally ``d``; W solid, KQ dashed. (a) share of
runs whose combined model converges globally (every head selects opt; the E6 class of §12), one
line per (param, d); hollow markers: the share of heads that select opt. (b) mean over seeds of the
smallest per-head corr(W_h, SVM(alpha_h)), and hollow the stacked corr with the stacked SVM.
(c) mean share of examples on which all heads select the same token. One head (H = 1) is the
single-head cell of §2-5: its per-head values are its own (corr_matching, alpha_is_opt,
agreement 1), read from the same sweep.
"""

from __future__ import annotations

import seaborn as sns
import xarray as xr

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "convergence", "corr_matching", "head_corr_min", "head_agreement", "head_global_share",
    "alpha_is_opt",
)  # fmt: skip
LINES = {"W": "-", "KQ": "--"}
#: the second curve of a panel (share of heads selecting opt; stacked corr)
SECOND = {"W": ":", "KQ": "-."}


def per_run(sweep: xr.Dataset, name: str) -> xr.DataArray:
    """``name`` of every ok run, with the single-head value where a cell has one head
    (head_corr_min: its corr_matching; head_global_share: alpha_is_opt; head_agreement: 1)."""
    x = sd.ok_values(sweep, name)
    heads = sweep["heads"] if "heads" in sweep.coords else xr.DataArray(1)
    single = {"head_corr_min": "corr_matching", "head_global_share": "alpha_is_opt"}
    one = sd.ok_values(sweep, single[name]) if name in single else 1.0
    return xr.where((heads == 1) & sd.ok_mask(sweep), one, x)


def global_share(sweep: xr.Dataset) -> xr.DataArray:
    """Share of classified ok runs whose combined model converges globally, per grid point."""
    conv = sd.ok_values(sweep, "convergence")
    has = (conv >= 0).sum("seed")
    glob = (conv == codes.CONVERGENCE.index("global")).sum("seed")
    return glob / has.where(has > 0)


def _lines(ax, da: xr.DataArray, heads: list, params: list, d_values: list, second=False):
    """One line per (param, d) of ``da`` vs H; ``second``: the panel's second curve."""
    shades = sns.color_palette("viridis", len(d_values))
    for p in params:
        for j, d in enumerate(d_values):
            color = shades[j] if len(d_values) > 1 else style.PARAM_COLORS.get(p, "C0")
            y = [float(sd.select(da, param=p, heads=h, d=d)) for h in heads]
            label = f"{p}" + (f", d = {d}" if len(d_values) > 1 else "")
            ls = (SECOND if second else LINES).get(p, "-")
            mfc = "white" if second else color
            ax.plot(heads, y, ls=ls, marker="o", ms=3, color=color, mfc=mfc,
                    label=None if second else label)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xticks(heads)
    ax.set_xticklabels([str(h) for h in heads])
    ax.set_xlabel("heads $H$")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a) global share, (b) per-head and stacked corr, (c) head agreement, all vs H."""
    params = sd.params_of(sweep)
    heads = [int(h) for h in sd.grid_values(sweep, "heads")] or [1]
    d_values = sd.grid_values(sweep, "d") or [None]
    extra = [
        "(a) global: every head selects opt on every example; hollow markers: share of the heads "
        "that select opt on every example; W solid (hollow: dotted), KQ dashed (hollow: dash-dot); "
        "(b) filled: smallest per-head corr(W_h, SVM(α_h)) (Frobenius for W, nuclear for KQ), "
        "hollow: stacked heads vs the stacked SVM; H = 1: the single-head run",
    ]
    footer = style.footer_text(sweep, band=None, extra=extra, unit="point (heads, param, d)")
    fig, axes = style.new_figure(
        1, 3, height=2.6, footer_lines=style.footer_lines(footer), squeeze=False
    )
    ax = axes[0]
    _lines(ax[0], global_share(sweep), heads, params, d_values)
    _lines(ax[0], per_run(sweep, "head_global_share").mean("seed"), heads, params, d_values,
           second=True)  # fmt: skip
    ax[0].set_ylabel("share of global runs")
    ax[0].set_ylim(-0.03, 1.05)
    style.panel_label(ax[0], "a", "global convergence")
    _lines(ax[1], per_run(sweep, "head_corr_min").mean("seed"), heads, params, d_values)
    _lines(ax[1], sd.ok_values(sweep, "corr_matching").mean("seed"), heads, params, d_values,
           second=True)  # fmt: skip
    ax[1].set_ylabel("mean corr with SVM")
    style.panel_label(ax[1], "b", "heads vs their SVMs")
    _lines(ax[2], per_run(sweep, "head_agreement").mean("seed"), heads, params, d_values)
    ax[2].set_ylabel("examples where heads agree")
    ax[2].set_ylim(-0.03, 1.05)
    style.panel_label(ax[2], "c", "same token in every head")
    fig.legend(*ax[0].get_legend_handles_labels(), loc="outside right center")
    style.add_footer(fig, footer)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Caption numbers of this run: global share, per-head corr and agreement per point."""
    out = []
    for p in captions.params(summary):
        glob = summary["count_convergence"].sel(convergence="global")
        total = summary["count_convergence"].sum("convergence")
        share = (glob / total.where(total > 0)).rename("share")
        share = share.sel(param=p) if "param" in share.dims else share
        out.append(
            f"share of *{p}* runs converging globally: "
            + captions.per_point(share.to_dataset(), "share", ["heads", "d"])
        )
        for var, words in (
            ("head_corr_min_mean", "mean smallest per-head corr with its own SVM"),
            ("corr_matching_mean", "mean corr of the stacked heads with the stacked SVM"),
            ("head_agreement_mean", "mean share of examples where all heads agree"),
            ("head_global_share_mean", "mean share of heads selecting opt everywhere"),
        ):
            text = captions.per_point(summary, var, ["heads", "d"], param=p)
            out.append(f"{words} (*{p}*; n/a at H = 1, a single head): {text}")
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="multihead",
    label="Multi-head attention",
    what=(
        "Versus the number of heads *H* (outputs averaged through the fixed head *v*, stacked "
        "normalized GD): (a) share of runs whose heads all select the optimal tokens, "
        "(b) smallest per-head corr with the Att-SVM of the head's own selection and the "
        "stacked corr, (c) share of examples on which the heads select the same token."
    ),
    look=(
        "Each head should align with the SVM of its own selection (corr near 1); whether the "
        "heads split the examples' selections shows in (c), and whether more heads help "
        "global convergence in (a)."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
