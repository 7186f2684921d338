"""E3: rank of the Frobenius (W_mm) and nuclear (W_mm_*) SVM solutions for opt tokens vs d.

Top row: mean rank over feasible instances only (Frobenius solid, nuclear dashed; error bars
± std), (a) one line per n at the smallest T, (b) one line per T at the smallest n, with the
reference min(n, d) dotted. Points averaging fewer than ``FEW`` feasible instances are
circled in grey and labelled with their count; every point's count is in the footer. Bottom
row: the fraction of instances whose SVM is infeasible (these are excluded from the means
above, never dropped silently). An SVM answer without a certificate (status other than optimal
or infeasible) is "not solved": neither feasible nor infeasible, counted in the footer.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.cell import Cell
from attnsvm.figures import style

VARIABLES = ("rank_fro_opt", "rank_nuc_opt", "feasible_fro_opt", "feasible_nuc_opt")
#: points averaging fewer feasible instances than this are marked
FEW = 10
KINDS = (
    ("fro", "-", "o", "Frobenius $" + style.W_MM + "$"),
    ("nuc", "--", "s", "nuclear $" + style.W_MM_NUC + "$"),
)


def _series(sweep: xr.Dataset, kind: str, point: dict) -> dict[str, np.ndarray]:
    """Per d: rank mean / std / count over feasible ok instances, infeasible count, ok count."""
    rank = style.select(style.ok_values(sweep, f"rank_{kind}_opt"), **point)
    ok = style.select(style.ok_mask(sweep), **point)
    feas_name = f"feasible_{kind}_opt"
    feasible = np.isfinite(rank) & (rank >= 0)
    infeasible = ~feasible
    if feas_name in sweep:
        flag = style.select(sweep[feas_name], **point)
        feasible = feasible & (flag > 0)
        infeasible = flag == 0  # NaN: not solved (no certified answer), neither
    unsolved = ~feasible & ~infeasible
    d_dims = [dim for dim in rank.dims if dim != "d"]
    if "d" not in rank.dims:
        rank = rank.expand_dims(d=[style.grid_values(sweep, "d")[0]])
        dv = rank["d"].values
        ok, feasible = ok.expand_dims(d=dv), feasible.expand_dims(d=dv)
        infeasible, unsolved = infeasible.expand_dims(d=dv), unsolved.expand_dims(d=dv)
        d_dims = [dim for dim in rank.dims if dim != "d"]
    r = rank.where(feasible).transpose("d", *d_dims).values.reshape(rank.sizes["d"], -1)
    okv = ok.transpose("d", *d_dims).values.reshape(rank.sizes["d"], -1)

    def flat(da):
        return da.transpose("d", *d_dims).values.reshape(rank.sizes["d"], -1)

    inf, uns = flat(infeasible), flat(unsolved)
    mean, std, count = style.nan_stats(r, axis=1)
    n_ok = okv.sum(axis=1)
    n_inf = (okv & inf).sum(axis=1)
    n_uns = (okv & uns).sum(axis=1)
    decided = n_ok - n_uns
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(decided > 0, n_inf / np.maximum(decided, 1), np.nan)
    return {
        "mean": mean,
        "std": std,
        "count": count,
        "n_ok": n_ok,
        "n_inf": n_inf,
        "n_unsolved": n_uns,
        "frac": frac,
    }


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    d = np.asarray(style.grid_values(sweep, "d"), dtype=float)
    ns = sorted(int(v) for v in style.grid_values(sweep, "n")) or [None]
    Ts = sorted(int(v) for v in style.grid_values(sweep, "T")) or [None]
    n0, T0 = ns[0], Ts[0]
    panels = [
        ("a", "n", ns, {"T": T0}, rf"varying $n$ at $T={T0}$"),
        ("b", "T", Ts, {"n": n0}, rf"varying $T$ at $n={n0}$"),
    ]
    totals = {"fro": [0, 0, 0], "nuc": [0, 0, 0]}
    for kind, *_ in KINDS:
        s = _series(sweep, kind, {})
        totals[kind] = [int(np.nansum(s[k])) for k in ("n_inf", "n_ok", "n_unsolved")]
    tol = style.fixed_settings(sweep).get("rank_tol", Cell.rank_tol)
    extra = [
        f"rank = number of σ_i/σ_1 > {tol:g} of the SVM solution for opt tokens; "
        "markers: mean over feasible instances only, error bars: ± std",
        "excluded as infeasible (bottom row): "
        f"Frobenius {totals['fro'][0]} of {totals['fro'][1]}, "
        f"nuclear {totals['nuc'][0]} of {totals['nuc'][1]} ok instances",
        "not solved (no certified SVM answer; neither feasible nor infeasible): "
        f"Frobenius {totals['fro'][2]}, nuclear {totals['nuc'][2]}",
        f"points from fewer than {FEW} feasible instances: circled, with their count",
    ]
    for letter, axis, values, fixed_point, _ in panels:
        parts = []
        for v in values:
            point = dict(fixed_point)
            if v is not None:
                point[axis] = v
            cnt = _series(sweep, "fro", point)["count"]
            parts.append(f"{axis}={v}: " + " ".join(str(int(c)) for c in cnt))
        extra.append(
            f"({letter}) feasible instances per point, d = {', '.join(f'{x:g}' for x in d)}: "
            + "; ".join(parts)
        )
    footer = style.footer_text(sweep, band=None, extra=extra, unit="point (n, T, d)")
    fig, axes = style.new_figure(
        2,
        2,
        height=4.1,
        footer_lines=style.footer_lines(footer),
        squeeze=False,
        sharex=True,
        gridspec_kw={"height_ratios": [2.3, 1.0]},
    )
    palette = style.PALETTE
    same_frac: list[bool] = []
    for col, (letter, axis, values, fixed_point, title) in enumerate(panels):
        ax, ax_inf = axes[0, col], axes[1, col]
        for j, v in enumerate(values):
            point = dict(fixed_point)
            if v is not None:
                point[axis] = v
            color = palette[j % len(palette)]
            fracs = []
            for kind, ls, marker, _ in KINDS:
                s = _series(sweep, kind, point)
                ax.errorbar(
                    d,
                    s["mean"],
                    yerr=s["std"],
                    color=color,
                    linestyle=ls,
                    marker=marker,
                    ms=3,
                    capsize=1.5,
                    elinewidth=0.6,
                    markerfacecolor=color if kind == "fro" else "white",
                )
                few = (s["count"] < FEW) & (s["count"] > 0)
                if few.any():
                    ax.plot(d[few], s["mean"][few], ls="", marker="o", ms=8, mfc="none",
                            mec="0.45", mew=0.7, zorder=5)  # fmt: skip
                    if kind == "fro":
                        for xx, yy, cc in zip(d[few], s["mean"][few], s["count"][few],
                                              strict=True):  # fmt: skip
                            ax.annotate(f"{int(cc)}", (xx, yy), xytext=(4, -7),
                                        textcoords="offset points", fontsize=5.5,
                                        color="0.35")  # fmt: skip
                same = bool(fracs) and np.allclose(fracs[0], s["frac"], equal_nan=True)
                if not same:
                    ax_inf.plot(
                        d,
                        s["frac"],
                        color=color,
                        linestyle=ls,
                        marker=marker,
                        ms=3,
                        markerfacecolor=color if kind == "fro" else "white",
                    )
                else:
                    same_frac.append(True)
                fracs.append(s["frac"])
            if axis == "n" and v is not None:
                ax.plot(d, np.minimum(d, v), color=color, lw=0.7, ls=":", zorder=0)
        if axis == "T" and n0 is not None:
            ax.plot(d, np.minimum(d, n0), color="0.5", lw=0.7, ls=":", zorder=0)
        style.panel_label(ax, letter, title)
        ax.set_ylabel("mean rank (feasible only)")
        ax_inf.set_ylabel("infeasible\nfraction")
        if same_frac and all(same_frac):
            ax_inf.text(
                0.99,
                0.95,
                "Frobenius and nuclear identical (same constraints)",
                transform=ax_inf.transAxes,
                ha="right",
                va="top",
                fontsize=6,
                color="0.35",
            )
        ax_inf.set_ylim(-0.05, 1.05)
        ax_inf.set_xlabel("$d$")
        ax_inf.set_xticks(d)
        # headroom for the legend above the curves (it must not hide them)
        top = max(np.nanmax([*np.asarray(values, float), 1.0]) if axis == "n" else 0.0, 1.0)
        ymax = ax.get_ylim()[1]
        ax.set_ylim(0, max(ymax, top) * 1.75)
        # legends: colors = the varied quantity, styles = the SVM
        from matplotlib.lines import Line2D

        color_handles = [
            Line2D([], [], color=palette[j % len(palette)], lw=1.4, label=f"${axis}={v}$")
            for j, v in enumerate(values)
            if v is not None
        ]
        style_handles = [
            Line2D(
                [],
                [],
                color="0.2",
                ls=ls,
                marker=m,
                ms=3,
                markerfacecolor="0.2" if k == "fro" else "white",
                label=lab,
            )
            for k, ls, m, lab in KINDS
        ]
        style_handles.append(Line2D([], [], color="0.5", ls=":", lw=0.7, label=r"$\min(n, d)$"))
        ax.legend(handles=color_handles + style_handles, loc="upper left", ncol=3,
                  handlelength=2.4, columnspacing=1.0)  # fmt: skip
    style.add_footer(fig, footer)
    return fig
