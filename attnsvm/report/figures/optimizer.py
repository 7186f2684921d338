"""Optimizer ablation: normalized vs plain GD and the step size, beyond the paper
(docs/science.md §6, "Beyond the paper"; §3 for the two optimizers).

Grid axes ``optimizer`` (normalized, plain), ``lr`` and ``param`` (W, KQ). (a, b) mean
corr(W(k), matching SVM(alpha)) vs iteration per (optimizer, lr), band: the mean's confidence
interval; the line style is the optimizer (normalized solid, plain dashed), the colour the
step size, the same in every panel. Whether the limit direction changes, against the reference
(normalized GD at the middle step size): (c) corr(W_final(setting), W_final(reference)) per
seed, mean and its confidence interval; (d) the share of seeds whose final selection alpha
equals the reference's, with its Clopper-Pearson interval. In (c, d) the settings are grouped
by optimizer (a category), W runs filled circles, KQ runs hollow squares. One legend, above.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("curve_corr_fro_alpha", "curve_corr_nuc_alpha", "W", "alpha", "convergence")
MATCH = {"W": "fro", "KQ": "nuc"}
#: line style per optimizer (others: dotted)
OPT_LINES = {"normalized": "-", "plain": "--"}
#: palette indices of the step sizes, smallest first
LR_COLORS = (2, 4, 3, 5, 8, 6)
#: marker and fill per parameterization in (c, d)
PARAM_MARKERS = {"W": ("o", True), "KQ": ("s", False)}


def _final_dirs(sweep: xr.Dataset, **point) -> np.ndarray:
    """(seed, d*d) unit final W per seed (NaN rows for non-ok cells)."""
    W = sd.select(sweep["W"].where(sd.ok_mask(sweep)), **point).isel(checkpoint=-1)
    W = np.asarray(W.transpose("seed", ...).values, float).reshape(W.sizes["seed"], -1)
    nrm = np.linalg.norm(np.nan_to_num(W), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nrm > 0, W / nrm, np.nan)


def setting_colors(opts: list[str], lrs: list[float]) -> dict[tuple[str, float], tuple]:
    """One colour per step size (the house palette), the same in every panel; the optimizer
    is the line style (:data:`OPT_LINES`)."""
    return {
        (o, lr): style.PALETTE[LR_COLORS[j % len(LR_COLORS)]]
        for o in opts
        for j, lr in enumerate(lrs)
    }


def _draw_curves(ax, summary: xr.Dataset, p: str, opts, lrs, it, colors) -> None:
    """(a, b) mean corr with the matching SVM(α) per (optimizer, lr) and its interval."""
    for o in opts:
        ls = OPT_LINES.get(o, ":")
        for lr in lrs:
            name = f"curve_corr_{MATCH[p]}_alpha"
            stats = sd.pooled(summary, name, param=p, optimizer=o, lr=lr)
            style.mean_band(ax, it, stats, colors[(o, lr)], linestyle=ls, clip=(-1.0, 1.0))
    ax.set_xscale("log")
    ax.axhline(1.0, color="0.6", lw=0.5)
    ax.set_xlabel("iteration $k$")
    ax.set_ylabel(r"mean corr with SVM($\alpha$)")


def _versus_reference(sweep: xr.Dataset, p: str, settings, ref_opt, ref_lr):
    """Per setting: (mean, std, count) over seeds of corr(final W, reference's final W), and
    (seeds whose final selection α equals the reference's, seeds compared), over the seeds
    where both runs are ok (per-seed pairs: from the sweep)."""
    ref = _final_dirs(sweep, param=p, optimizer=ref_opt, lr=ref_lr)
    ref_alpha = sd.select(sweep["alpha"], param=p, optimizer=ref_opt, lr=ref_lr)
    ref_ok = np.asarray(sd.select(sd.ok_mask(sweep), param=p, optimizer=ref_opt, lr=ref_lr))
    corr, same = [], []
    for o, lr in settings:
        cur = _final_dirs(sweep, param=p, optimizer=o, lr=lr)
        c = np.nansum(cur * ref, axis=1)
        c = c[np.isfinite(cur).all(1) & np.isfinite(ref).all(1)]
        std = float(np.std(c, ddof=1)) if c.size > 1 else np.nan
        corr.append((float(np.mean(c)) if c.size else np.nan, std, c.size))
        a = sd.select(sweep["alpha"], param=p, optimizer=o, lr=lr)
        ok = ref_ok & np.asarray(sd.select(sd.ok_mask(sweep), param=p, optimizer=o, lr=lr))
        eq = np.asarray((a == ref_alpha).all([dim for dim in a.dims if dim != "seed"]))
        same.append((int(np.sum(eq & ok)), int(np.sum(ok))))
    return corr, same


def _draw_reference(axes, sweep, params, opts, lrs, ref_opt, ref_lr, colors) -> None:
    """(c) corr of final directions with the reference, (d) same-α share: grouped by
    optimizer, a point per (step size, param) side by side."""
    ax_c, ax_d = axes
    settings = [(o, lr) for o in opts for lr in lrs]
    offsets = style.dodge(len(lrs) * len(params), 0.7)
    for k, p in enumerate(params):
        corr, same = _versus_reference(sweep, p, settings, ref_opt, ref_lr)
        marker, filled = PARAM_MARKERS.get(p, ("^", True))
        for i, (o, lr) in enumerate(settings):
            x = opts.index(o) + offsets[lrs.index(lr) * len(params) + k]
            color = colors[(o, lr)]
            kw = dict(ls="none", color=color, marker=marker, ms=3.5,
                      mfc=color if filled else "white")  # fmt: skip
            style.mean_errorbar(ax_c, [x], [[v] for v in corr[i]], clip=(-1.0, 1.0), **kw)
            style.share_errorbar(ax_d, [x], [same[i][0]], [same[i][1]], **kw)
    for ax, letter, title, ylabel in (
        (ax_c, "c", "final direction", "corr with the reference"),
        (ax_d, "d", r"final selection $\alpha$", r"share with the reference's $\alpha$"),
    ):
        ax.set_xticks(range(len(opts)))
        ax.set_xticklabels([style.optimizer_label(o) for o in opts])
        ax.set_xlim(-0.6, len(opts) - 0.4)
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("optimizer")
        style.panel_label(ax, letter, title)


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
        "(a, b) line style: the optimizer, colour: the step size η, the same in every panel; "
        "corr with the SVM of the run's own final selection α (Frobenius for W, nuclear for KQ)",
        f"(c, d) reference: {ref_opt} GD, lr = {ref_lr:g}; (c) corr of the final directions "
        "per seed; (d) share of the seeds with the same final α as the reference; W runs "
        "filled circles, KQ runs hollow squares, the points of an optimizer side by side",
    ]
    notes = style.notes_text(f"(a-c) {style.MEAN_INTERVAL}; (d) {style.SHARE_INTERVAL}", extra)
    fig, axes = style.new_figure(1, 4, height=2.7, squeeze=False)
    for k, p in enumerate(params[:2]):
        _draw_curves(axes[0, k], summary, p, opts, lrs, it, colors)
        style.panel_label(axes[0, k], "ab"[k], f"{style.PARAM_LABELS.get(p, p)} runs")
    _draw_reference(axes[0, 2:], sweep, params, opts, lrs, ref_opt, ref_lr, colors)
    _legends(fig, opts, lrs, params, colors, ref_opt, ref_lr)
    style.add_notes(fig, notes)
    return fig


def _legends(fig, opts, lrs, params, colors, ref_opt, ref_lr) -> None:
    """One legend above the panels: step sizes (colour), optimizers (line style), params
    (marker), and the reference of (c, d)."""
    handles = [
        Line2D([], [], color=colors[(opts[0], lr)], lw=1.4, label=f"$\\eta = {lr:g}$") for lr in lrs
    ]
    handles += [
        Line2D([], [], color="0.3", ls=OPT_LINES.get(o, ":"), label=style.optimizer_label(o))
        for o in opts
    ]
    for p in params:
        marker, filled = PARAM_MARKERS.get(p, ("^", True))
        handles.append(Line2D([], [], ls="none", marker=marker, ms=3.5, color="0.3",
                              mfc="0.3" if filled else "white",
                              label=f"{style.PARAM_LABELS.get(p, p)} runs (c, d)"))  # fmt: skip
    ref = f"(c, d) reference: {style.optimizer_label(ref_opt)}, $\\eta = {ref_lr:g}$"
    handles.append(Line2D([], [], ls="none", label=ref))
    fig.legend(handles=handles, loc="outside upper center", ncol=(len(handles) + 1) // 2)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="optimizer",
    label="optimizer ablation",
    what=(
        "Beyond the paper, optimizer ablation: mean corr with the matching SVM of the run's "
        "selection against the iteration for normalized and plain GD at several step sizes, "
        "and the final direction and selection of every setting against normalized GD at the "
        f"middle step; means with their {style.CI_WORDS}, shares with their {style.CP_WORDS}."
    ),
    look=(
        "Normalized GD should converge fast; plain GD more slowly (its gradient vanishes as "
        "the softmax saturates) but towards the same direction."
    ),
    plot=plot,
    numbers=lambda summary: captions.corr_lines(summary),
    variables=VARIABLES,
)
