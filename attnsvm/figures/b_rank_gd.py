"""Low-rank bias of KQ: rank of the trained W vs d for W runs and KQ runs (m = d).

(a) mean rank (relative tolerance) of W_GD for W runs and for KQ runs (= K Q^T), next to the
rank of the Frobenius SVM W_mm(alpha) (of the W runs) and of the nuclear SVM W_mm_*(alpha)
(of the KQ runs), and min(n, d) dotted. (b) the same as effective ranks (exp of the entropy
of the normalized singular values), which ignore the tiny directions that GD never removes
(the initialization's component shrinks relative to W(k) but never vanishes).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.cell import Cell
from attnsvm.figures import style

VARIABLES = (
    "rank_gd",
    "erank_gd",
    "rank_fro_alpha",
    "rank_nuc_alpha",
    "erank_fro_alpha",
    "erank_nuc_alpha",
)
SERIES = (
    ("gd", "W", "-", "o", r"$W_{\mathrm{GD}}$, $W$ runs"),
    ("gd", "KQ", "-", "s", r"$KQ^{\top}_{\mathrm{GD}}$, $KQ^{\top}$ runs"),
    ("fro_alpha", "W", "--", "o", "Frobenius $" + style.W_MM + r"(\alpha)$"),
    ("nuc_alpha", "KQ", "--", "s", "nuclear $" + style.W_MM_NUC + r"(\alpha)$"),
)


def _by_d(sweep: xr.Dataset, name: str, param: str, d: list) -> np.ndarray:
    da = style.select(style.ok_values(sweep, name), param=param)
    if name.startswith("rank_"):
        da = da.where(da >= 0)
    rows = [np.asarray(style.select(da, d=v).values, float).ravel() for v in d]
    width = max((r.size for r in rows), default=0)
    return np.array([np.pad(r, (0, width - r.size), constant_values=np.nan) for r in rows])


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    d = [int(v) for v in style.grid_values(sweep, "d")]
    n = int((style.grid_values(sweep, "n") or [Cell.n])[0])
    params = style.params_of(sweep)
    tol = style.fixed_settings(sweep).get("rank_tol", Cell.rank_tol)
    extra = [
        f"rank: number of σ_i/σ_1 > {tol:g}; effective rank exp(H(σ/Σσ)); "
        "markers: mean over ok runs (SVM ranks over feasible ones), bars: ± std",
    ]
    footer = style.footer_text(sweep, band=None, extra=extra, unit="point (d, param)")
    fig, axes = style.new_figure(
        1, 2, height=2.6, footer_lines=style.footer_lines(footer), squeeze=False
    )
    colors = {"gd": style.PARAM_COLORS, "fro_alpha": style.PARAM_COLORS}
    for k, (ax, prefix) in enumerate(zip(axes[0], ("rank", "erank"), strict=True)):
        for key, p, ls, marker, label in SERIES:
            if p not in params:
                continue
            vals = _by_d(sweep, f"{prefix}_{key}", p, d)
            mean, std, _ = style.nan_stats(vals, axis=1)
            color = colors.get(key, style.PARAM_COLORS)[p]
            ax.errorbar(
                d,
                mean,
                yerr=std,
                color=color,
                ls=ls,
                marker=marker,
                ms=3,
                capsize=1.5,
                elinewidth=0.6,
                markerfacecolor=color if key == "gd" else "white",
                label=label,
            )
        ax.plot(d, np.minimum(d, n), color="0.5", ls=":", lw=0.8, label=rf"$\min(n, d)$, $n={n}$")
        ax.set_xlabel("$d$")
        ax.set_xticks(d)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("mean rank" if prefix == "rank" else "mean effective rank")
        style.panel_label(ax, "ab"[k], "rank" if prefix == "rank" else "effective rank")
    style.legend(axes[0, 0], loc="upper left")
    style.add_footer(fig, footer)
    return fig
