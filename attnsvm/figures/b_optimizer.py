"""Optimizer ablation: normalized vs plain GD and the step size.

Grid axes ``optimizer`` (normalized, plain), ``lr`` and ``param`` (W, KQ). (a, b) mean
corr(W(k), matching SVM(alpha)) vs iteration per (optimizer, lr): normalized solid, plain
dashed, darker = larger lr. (c) whether the limit direction changes: mean over seeds of
corr(W_final(setting), W_final(reference)) with the reference normalized GD at the middle lr,
and the share of seeds whose final selection alpha equals the reference's.
"""

from __future__ import annotations

import numpy as np
import seaborn as sns
import xarray as xr

from attnsvm.figures import style

VARIABLES = ("curve_corr_fro_alpha", "curve_corr_nuc_alpha", "W", "alpha", "convergence")
MATCH = {"W": "fro", "KQ": "nuc"}
OPT_STYLE = {"normalized": ("-", "Blues"), "plain": ("--", "Oranges")}


def _final_dirs(sweep: xr.Dataset, **point) -> np.ndarray:
    """(seed, d*d) unit final W per seed (NaN rows for non-ok cells)."""
    W = style.select(sweep["W"].where(style.ok_mask(sweep)), **point).isel(checkpoint=-1)
    W = np.asarray(W.transpose("seed", ...).values, float).reshape(W.sizes["seed"], -1)
    nrm = np.linalg.norm(np.nan_to_num(W), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nrm > 0, W / nrm, np.nan)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    params = style.params_of(sweep)
    opts = [str(v) for v in style.grid_values(sweep, "optimizer")] or ["normalized"]
    lrs = sorted(float(v) for v in style.grid_values(sweep, "lr")) or [0.1]
    ref_lr = lrs[len(lrs) // 2]
    ref_opt = "normalized" if "normalized" in opts else opts[0]
    it = style.iterations_of(sweep)
    extra = [
        "(a, b) solid: normalized GD, dashed: plain GD, shade: step size; corr with the SVM of "
        "the run's own final selection α (Frobenius for W, nuclear for KQ)",
        f"(c) reference: {ref_opt} GD, lr = {ref_lr:g}; bars: mean corr of final directions "
        "over seeds, dots: share of seeds with the same α as the reference",
    ]
    footer = style.footer_text(sweep, extra=extra, unit="point (param, optimizer, lr)")
    fig, axes = style.new_figure(
        1, 3, height=2.6, footer_lines=style.footer_lines(footer), squeeze=False
    )
    for k, p in enumerate(params[:2]):
        ax = axes[0, k]
        for o in opts:
            ls, cmap = OPT_STYLE.get(o, ("-", "Greys"))
            shades = sns.color_palette(cmap, len(lrs) + 2)[2:]
            for j, lr in enumerate(lrs):
                da = style.select(
                    style.ok_values(sweep, f"curve_corr_{MATCH[p]}_alpha"),
                    param=p, optimizer=o, lr=lr,
                )  # fmt: skip
                vals = np.asarray(da.transpose(..., "checkpoint").values).reshape(-1, len(it))
                mean, _, _ = style.nan_stats(vals)
                ax.plot(it, mean, color=shades[j], ls=ls, label=f"{o}, lr={lr:g}")
        ax.set_xscale("log")
        ax.axhline(1.0, color="0.6", lw=0.5)
        ax.set_xlabel("iteration $k$")
        ax.set_ylabel("mean corr with SVM(α)")
        style.panel_label(ax, "ab"[k], f"{style.PARAM_LABELS.get(p, p)} runs")
        if k == 0:
            style.legend(ax, loc="lower right", fontsize=5.5, ncol=1)
    ax = axes[0, 2]
    settings = [(o, lr) for o in opts for lr in lrs]
    width = 0.8 / max(len(params), 1)
    for k, p in enumerate(params):
        ref = _final_dirs(sweep, param=p, optimizer=ref_opt, lr=ref_lr)
        ref_alpha = style.select(sweep["alpha"], param=p, optimizer=ref_opt, lr=ref_lr)
        corr_mean, same = [], []
        for o, lr in settings:
            cur = _final_dirs(sweep, param=p, optimizer=o, lr=lr)
            c = np.nansum(cur * ref, axis=1)
            c[~(np.isfinite(cur).all(1) & np.isfinite(ref).all(1))] = np.nan
            corr_mean.append(np.nanmean(c) if np.isfinite(c).any() else np.nan)
            a = style.select(sweep["alpha"], param=p, optimizer=o, lr=lr)
            eq = (a == ref_alpha).all([dim for dim in a.dims if dim != "seed"])
            same.append(float(eq.mean()))
        x = np.arange(len(settings)) + (k - (len(params) - 1) / 2) * width
        color = style.PARAM_COLORS.get(p, "0.4")
        ax.bar(x, corr_mean, width=width, color=color, alpha=0.75, label=f"{p}: corr")
        ax.plot(x, same, ls="none", marker="o", ms=3, color="0.1", markerfacecolor=color)
    ax.plot([], [], ls="none", marker="o", ms=3, color="0.1", label="same α share")
    ax.set_xticks(np.arange(len(settings)))
    ax.set_xticklabels([f"{'N' if o == 'normalized' else 'P'}\n{lr:g}" for o, lr in settings])
    ax.set_xlabel("optimizer (N normalized, P plain) / lr")
    ax.set_ylim(0, 1.32)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("vs reference")
    style.panel_label(ax, "c", "final direction vs reference")
    style.legend(ax, loc="upper center", ncol=3, fontsize=5.5, handlelength=1.2)
    style.add_footer(fig, footer)
    return fig
