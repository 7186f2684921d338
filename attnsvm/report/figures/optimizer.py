"""Optimizer ablation: normalized vs plain GD and the step size, beyond the paper
(docs/science.md §6, "Beyond the paper"; §3 for the two optimizers).

Grid axes ``optimizer`` (normalized, plain), ``lr`` and ``param`` (W, KQ). (a, b) mean
corr(W(k), matching SVM(alpha)) vs iteration per (optimizer, lr): normalized solid, plain
dashed, darker = larger lr; each (optimizer, lr) keeps its colour in every panel. (c) whether
the limit direction changes: mean over seeds of corr(W_final(setting), W_final(reference))
with the reference normalized GD at the middle lr (bars; KQ hatched), and the share of seeds
whose final selection alpha equals the reference's (dots). One legend, outside the panels.
"""

from __future__ import annotations

import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("curve_corr_fro_alpha", "curve_corr_nuc_alpha", "W", "alpha", "convergence")
MATCH = {"W": "fro", "KQ": "nuc"}
OPT_STYLE = {"normalized": ("-", "Blues"), "plain": ("--", "Oranges")}


def _final_dirs(sweep: xr.Dataset, **point) -> np.ndarray:
    """(seed, d*d) unit final W per seed (NaN rows for non-ok cells)."""
    W = sd.select(sweep["W"].where(sd.ok_mask(sweep)), **point).isel(checkpoint=-1)
    W = np.asarray(W.transpose("seed", ...).values, float).reshape(W.sizes["seed"], -1)
    nrm = np.linalg.norm(np.nan_to_num(W), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nrm > 0, W / nrm, np.nan)


def setting_colors(opts: list[str], lrs: list[float]) -> dict[tuple[str, float], tuple]:
    """One colour per (optimizer, lr), the same in every panel: hue = optimizer, shade = lr."""
    out = {}
    for o in opts:
        cmap = OPT_STYLE.get(o, ("-", "Greys"))[1]
        shades = sns.color_palette(cmap, len(lrs) + 2)[2:]
        out.update({(o, lr): shades[j] for j, lr in enumerate(lrs)})
    return out


PARAM_HATCH = {"W": "", "KQ": "////"}


def _draw_curves(ax, summary: xr.Dataset, p: str, opts, lrs, it, colors) -> None:
    """(a, b) mean corr with the matching SVM(α) per (optimizer, lr), from the summary."""
    for o in opts:
        ls = OPT_STYLE.get(o, ("-", "Greys"))[0]
        for lr in lrs:
            name = f"curve_corr_{MATCH[p]}_alpha"
            mean, _, _ = sd.pooled(summary, name, param=p, optimizer=o, lr=lr)
            ax.plot(it, mean, color=colors[(o, lr)], ls=ls, label=f"{o}, lr = {lr:g}")
    ax.set_xscale("log")
    ax.axhline(1.0, color="0.6", lw=0.5)
    ax.set_xlabel("iteration $k$")
    ax.set_ylabel(r"mean corr with SVM($\alpha$)")


def _versus_reference(sweep: xr.Dataset, p: str, settings, ref_opt, ref_lr):
    """Per setting: mean over seeds of corr(final W, reference's final W), and the share of
    seeds whose final selection α equals the reference's (per-seed pairs: from the sweep)."""
    ref = _final_dirs(sweep, param=p, optimizer=ref_opt, lr=ref_lr)
    ref_alpha = sd.select(sweep["alpha"], param=p, optimizer=ref_opt, lr=ref_lr)
    corr_mean, same = [], []
    for o, lr in settings:
        cur = _final_dirs(sweep, param=p, optimizer=o, lr=lr)
        c = np.nansum(cur * ref, axis=1)
        c[~(np.isfinite(cur).all(1) & np.isfinite(ref).all(1))] = np.nan
        corr_mean.append(np.nanmean(c) if np.isfinite(c).any() else np.nan)
        a = sd.select(sweep["alpha"], param=p, optimizer=o, lr=lr)
        eq = (a == ref_alpha).all([dim for dim in a.dims if dim != "seed"])
        same.append(float(eq.mean()))
    return corr_mean, same


def _draw_reference(ax, sweep, params, settings, ref_opt, ref_lr, colors) -> None:
    """(c) bars: mean corr of final directions with the reference; dots: same-α share."""
    width = 0.8 / max(len(params), 1)
    for k, p in enumerate(params):
        corr_mean, same = _versus_reference(sweep, p, settings, ref_opt, ref_lr)
        x = np.arange(len(settings)) + (k - (len(params) - 1) / 2) * width
        ax.bar(x, corr_mean, width=width, color=[colors[s] for s in settings],
               hatch=PARAM_HATCH.get(p, ""),
               edgecolor="white" if PARAM_HATCH.get(p) else "none", linewidth=0.0)  # fmt: skip
        ax.plot(x, same, ls="none", marker="o", ms=3, color="0.1", markerfacecolor="white")
    ax.set_xticks(np.arange(len(settings)))
    ax.set_xticklabels([f"{'N' if o == 'normalized' else 'P'}\n{lr:g}" for o, lr in settings])
    ax.set_xlabel("optimizer (N normalized, P plain), lr")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("vs reference")
    style.panel_label(ax, "c", "final direction vs reference")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a, b) from the summary; (c) compares final directions seed by seed (the sweep)."""
    params = sd.params_of(sweep)
    opts = [str(v) for v in sd.grid_values(sweep, "optimizer")] or ["normalized"]
    lrs = sorted(float(v) for v in sd.grid_values(sweep, "lr")) or [0.1]
    ref_lr = lrs[len(lrs) // 2]
    ref_opt = "normalized" if "normalized" in opts else opts[0]
    it = sd.iterations_of(sweep)
    colors = setting_colors(opts, lrs)
    extra = [
        "(a, b) solid: normalized GD, dashed: plain GD, darker: larger step size; corr with the "
        "SVM of the run's own final selection α (Frobenius for W, nuclear for KQ); each "
        "(optimizer, step size) has the same colour in every panel",
        f"(c) reference: {ref_opt} GD, lr = {ref_lr:g}; bars: mean corr of final directions "
        "over seeds (W plain, KQ hatched), dots: share of seeds with the same α as the reference",
    ]
    footer = style.footer_text(sweep, extra=extra, unit="point (param, optimizer, lr)")
    fig, axes = style.new_figure(
        1, 3, height=2.6, footer_lines=style.footer_lines(footer), squeeze=False
    )
    for k, p in enumerate(params[:2]):
        _draw_curves(axes[0, k], summary, p, opts, lrs, it, colors)
        style.panel_label(axes[0, k], "ab"[k], f"{style.PARAM_LABELS.get(p, p)} runs")
    settings = [(o, lr) for o in opts for lr in lrs]
    _draw_reference(axes[0, 2], sweep, params, settings, ref_opt, ref_lr, colors)
    _legends(fig, axes[0, 0], params)
    style.add_footer(fig, footer)
    return fig


def _legends(fig, ax, params: list[str]) -> None:
    """One legend outside the panels: the settings' lines, then what the bars and dots are."""

    handles, labels = ax.get_legend_handles_labels()
    handles += [
        Patch(facecolor="0.6", hatch=PARAM_HATCH.get(p, ""), edgecolor="white", label=f"(c) {p}")
        for p in params
    ]
    handles.append(
        Line2D([], [], ls="none", marker="o", ms=3, color="0.1", markerfacecolor="white")
    )
    labels += [f"(c) {p} runs: corr" for p in params] + [r"(c) same $\alpha$ share"]
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=6)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="optimizer",
    label="optimizer ablation",
    what=(
        "Beyond the paper, optimizer ablation: mean corr with the matching SVM of the run's "
        "selection against the iteration for normalized and plain GD at several step sizes, "
        "and the final direction of every setting against normalized GD at the middle step."
    ),
    look=(
        "Normalized GD should converge fast; plain GD more slowly (its gradient vanishes as "
        "the softmax saturates) but towards the same direction."
    ),
    plot=plot,
    numbers=lambda summary: captions.corr_lines(summary),
    variables=VARIABLES,
)
