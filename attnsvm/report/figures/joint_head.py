"""Jointly trained head: E6 with and without training v, and v against the max-margin head
(docs/science.md §11; the paper's open question on joint training).

Grid axes ``d``, ``param`` (W, KQ) and ``train_head`` (false, true). Row 1: E6's stacked bars
(docs/science.md §6: class of GD's selection at the last iterate, unconverged runs hatched) of
the fixed-head runs, one panel per parameterization; row 2: the same for the trained-head runs
(token scores, opt and local optimality by the final v). Right column: (top) mean final
corr(W_GD, SVM(alpha)) with the SVM of the run's own selection (Frobenius for W, nuclear for
KQ), fixed head filled circles, trained head hollow squares; (bottom) mean final corr(v, v_mm)
of the trained head with the max-margin head of the attended tokens (triangles), and the share of
runs whose softmax is saturated (hollow diamonds). Means carry their confidence intervals,
shares their Clopper-Pearson intervals; d is a category here (points side by side, no lines).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.patches import Patch

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure
from attnsvm.report.figures import e6 as E6

VARIABLES = (*E6.VARIABLES, "corr_v", "vmm_feasible", "alpha_is_opt_init")
HEADS = {False: "fixed head", True: "trained head"}
MARKERS = {False: ("o", True), True: ("s", False)}  # (marker, filled) per train_head


def _heads(sweep: xr.Dataset) -> list[bool]:
    return [bool(v) for v in sd.grid_values(sweep, "train_head")] or [False]


def _at(sweep: xr.Dataset, head: bool) -> xr.Dataset:
    """The runs with ``train_head == head`` (the whole sweep when it is not an axis)."""
    return sweep.sel(train_head=head) if "train_head" in sweep.dims else sweep


def _stats_per_d(sweep: xr.Dataset, name: str, param: str, d_values: list):
    """(mean, std, count) over the ok runs of ``name`` per d (ddof 1; NaN where none)."""
    da = sd.select(sd.ok_values(sweep, name), param=param)
    out = []
    for d in d_values:
        v = np.asarray(sd.select(da, d=d).values, float).ravel()
        v = v[np.isfinite(v)]
        std = float(np.std(v, ddof=1)) if v.size > 1 else np.nan
        out.append((float(np.mean(v)) if v.size else np.nan, std, v.size))
    return tuple(np.asarray(col, float) for col in zip(*out, strict=True))


def _draw_lines(ax_w, ax_v, sweep, params, heads, d_values) -> None:
    """Right column: corr(W, SVM(α)) per head and param; corr(v, v_mm) and saturation; the
    values of a d side by side (d is a category: no lines join them)."""
    x = np.arange(len(d_values))
    top = style.dodge(len(params) * len(heads), 0.5)
    bottom = style.dodge(len(params) * 2, 0.5)
    for i, p in enumerate(params):
        color = style.PARAM_COLORS.get(p, "0.3")
        for j, h in enumerate(heads):
            marker, filled = MARKERS[h]
            stats = _stats_per_d(_at(sweep, h), "corr_matching", p, d_values)
            style.mean_errorbar(ax_w, x + top[i * len(heads) + j], stats, clip=(-1.0, 1.0),
                                ls="none", color=color, marker=marker, ms=3.5,
                                mfc=color if filled else "white",
                                label=f"{style.PARAM_LABELS.get(p, p)}, {HEADS[h]}")  # fmt: skip
        if True in heads:
            run = _at(sweep, True)
            name = style.PARAM_LABELS.get(p, p)
            stats = _stats_per_d(run, "corr_v", p, d_values)
            style.mean_errorbar(ax_v, x + bottom[2 * i], stats, clip=(-1.0, 1.0), ls="none",
                                color=color, marker="^", ms=3.5,
                                label=rf"{name}: corr($v$, $v_{{mm}}$)")  # fmt: skip
            sat = sd.select(sd.ok_values(run, "saturated"), param=p)
            k = [float(np.nansum(sd.select(sat, d=d).values)) for d in d_values]
            n = [float(np.isfinite(sd.select(sat, d=d).values).sum()) for d in d_values]
            style.share_errorbar(ax_v, x + bottom[2 * i + 1], k, n, ls="none", color=color,
                                 marker="D", ms=3, mfc="white",
                                 label=f"{name}: saturated share")  # fmt: skip
    nc = len(params) + 1  # the right column of a 2 x nc grid
    for ax, title, letter in ((ax_w, r"corr($W$, SVM($\alpha$))", "abcdefgh"[nc - 1]),
                              (ax_v, "trained head", "abcdefgh"[2 * nc - 1])):  # fmt: skip
        ax.set_xticks(x)
        ax.set_xticklabels([str(d) for d in d_values])
        ax.set_xlim(-0.6, len(d_values) - 0.4)
        ax.set_xlabel("$d$")
        ax.set_ylim(-0.05, 1.05)
        style.panel_label(ax, letter, title)
    ax_w.set_ylabel("mean final corr")
    ax_v.set_ylabel("mean corr / share")


def _notes(sweep: xr.Dataset, params: list[str], heads: list[bool], d_values: list) -> list[str]:
    """Caption notes: the classes per head and d, as E6 writes them."""
    out = [
        "rows: fixed head (top), trained head (bottom); bars as in E6: class of GD's selection "
        "α at the last iterate (global: α = opt; local: locally optimal; not-local: neither), "
        "hatched: not converged (softmax not saturated, or corr(W_GD, SVM(α)) below the "
        "threshold); with a trained head, token scores, opt and local optimality use the "
        "final v",
        "right column, top: filled circles fixed head, hollow squares trained head; bottom: corr "
        "of the final v with the max-margin head v_mm of the attended tokens x_iα_i (labels "
        "Y_i), and the share of runs whose final softmax is saturated; the points of one d "
        "side by side",
    ]
    for h in heads:
        run = _at(sweep, h)
        for p in params:
            c, hatched = E6.counts(run, p, d_values)
            out.append(f"{HEADS[h]}: " + E6.counts_text((c, hatched), d_values, p))
    return out


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Rows of E6 bars per head, and the correlations (from the sweep: per-run classes)."""
    params = sd.params_of(sweep)
    heads = _heads(sweep)
    d_values = sd.grid_values(sweep, "d") or [None]
    notes = style.notes_text(
        f"right column, means: {style.MEAN_INTERVAL}; shares: {style.SHARE_INTERVAL}",
        _notes(sweep, params, heads, d_values),
    )
    ncols = len(params) + 1
    fig, axes = style.new_figure(2, ncols, height=4.6, squeeze=False)
    for row, h in enumerate([False, True]):
        run = _at(sweep, h) if h in heads else None
        for j, p in enumerate(params):
            ax = axes[row, j]
            letter = "abcdefgh"[row * ncols + j]
            style.panel_label(ax, letter, f"{style.PARAM_LABELS.get(p, p)}, {HEADS[h]}")
            if run is None:
                ax.text(0.5, 0.5, "not in the grid", transform=ax.transAxes, ha="center")
                continue
            E6._draw_bars(ax, *E6.counts(run, p, d_values), d_values)
            if j == 0:
                ax.set_ylabel("share of runs")
    _draw_lines(axes[0, -1], axes[1, -1], sweep, params, heads, [d for d in d_values])

    handles = [Patch(color=style.CONVERGENCE_COLORS[n], label=n) for n in codes.CONVERGENCE]
    handles.append(
        Patch(facecolor="white", edgecolor="0.15", hatch=E6.HATCH, label="not converged")
    )
    fig.legend(handles=handles, loc="outside right upper", title="class of α", fontsize=6)
    style.outside_legend(fig, [axes[0, -1], axes[1, -1]], loc="outside right lower", fontsize=6,
                         title="right column")  # fmt: skip
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Caption numbers of the run: global share per d and mean corr per d, per head."""
    out = []
    heads = [bool(v) for v in summary["train_head"].values] if "train_head" in summary.dims else []
    fixed = bool(int(summary.attrs.get("fixed_train_head", 0)))  # train_head not an axis
    for h in heads or [fixed]:
        sub = summary.sel(train_head=h) if heads else summary
        label = HEADS[h]
        out += [f"{label}: {line}" for line in captions.global_lines(sub, per_d=True)]
        for p in captions.params(sub):
            name = f"corr_{captions.MATCH.get(p, 'fro')}_alpha_mean"
            out.append(
                f"{label}, final corr of *{p}* runs with their SVM of α: "
                + captions.per_point(sub, name, ["d"], param=p)
            )
            if h:
                out.append(
                    f"trained head, *{p}* runs, final corr(v, v_mm): "
                    + captions.per_point(sub, "corr_v_mean", ["d"], param=p)
                    + "; saturated share: "
                    + captions.per_point(sub, "saturated_mean", ["d"], param=p)
                )
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="joint_head",
    label="jointly trained head",
    what=(
        "Beyond the paper, training the linear head *v* together with *W* or (*K*, *Q*) "
        "(docs/science.md §11): E6's convergence types per *d* with a fixed head (top row) and "
        "a trained head (bottom row; classes by the final *v*), the final corr of *W* with the "
        "SVM of its own selection α, and the final corr of *v* with the max-margin classifier "
        "*v*\\ :sub:`mm` of the attended tokens; means with their "
        f"{style.CI_WORDS}, shares with their {style.CP_WORDS}."
    ),
    look=(
        "Whether *W* still aligns with the Att-SVM of its selection once *v* moves, whether "
        "*v* aligns with *v*\\ :sub:`mm`, and how the shares of global / local / not-local "
        "runs move between the rows."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
