"""Multi-head attention vs the number of heads H (docs/science.md §12).

Grid axes ``heads`` and ``param`` (W, KQ), optionally ``d``; colour: the parameterization (or
d, when d is an axis, W solid and KQ dashed). (a) share of runs whose combined model converges
globally (every head selects opt; the E6 class of §12) with its Clopper-Pearson interval,
filled; hollow and dotted: the mean share of heads that select opt. (b) mean over seeds of the
smallest per-head corr(W_h, SVM(alpha_h)), filled; hollow and dotted: the stacked corr with the
stacked SVM. (c) mean share of examples on which all heads select the same token. Means carry
their confidence intervals. One head (H = 1) is the single-head cell of §2-5: its per-head
values are its own (corr_matching, alpha_is_opt, agreement 1), read from the same sweep.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "convergence", "corr_matching", "head_corr_min", "head_agreement", "head_global_share",
    "alpha_is_opt",
)  # fmt: skip
LINES = {"W": "-", "KQ": "--"}
#: line style of the second curve of a panel (share of heads selecting opt; stacked corr)
SECOND = ":"


def per_run(sweep: xr.Dataset, name: str) -> xr.DataArray:
    """``name`` of every ok run, with the single-head value where a cell has one head
    (head_corr_min: its corr_matching; head_global_share: alpha_is_opt; head_agreement: 1)."""
    x = sd.ok_values(sweep, name)
    heads = sweep["heads"] if "heads" in sweep.coords else xr.DataArray(1)
    single = {"head_corr_min": "corr_matching", "head_global_share": "alpha_is_opt"}
    one = sd.ok_values(sweep, single[name]) if name in single else 1.0
    return xr.where((heads == 1) & sd.ok_mask(sweep), one, x)


def global_counts(sweep: xr.Dataset) -> tuple[xr.DataArray, xr.DataArray]:
    """Per grid point: classified ok runs whose combined model converges globally, and the
    classified ok runs."""
    conv = sd.ok_values(sweep, "convergence")
    has = (conv >= 0).sum("seed")
    glob = (conv == codes.CONVERGENCE.index("global")).sum("seed")
    return glob, has


def global_share(sweep: xr.Dataset) -> xr.DataArray:
    """Share of classified ok runs whose combined model converges globally, per grid point."""
    glob, has = global_counts(sweep)
    return glob / has.where(has > 0)


def _stats(da: xr.DataArray, **point) -> tuple[float, float, int]:
    """(mean, std, count) over the seeds with a value of ``da`` at ``point``."""
    v = np.asarray(sd.select(da, **point).values, float).ravel()
    v = v[np.isfinite(v)]
    return (float(v.mean()) if v.size else np.nan,
            float(v.std(ddof=1)) if v.size > 1 else np.nan, v.size)  # fmt: skip


def _style(p: str, j: int, d_values: list) -> tuple:
    """(colour, line style) of the series (param, j-th d)."""
    if len(d_values) > 1:
        return style.PALETTE[(j + 2) % len(style.PALETTE)], LINES.get(p, "-")
    return style.PARAM_COLORS.get(p, style.PALETTE[4]), LINES.get(p, "-")


def _series(ax, values, heads, params, d_values, second=False, share=False, clip=None) -> None:
    """One line per (param, d) vs H: ``values(p, h, d)`` gives (mean, std, count), or with
    ``share`` (successes, count); ``second``: hollow markers, dotted; ``clip``: the range of
    the values (intervals are clipped to it)."""
    n = len(params) * len(d_values)
    k = n if second else 0  # the second quantity's points right of the first's
    shift = np.exp2(style.dodge(2 * n, 0.2))
    for p in params:
        for j, d in enumerate(d_values):
            color, ls = _style(p, j, d_values)
            cols = list(zip(*(values(p, h, d) for h in heads), strict=True))
            kw = dict(ls=SECOND if second else ls, marker="o", ms=3, color=color,
                      mfc="white" if second else color)  # fmt: skip
            x = np.asarray(heads, float) * shift[k]
            if share:
                style.share_errorbar(ax, x, cols[0], cols[1], **kw)
            else:
                style.mean_errorbar(ax, x, cols, clip=clip, **kw)
            k += 1
    ax.set_xscale("log", base=2)
    ax.set_xticks(heads)
    ax.set_xticklabels([str(h) for h in heads])
    ax.minorticks_off()
    ax.set_xlabel("heads $H$")


def _legend(fig, params, d_values) -> None:
    handles = []
    for p in params:
        for j, d in enumerate(d_values):
            color, ls = _style(p, j, d_values)
            label = style.PARAM_LABELS.get(p, p) + (f", $d = {d}$" if len(d_values) > 1 else "")
            handles.append(Line2D([], [], ls=ls, marker="o", ms=3, color=color, label=label))
    handles.append(Line2D([], [], ls=SECOND, marker="o", ms=3, color="0.3", mfc="white",
                          label="hollow, dotted: the second quantity of (a), (b)"))  # fmt: skip
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles))


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a) global share, (b) per-head and stacked corr, (c) head agreement, all vs H."""
    params = sd.params_of(sweep)
    heads = [int(h) for h in sd.grid_values(sweep, "heads")] or [1]
    d_values = sd.grid_values(sweep, "d") or [None]
    extra = [
        "(a) filled: share of the runs in which every head selects opt on every example; "
        "hollow: mean share of the heads that select opt on every example; (b) filled: "
        "smallest per-head corr(W_h, SVM(α_h)) (Frobenius for W, nuclear for KQ), hollow: "
        "stacked heads vs the stacked SVM; H = 1: the single-head run; the points of one H "
        "are set slightly apart",
    ]
    notes = style.notes_text(
        f"means: {style.MEAN_INTERVAL}; (a) filled shares: {style.SHARE_INTERVAL}", extra
    )
    fig, axes = style.new_figure(1, 3, height=2.7, squeeze=False)
    ax = axes[0]
    glob, has = global_counts(sweep)
    head_share = per_run(sweep, "head_global_share")
    corr_min = per_run(sweep, "head_corr_min")
    stacked = sd.ok_values(sweep, "corr_matching")
    agree = per_run(sweep, "head_agreement")

    def at(da):
        return lambda p, h, d: _stats(da, param=p, heads=h, d=d)

    _series(ax[0], lambda p, h, d: (float(sd.select(glob, param=p, heads=h, d=d)),
                                     float(sd.select(has, param=p, heads=h, d=d))),
            heads, params, d_values, share=True)  # fmt: skip
    _series(ax[0], at(head_share), heads, params, d_values, second=True, clip=(0.0, 1.0))
    ax[0].set_ylabel("share of global runs")
    ax[0].set_ylim(-0.05, 1.05)
    style.panel_label(ax[0], "a", "global convergence")
    _series(ax[1], at(corr_min), heads, params, d_values, clip=(-1.0, 1.0))
    _series(ax[1], at(stacked), heads, params, d_values, second=True, clip=(-1.0, 1.0))
    ax[1].set_ylabel("mean corr with SVM")
    style.panel_label(ax[1], "b", "heads vs their SVMs")
    _series(ax[2], at(agree), heads, params, d_values, clip=(0.0, 1.0))
    ax[2].set_ylabel("examples where heads agree")
    ax[2].set_ylim(-0.05, 1.05)
    style.panel_label(ax[2], "c", "same token in every head")
    _legend(fig, params, d_values)
    style.add_notes(fig, notes)
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
        "stacked corr, (c) share of examples on which the heads select the same token; means "
        f"with their {style.CI_WORDS}, the share of (a) with its {style.CP_WORDS}."
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
