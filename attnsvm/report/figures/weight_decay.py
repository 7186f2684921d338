"""Weight decay and the factorization, beyond the paper (docs/science.md §4, "Weight decay";
Kobayashi et al., NeurIPS 2024; Boncoraglio et al., arXiv 2509.24914).

Grid axes ``weight_decay`` and ``init_scale``, and ``param`` (W, KQ) or a fixed KQ with m < d.
The colour is the parameterization, the line style the initial scale. (a) How far the final
W is from a stationary point of each regularized problem (the prox residuals of
:mod:`attnsvm.gd.weight_decay`): filled markers the problem the theory assigns (W: the
Frobenius penalty, K Q^T: the nuclear one), hollow markers the other problem; median over
seeds and interquartile range (the residuals span many decades: a mean and its interval are
set by the few seeds far from stationarity, and the interval's lower end falls off the log
axis; the claims on these residuals test the median too). (b) Final correlation with the
parameterization's own Att-SVM (W: Frobenius, K Q^T: nuclear) against the weight decay: the
regularized optimum against the SVM as the decay goes to zero. (c) Effective rank of the final W.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure
from attnsvm.sweep.summary import nan_quantiles

VARIABLES = (
    "prox_residual_fro",
    "prox_residual_nuc",
    "corr_fro_alpha",
    "corr_nuc_alpha",
    "erank_gd",
)
#: the regularized problem (and Att-SVM) each parameterization's theory assigns
OWN = {"W": "fro", "KQ": "nuc"}
OTHER = {"W": "nuc", "KQ": "fro"}
#: line style per initial scale, smallest first (others: dash-dot)
SCALE_LINES = ("-", "--", ":", "-.")
#: residuals below this are drawn at it (a log axis has no 0)
RESIDUAL_FLOOR = 1e-16


def _series(sweep: xr.Dataset) -> list[tuple[str, str]]:
    """(param, label) of each parameterization drawn: W, K Q^T, or K Q^T with a fixed m."""
    m = sd.fixed_settings(sweep).get("m")
    out = []
    for p in sd.params_of(sweep):
        label = style.PARAM_LABELS.get(p, p)
        if p == "KQ" and m is not None:
            label = f"{label} ($m = {m}$)"
        out.append((p, label))
    return out


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    lams = sd.grid_values(sweep, "weight_decay")
    scales = sd.grid_values(sweep, "init_scale") or [1.0]
    x = np.asarray(lams, dtype=float)
    fixed = sd.fixed_settings(sweep)
    series = _series(sweep)
    fig, axes = style.new_figure(1, 3, height=2.6, squeeze=False)
    handles = []
    for p, label in series:
        color = style.PARAM_COLORS.get(p, style.PALETTE[2])
        handles.append(Line2D([], [], color=color, marker="o", ms=3, label=label))
        for j, scale in enumerate(scales):
            ls = SCALE_LINES[min(j, len(SCALE_LINES) - 1)]
            point = {"param": p, "init_scale": scale}
            for kind, fill in ((OWN[p], True), (OTHER[p], False)):
                mid, lo, hi = _residual_quartiles(sweep, f"prox_residual_{kind}", point)
                yerr = np.nan_to_num(np.vstack([mid - lo, hi - mid]), nan=0.0)
                axes[0, 0].errorbar(x, mid, yerr=yerr, color=color, ls=ls, marker="o", ms=3,
                                    mfc=color if fill else "none", capsize=1.5,
                                    elinewidth=0.7)  # fmt: skip
            stats = sd.pooled(summary, f"corr_{OWN[p]}_alpha", keep=("weight_decay",), **point)
            style.mean_errorbar(axes[0, 1], x, stats, clip=(-1.0, 1.0), color=color, ls=ls,
                                marker="o", ms=3)  # fmt: skip
            stats = sd.pooled(summary, "erank_gd", keep=("weight_decay",), **point)
            style.mean_errorbar(axes[0, 2], x, stats, color=color, ls=ls, marker="o", ms=3)
    axes[0, 0].set_yscale("log")
    axes[0, 0].set_ylabel("prox residual")
    style.panel_label(axes[0, 0], "a", "stationarity")
    axes[0, 1].axhline(1.0, color="0.6", lw=0.7, ls=":")
    axes[0, 1].set_ylabel("final corr with own SVM")
    style.panel_label(axes[0, 1], "b", "regularized vs SVM")
    axes[0, 2].set_ylim(bottom=0)
    axes[0, 2].set_ylabel("effective rank of $W$")
    style.panel_label(axes[0, 2], "c", "rank")
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in lams])
        ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
        ax.set_xlabel(r"weight decay $\lambda$")
    for j, scale in enumerate(scales):
        handles.append(Line2D([], [], color="0.3", ls=SCALE_LINES[min(j, len(SCALE_LINES) - 1)],
                              label=f"init scale {scale:g}"))  # fmt: skip
    handles += [
        Line2D([], [], ls="none", marker="o", ms=3, color="0.3", label="(a) own problem"),
        Line2D([], [], ls="none", marker="o", ms=3, color="0.3", mfc="none",
               label="(a) other problem"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside upper center", ncol=4, frameon=False)
    extra = [
        "(a) markers: median over seeds, bars: interquartile range (the caption's residuals "
        "are means, which the few seeds far from stationarity dominate)",
        "own problem: W runs the Frobenius penalty (λ/2)||W||_F², K Q^T runs the nuclear "
        "penalty λ||W||_* (rank ≤ m); (b) W runs against the Frobenius Att-SVM, K Q^T runs "
        "against the nuclear one, of their own selection",
        f"(a) residuals below {RESIDUAL_FLOOR:g} drawn at it; n = {fixed.get('n', '?')}, T = "
        f"{fixed.get('T', '?')}, d = {fixed.get('d', '?')}; (b, c) markers: mean over seeds",
    ]
    style.add_notes(fig, style.notes_text(f"(b, c) {style.MEAN_INTERVAL}", extra))
    return fig


def _residual_quartiles(sweep: xr.Dataset, name: str, point: dict) -> list[np.ndarray]:
    """Median, 25% and 75% quantiles over the ok seeds of ``name`` per weight decay at
    ``point`` (any other axis pooled), each at least :data:`RESIDUAL_FLOOR`."""
    values = sd.select(sd.ok_values(sweep, name), **point)
    if "weight_decay" in values.dims:
        values = values.transpose("weight_decay", ...)
    decays = len(sd.grid_values(sweep, "weight_decay"))
    per_decay = np.asarray(values.values, float).reshape(decays, -1)
    return [np.maximum(q, RESIDUAL_FLOOR) for q in nan_quantiles(per_decay, (0.5, 0.25, 0.75), 1)]


def _over_scales(da: xr.DataArray) -> float:
    """The mean of a point's means over the initial scales (NaN where none has a value)."""
    v = np.asarray(da.values, float)
    return float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")


def numbers(summary: xr.Dataset) -> list[str]:
    """Per parameterization, the residual of its own problem, of the other one and its final
    correlation with its own Att-SVM, per weight decay (means over seeds, then over the
    initial scales)."""
    pp = captions.per_point
    params = [str(p) for p in summary["param"].values] if "param" in summary.dims else ["KQ"]
    out = []
    for p in params:
        sel = {"param": p} if "param" in summary.dims else {}
        name = "W" if p == "W" else captions.KQ
        for what, var in (
            ("residual of its own problem", f"prox_residual_{OWN[p]}_mean"),
            ("residual of the other problem", f"prox_residual_{OTHER[p]}_mean"),
            ("final corr with its own Att-SVM", f"corr_{OWN[p]}_alpha_mean"),
        ):
            values = pp(summary, var, ["weight_decay"], value=_over_scales, **sel)
            out.append(f"{name} runs, {what} (mean over the initial scales): {values}")
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="weight_decay",
    label="Weight decay and the factorization",
    what=(
        "Beyond the paper, weight decay: how far the final *W* (or "
        f"{captions.KQ}) is from a stationary point of the Frobenius- and of the "
        "nuclear-regularized loss (prox residuals), its final correlation with its own "
        "Att-SVM, and its effective rank, against the weight decay, per parameterization "
        "and initial scale."
    ),
    look=(
        "Weight decay on *K* and *Q* is a nuclear-norm penalty on their product: the K Q^T "
        "runs should sit at the nuclear problem's stationary points (filled markers near 0) "
        "and far from the Frobenius one's, the W runs the other way round, at every initial "
        "scale. As the decay shrinks, the final correlation with the SVM should rise towards 1."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
