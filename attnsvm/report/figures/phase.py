"""Phase maps over (d, n) or (d, T): SVM feasibility, global convergence, all-support share;
beyond the paper (docs/science.md §6, "Beyond the paper"; §4 for the feasibility threshold).

The experiment's grid has ``d`` and one of ``n`` / ``T`` (the other fixed) and ``param``
(W, KQ). Heatmaps, one cell per grid point, value = share over the ok seeds, written in the
cell as k/n; a share of fewer than ``style.MIN_RUNS`` runs (the claims' fewest values) is not
coloured, only written:
(a) Att-SVM for the optimal tokens is feasible (``feasible_fro_opt``; the data do not depend
on param, so W and KQ cells are pooled), (b) W runs converge globally, (c) KQ runs converge
globally, (d) every non-selected token is a support vector of W_mm(alpha) (``all_support``,
W runs). The dashed line marks d = max(T-1, n), above which (docs/science.md §4) every
selection of data in general position is feasible.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib import colormaps
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("feasible_fro_opt", "convergence", "all_support")


def _share(da: xr.DataArray, x: list, y: list, yaxis: str) -> tuple[np.ndarray, np.ndarray]:
    """(len(y), len(x)) mean of the finite values and their count over the other dims."""
    out, cnt = np.full((len(y), len(x)), np.nan), np.zeros((len(y), len(x)), int)
    for j, yv in enumerate(y):
        for i, xv in enumerate(x):
            v = np.asarray(sd.select(da, d=xv, **{yaxis: yv}).values, float).ravel()
            v = v[np.isfinite(v)]
            cnt[j, i] = v.size
            if v.size:
                out[j, i] = v.mean()
    return out, cnt


def threshold_staircase(x: list, thr: list) -> tuple[list[float], list[float]]:
    """Staircase along cell edges (index coordinates) left of the cells with ``x >= thr``.

    Row ``j`` spans ``j - 0.5 .. j + 0.5``; its edge is at ``k - 0.5`` with ``k`` the number
    of ``x`` values below ``thr[j]``.
    """
    sx: list[float] = []
    sy: list[float] = []
    for j, t in enumerate(thr):
        edge = sum(1 for v in x if v < t) - 0.5
        sx += [edge, edge]
        sy += [j - 0.5, j + 0.5]
    return sx, sy


def _global(sweep: xr.Dataset, param: str) -> xr.DataArray:
    conv = sd.select(sd.ok_values(sweep, "convergence"), param=param)
    typed = conv.where(conv >= 0)
    return (typed == codes.CONVERGENCE.index("global")).astype(float).where(np.isfinite(typed))


def _maps(sweep: xr.Dataset) -> list[tuple[str, xr.DataArray]]:
    """(title, per-run values) of each panel: feasible, global per param, all-support."""
    params = sd.params_of(sweep)
    panels = [(r"SVM($\mathrm{opt}$) feasible", sd.ok_values(sweep, "feasible_fro_opt"))]
    for p in ("W", "KQ"):
        if p in params:
            panels.append((f"global, {style.PARAM_LABELS[p]} runs", _global(sweep, p)))
    support = sd.ok_values(sweep, "all_support")
    panels.append(
        (
            r"all support vectors, $W$ runs",
            sd.select(support, param="W") if "W" in params else support,
        )
    )
    return panels


def _draw_map(ax, share: np.ndarray, cnt: np.ndarray, x: list, y: list, thr: list, cmap):
    """One heatmap: a cell coloured by its share when at least ``style.MIN_RUNS`` runs stand
    behind it (otherwise grey), each cell's ``k/n`` written, and the threshold staircase."""
    shown = np.where(cnt >= style.MIN_RUNS, share, np.nan)
    image = ax.imshow(np.ma.masked_invalid(shown), origin="lower", aspect="auto", vmin=0,
                      vmax=1, cmap=cmap, interpolation="nearest")  # fmt: skip
    for j in range(len(y)):
        for i in range(len(x)):
            if cnt[j, i]:
                k = int(round(share[j, i] * cnt[j, i]))
                dark = np.isfinite(shown[j, i]) and shown[j, i] < 0.6
                ax.text(i, j, f"{k}/{cnt[j, i]}", ha="center", va="center", fontsize=6,
                        color="white" if dark else "black")  # fmt: skip
    # d = max(T-1, n) drawn along cell edges, so it never crosses a cell's label
    sx, sy = threshold_staircase(x, thr)
    ax.plot(sx, sy, color="white", lw=2.2, solid_capstyle="butt")
    ax.plot(sx, sy, color="0.15", lw=0.7, ls=(0, (2, 1.5)))
    ax.set_xticks(range(len(x)))
    ax.set_xticklabels([str(v) for v in x])
    ax.set_yticks(range(len(y)))
    ax.set_yticklabels([str(v) for v in y])
    ax.set_xlabel("$d$")
    return image


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Shares per grid point over the ok seeds, from the sweep (the feasibility share pools W
    and KQ cells, the global share needs typed runs only)."""

    yaxis = "n" if "n" in sweep.dims else "T"
    other = "T" if yaxis == "n" else "n"
    x = [int(v) for v in sd.grid_values(sweep, "d")]
    y = [int(v) for v in sd.grid_values(sweep, yaxis)]
    fixed_other = sd.grid_values(sweep, other)
    o = int(fixed_other[0]) if fixed_other else (8 if other == "T" else 6)
    stats = [(title, *_share(da, x, y, yaxis)) for title, da in _maps(sweep)]
    extra = [
        "cell: k/n, the runs with the property of the runs with a defined value; coloured by "
        f"the share k/n when n ≥ {style.MIN_RUNS} (the claims' fewest values), grey otherwise; "
        "global: α = opt (as in E6); all-support: W_mm(α) of the W runs",
        f"dashed line: left edge of the cells with d ≥ max(T − 1, n) ({other} = {o} fixed)",
    ]
    notes = style.notes_text(None, extra)
    fig, axes = style.new_figure(1, len(stats), height=2.6, squeeze=False, sharey=True)
    cmap = colormaps[style.SEQUENTIAL].with_extremes(bad=style.NO_VALUE)
    thr = [max((yv if yaxis == "T" else o) - 1, yv if yaxis == "n" else o) for yv in y]
    image = None
    for k, (ax, (title, share, cnt)) in enumerate(zip(axes[0], stats, strict=True)):
        image = _draw_map(ax, share, cnt, x, y, thr, cmap)
        if k == 0:
            ax.set_ylabel(f"${yaxis}$")
        style.panel_label(ax, "abcdefgh"[k], title)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9,
                     label=f"share k/n (n ≥ {style.MIN_RUNS})")  # fmt: skip
    halo = Line2D([], [], color="white", lw=2.2, solid_capstyle="butt")
    dash = Line2D([], [], color="0.15", lw=0.7, ls=(0, (2, 1.5)))
    few = Patch(facecolor=style.NO_VALUE, edgecolor="none")
    fig.legend([(halo, dash), few],
               [r"$d = \max(T - 1, n)$: every selection feasible right of it",
                f"fewer than {style.MIN_RUNS} runs: count only, not coloured"],
               loc="outside upper center", ncol=2)  # fmt: skip
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Global shares pooled, feasible instances on either side of the line, all-support."""
    return [
        *captions.global_lines(summary, per_d=False),
        *captions.phase_sides(summary),
        "*W* runs with every token a support vector: "
        + captions.pooled_share(summary, "all_support", param="W"),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="phase",
    label="phase maps",
    what=(
        "Beyond the paper, phase map over *d* and *n* (or *T*): share of instances whose "
        "Att-SVM of the optimal tokens is feasible, shares of *W* and *KQ* runs that converge "
        "globally (GD's selection α = opt, as in E6), and share of *W* runs in which every "
        "non-selected token is a support vector. Each cell states its count *k*/*n*; a share "
        f"of fewer than {style.MIN_RUNS} runs is left grey. The dashed line marks *d* = "
        "max(*T* − 1, *n*) along the cell edges."
    ),
    look=(
        "On or right of the dashed line every instance should be feasible (docs/science.md "
        "§4); infeasibility only left of it."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
