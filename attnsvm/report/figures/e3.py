"""E3: rank of the Frobenius (W_mm) and nuclear (W_mm_*) SVM solutions for opt tokens vs d
(docs/science.md §6, E3; §4 for the two SVMs).

Top row: mean rank over feasible instances only (Frobenius solid, nuclear dashed; error bars:
the mean's confidence interval), (a) one line per n at the smallest T, (b) one line per T at
the smallest n, with the reference min(n, d) dotted. Points resting on fewer than ``FEW``
feasible instances (the claims' fewest values) are ringed in grey; every point's count is in
the caption. Bottom row: the share of instances whose SVM is infeasible with its
Clopper-Pearson interval (these are excluded from the means above, never dropped silently).
An SVM answer without a certificate (status other than optimal or infeasible) is "not
solved": neither feasible nor infeasible, counted in the caption.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.config.cell import Cell
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("rank_fro_opt", "rank_nuc_opt", "feasible_fro_opt", "feasible_nuc_opt")
#: points averaging fewer feasible instances than this are ringed (the claims' fewest values)
FEW = style.MIN_RUNS
KINDS = (
    ("fro", "-", "o", "Frobenius $" + style.W_MM + "$"),
    ("nuc", "--", "s", "nuclear $" + style.W_MM_NUC + "$"),
)


def _series(sweep: xr.Dataset, summary: xr.Dataset, kind: str, point: dict) -> dict:
    """Per d: rank mean / std / count over feasible ok instances (from the summary), and the
    infeasible, not-solved and ok counts and the infeasible fraction (from the sweep's flags)."""
    rank = sd.select(sd.ok_values(sweep, f"rank_{kind}_opt"), **point)
    ok = sd.select(sd.ok_mask(sweep), **point)
    feas_name = f"feasible_{kind}_opt"
    feasible = np.isfinite(rank) & (rank >= 0)
    infeasible = ~feasible
    if feas_name in sweep:
        flag = sd.select(sweep[feas_name], **point)
        feasible = feasible & (flag > 0)
        infeasible = flag == 0  # NaN: not solved (no certified answer), neither
    unsolved = ~feasible & ~infeasible
    if "d" not in rank.dims:
        dv = [sd.grid_values(sweep, "d")[0]]
        ok, infeasible, unsolved = (x.expand_dims(d=dv) for x in (ok, infeasible, unsolved))

    def flat(da):
        return da.transpose("d", ...).values.reshape(da.sizes["d"], -1)

    okv, inf, uns = flat(ok), flat(infeasible), flat(unsolved)
    # ranks of infeasible or unsolved SVMs are -1: the summary's rank statistics skip them
    mean, std, count = (np.atleast_1d(v) for v in sd.pooled(summary, f"rank_{kind}_opt",
                                                             keep=("d",), **point))  # fmt: skip
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


def _panels(sweep: xr.Dataset) -> list[tuple]:
    ns = sorted(int(v) for v in sd.grid_values(sweep, "n")) or [None]
    Ts = sorted(int(v) for v in sd.grid_values(sweep, "T")) or [None]
    n0, T0 = ns[0], Ts[0]
    return [
        ("a", "n", ns, {"T": T0}, rf"varying $n$ at $T={T0}$"),
        ("b", "T", Ts, {"n": n0}, rf"varying $T$ at $n={n0}$"),
    ]


def _point(fixed_point: dict, axis: str, v) -> dict:
    point = dict(fixed_point)
    if v is not None:
        point[axis] = v
    return point


def _notes(sweep: xr.Dataset, summary: xr.Dataset, panels: list, d: np.ndarray) -> list[str]:
    """Caption notes: the rank's definition, infeasible and not-solved counts, counts per point."""
    totals = {}
    for kind, *_ in KINDS:
        s = _series(sweep, summary, kind, {})
        totals[kind] = [int(np.nansum(s[k])) for k in ("n_inf", "n_ok", "n_unsolved")]
    tol = sd.fixed_settings(sweep).get("rank_tol", Cell.rank_tol)
    extra = [
        f"rank = number of σ_i/σ_1 > {tol:g} of the SVM solution for opt tokens; "
        f"markers: mean over feasible instances only, error bars: {style.MEAN_INTERVAL}; "
        f"infeasible share: {style.SHARE_INTERVAL}",
        "excluded as infeasible (bottom row): "
        f"Frobenius {totals['fro'][0]} of {totals['fro'][1]}, "
        f"nuclear {totals['nuc'][0]} of {totals['nuc'][1]} ok instances",
        "not solved (no certified SVM answer; neither feasible nor infeasible): "
        f"Frobenius {totals['fro'][2]}, nuclear {totals['nuc'][2]}",
        f"points from fewer than {FEW} feasible instances: ringed in grey",
    ]
    for letter, axis, values, fixed_point, _ in panels:
        parts = []
        for v in values:
            cnt = _series(sweep, summary, "fro", _point(fixed_point, axis, v))["count"]
            parts.append(f"{axis}={v}: " + " ".join(str(int(c)) for c in cnt))
        extra.append(
            f"({letter}) feasible instances per point, d = {', '.join(f'{x:g}' for x in d)}: "
            + "; ".join(parts)
        )
    return extra


def _draw_series(ax, ax_inf, d, s: dict, kind: str, ls: str, marker: str, color, fracs) -> bool:
    """One SVM's mean rank and its interval (ringed where few instances) and its infeasible
    share with its interval, unless it equals the other SVM's (returns True then)."""
    style.mean_errorbar(ax, d, (s["mean"], s["std"], s["count"]), color=color, linestyle=ls,
                        marker=marker, ms=3,
                        markerfacecolor=color if kind == "fro" else "white")  # fmt: skip
    few = (s["count"] < FEW) & (s["count"] > 0)
    if few.any():
        ax.plot(d[few], s["mean"][few], ls="", marker="o", ms=8, mfc="none",
                mec="0.45", mew=0.7, zorder=5)  # fmt: skip
    if bool(fracs) and np.allclose(fracs[0], s["frac"], equal_nan=True):
        return True
    style.share_errorbar(ax_inf, d, s["n_inf"], s["n_ok"] - s["n_unsolved"], color=color,
                         linestyle=ls, marker=marker, ms=3,
                         markerfacecolor=color if kind == "fro" else "white")  # fmt: skip
    return False


def _legend(ax, axis: str, values: list) -> None:
    """The panel's legend: colours = the varied quantity (:func:`_style_legend`: the SVMs)."""
    palette = style.PALETTE
    color_handles = [
        Line2D([], [], color=palette[j % len(palette)], lw=1.4, label=f"${axis}={v}$")
        for j, v in enumerate(values)
        if v is not None
    ]
    ax.legend(handles=color_handles, loc="upper left", ncol=len(color_handles))


def _style_legend(fig) -> None:
    """One legend above the panels: line styles and markers = the SVM, the references."""
    handles = [
        Line2D([], [], color="0.2", ls=ls, marker=m, ms=3,
               markerfacecolor="0.2" if k == "fro" else "white", label=lab)
        for k, ls, m, lab in KINDS
    ]  # fmt: skip
    handles.append(Line2D([], [], color="0.5", ls=":", lw=0.7, label=r"$\min(n, d)$"))
    handles.append(
        Line2D([], [], ls="", marker="o", ms=8, mfc="none", mec="0.45", mew=0.7,
               label=f"fewer than {FEW} feasible instances")
    )  # fmt: skip
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles))


def _draw_column(axes, sweep, summary, d, panel, n0, same_frac: list[bool]) -> None:
    """One column: mean ranks (top) and infeasible fractions (bottom) of one varied axis."""
    letter, axis, values, fixed_point, title = panel
    ax, ax_inf = axes
    palette = style.PALETTE
    for j, v in enumerate(values):
        color = palette[j % len(palette)]
        fracs: list = []
        for kind, ls, marker, _ in KINDS:
            s = _series(sweep, summary, kind, _point(fixed_point, axis, v))
            if _draw_series(ax, ax_inf, d, s, kind, ls, marker, color, fracs):
                same_frac.append(True)
            fracs.append(s["frac"])
        if axis == "n" and v is not None:
            ax.plot(d, np.minimum(d, v), color=color, lw=0.7, ls=":", zorder=0)
    if axis == "T" and n0 is not None:
        ax.plot(d, np.minimum(d, n0), color="0.5", lw=0.7, ls=":", zorder=0)
    style.panel_label(ax, letter, title)
    ax.set_ylabel("mean rank (feasible only)")
    ax_inf.set_ylabel("infeasible\nshare")
    ax_inf.set_ylim(-0.05, 1.05)
    ax_inf.set_xlabel("$d$")
    ax_inf.set_xticks(d)
    # headroom for the legend above the curves (it must not hide them)
    top = max(np.nanmax([*np.asarray(values, float), 1.0]) if axis == "n" else 0.0, 1.0)
    ymax = ax.get_ylim()[1]
    ax.set_ylim(0, max(ymax, top) * 1.3)
    _legend(ax, axis, values)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E3 (docs/science.md §6): mean ranks from the summary; infeasible and not-solved counts
    from the sweep's feasibility flags (the summary does not split ok instances by them)."""
    d = np.asarray(sd.grid_values(sweep, "d"), dtype=float)
    panels = _panels(sweep)
    n0 = panels[1][3]["n"]
    extra = _notes(sweep, summary, panels, d)
    fig, axes = style.new_figure(
        2, 2, height=4.1, squeeze=False, sharex=True, gridspec_kw={"height_ratios": [2.3, 1.0]}
    )
    same_frac: list[bool] = []
    for col, panel in enumerate(panels):
        _draw_column(axes[:, col], sweep, summary, d, panel, n0, same_frac)
    _style_legend(fig)
    if same_frac and all(same_frac):
        extra.append(
            "bottom row: the Frobenius and nuclear SVMs have the same constraints, so the same "
            "infeasible share (drawn once, solid)"
        )
    style.add_notes(fig, style.notes_text(None, extra))
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Mean rank of both SVMs per d and the feasible share."""
    out = [
        f"mean rank of the {captions.NAMES[norm]} SVM(opt) per *d* (over *n*, *T*): "
        + captions.per_point(summary, f"rank_{norm}_opt_mean", ["d"], lambda x: x.mean())
        for norm in ("fro", "nuc")
    ]
    return [*out, "feasible instances: " + captions.pooled_share(summary, "feasible_fro_opt")]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e3",
    label="E3: rank of the SVM solutions",
    what=(
        "Rank of the SVM solutions for the optimal tokens against *d*, over feasible "
        f"instances only (Frobenius solid, nuclear dashed; error bars: the mean's {style.CI_WORDS}"
        f"; points from fewer than {FEW} feasible instances are ringed, the counts are in the "
        "notes), and the share of infeasible instances with its "
        f"{style.CP_WORDS}. An SVM answer without a certificate counts as not solved, neither "
        "feasible nor infeasible."
    ),
    look=(
        "The nuclear SVM should have lower rank than the Frobenius SVM; infeasibility should "
        "appear only for small *d*."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
