"""Regularization path: corr(W_R, W_mm) and corr(K_R Q_R^T, W_mm_*) vs the radius R, beyond
the paper (docs/science.md §6, "Beyond the paper"; §3 for the path).

Cells with ``task: regpath`` (attnsvm.gd.regpath): for each radius R the norm-constrained
problem is solved by projected GD; the stored "checkpoints" are the radii (``curve_radius``).
(a) W: corr(W_R, W_mm(opt)) solid, corr(W_R, W_mm_*(opt)) dashed; (b) KQ: corr(K_R Q_R^T,
W_mm_*(opt)) solid, with the Frobenius SVM dashed. Mean over seeds and its confidence
interval (log R axis);
(c) 1 - corr with the matching SVM (log-log), showing how fast the path approaches it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("curve_radius", "curve_corr_fro_opt", "curve_corr_nuc_opt", "alpha_is_opt")
MATCH = {"W": ("fro", "nuc"), "KQ": ("nuc", "fro")}
LABELS = {"fro": "Frobenius $" + style.W_MM + "$", "nuc": "nuclear $" + style.W_MM_NUC + "$"}


def _curves(sweep: xr.Dataset, name: str, p: str) -> np.ndarray:
    da = sd.select(sd.ok_values(sweep, name), param=p)
    C = sweep.sizes.get("checkpoint", 0)
    return np.asarray(da.transpose(..., "checkpoint").values, float).reshape(-1, C)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Bands (the mean's confidence interval; (c) median and IQR) over the ok seeds, from the
    summary."""
    params = sd.params_of(sweep)
    radii = _curves(sweep, "curve_radius", params[0])
    fixed = sd.fixed_settings(sweep)
    if np.isfinite(radii).all(axis=1).any():
        R = np.nanmedian(radii[np.isfinite(radii).all(axis=1)], axis=0)
    else:  # no ok cell: the radii the cells were configured with
        lo, hi = fixed.get("radius_min", 0.1), fixed.get("radius_max", 100.0)
        R = np.geomspace(float(lo), float(hi), max(radii.shape[1], 1))
    opt_lines = []
    for p in params:
        v = np.asarray(sd.select(sd.ok_values(sweep, "alpha_is_opt"), param=p).values)
        v = v[np.isfinite(v)]
        opt_lines.append(f"{p}: selection at the largest R = opt in {int(v.sum())} of {v.size}")
    extra = [
        f"projected normalized GD per radius ({fixed.get('iterations', '?')} steps, warm "
        "start from the previous radius); W: ||W||_F ≤ R, KQ: ||K||²+||Q||² ≤ 2R",
        "; ".join(opt_lines),
    ]
    notes = style.notes_text(
        f"(a, b) {style.MEAN_INTERVAL}, clipped to [-1, 1]; (c) median and interquartile range",
        extra,
    )
    fig, axes = style.new_figure(1, 3, height=2.5, squeeze=False)
    for k, p in enumerate(params[:2]):
        ax = axes[0, k]
        match, cross = MATCH.get(p, ("fro", "nuc"))
        color = style.PARAM_COLORS.get(p, "0.3")
        for norm, ls in ((match, "-"), (cross, "--")):
            stats = sd.pooled(summary, f"curve_corr_{norm}_opt", param=p)
            style.mean_band(ax, R, stats, color if norm == match else "0.45",
                            label=LABELS[norm], linestyle=ls, clip=(-1.0, 1.0))  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlim(R[0] / 1.2, R[-1] * 1.2)
        ax.axhline(1.0, color="0.6", lw=0.5)
        ax.set_xlabel("radius $R$")
        ax.set_ylabel(r"corr with SVM($\mathrm{opt}$)")
        title = r"$W_R$, $\|W\|_F \leq R$" if p == "W" else r"$K_R Q_R^{\top}$"
        style.panel_label(ax, "ab"[k], title)
        style.legend(ax, loc="lower right")
        ax3 = axes[0, 2]
        # quantiles of 1 - corr are 1 - the opposite quantiles of corr
        q50, q25, q75 = sd.quantile_band(summary, f"curve_corr_{match}_opt", param=p)
        med, lo, hi = (np.maximum(1.0 - q, 1e-12) for q in (q50, q75, q25))
        ax3.plot(R, med, color=color, label=f"{style.PARAM_LABELS.get(p, p)}: {LABELS[match]}")
        ax3.fill_between(R, lo, hi, color=color, alpha=0.18, linewidth=0)
    ax3 = axes[0, 2]
    ax3.set_xscale("log")
    ax3.set_xlim(R[0] / 1.2, R[-1] * 1.2)
    ax3.set_yscale("log")
    if not any(np.isfinite(ln.get_ydata()).any() for ln in ax3.get_lines()):
        ax3.set_ylim(1e-6, 1.0)  # nothing to plot (no ok cell): a valid log range
    ax3.set_xlabel("radius $R$")
    ax3.set_ylabel(r"$1 - \mathrm{corr}$ (median, IQR)")
    style.panel_label(ax3, "c", "distance to the matching SVM")
    style.legend(ax3, loc="lower left")
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Corr with both SVMs at the largest radius, per parameterization."""
    radius = summary.get("curve_radius_mean")
    r_max = captions.fmt(captions.last(radius).max()) if radius is not None else "n/a"
    out = []
    for p in captions.params(summary):
        own = captions.MATCH.get(p, "fro")
        cross = "nuc" if own == "fro" else "fro"
        out.append(
            f"*{p}* path at the largest radius *R* = {r_max}: corr with the "
            f"{captions.NAMES[own]} SVM "
            + captions.per_point(summary, f"curve_corr_{own}_opt_mean", [], captions.last, param=p)
            + f", with the {captions.NAMES[cross]} SVM "
            + captions.per_point(
                summary, f"curve_corr_{cross}_opt_mean", [], captions.last, param=p
            )
        )
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("regpath",)

FIGURE = Figure(
    name="regpath",
    label="regularization path",
    what=(
        "Beyond the paper, regularization path: the norm-constrained minimizers *W*\\ "
        f":sub:`R` and {captions.KR_QR} against the radius *R*, corr with "
        "the Frobenius and nuclear SVM of the optimal tokens (means over seeds with their "
        f"{style.CI_WORDS}), and 1 − corr on log axes (median and interquartile range)."
    ),
    look=(
        f"corr(*W*\\ :sub:`R`, {captions.WMM}) and corr({captions.KR_QR}, "
        f"{captions.WMM_NUC}) should increase to 1 with *R*; the cross pairs should level off."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
