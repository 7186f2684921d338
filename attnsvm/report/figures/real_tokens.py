"""Real tokens: does the attention SVM predict GD on image patches? Beyond the paper
(docs/science.md §9, §6 "Beyond the paper").

The experiment's grid has ``n`` and ``param`` (W, KQ) and any of ``patch``, ``positional``,
``generator``, ``digit_pos`` / ``digit_neg``; every combination of those is one series (one
colour; filled and hollow markers in a panel are two quantities of it). One row per
parameterization, the values of an n side by side (categories: no lines join them), each
mean with its confidence interval and each share with its Clopper-Pearson interval:
(a) share of instances whose Att-SVM is feasible, for the optimal tokens (filled) and for GD's
selection alpha (hollow); (b) final corr of W_GD with the SVM of alpha matching the
parameterization (Frobenius for W, nuclear for KQ; filled) and with that of opt (hollow);
(c) shares of the runs converging globally (filled) and not locally (hollow), by selection
(docs/science.md §5); (d) mean effective rank of W_GD (filled) and of the matching SVM of alpha
(hollow); the caption also states the ranks (relative tolerance).
"""

from __future__ import annotations

import itertools

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.config.cell import Cell
from attnsvm.images import token_count, token_dim
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "feasible_fro_opt",
    "feasible_fro_alpha",
    "corr_fro_alpha",
    "corr_nuc_alpha",
    "corr_fro_opt",
    "corr_nuc_opt",
    "convergence",
    "rank_gd",
    "rank_fro_alpha",
    "rank_nuc_alpha",
    "erank_gd",
    "erank_fro_alpha",
    "erank_nuc_alpha",
)
#: the axes that are neither the x axis (n) nor a row (param): one series per combination
SERIES_AXES = ("generator", "patch", "positional", "digit_pos", "digit_neg")
MATCH = captions.MATCH


def series(summary: xr.Dataset) -> list[dict]:
    """Every combination of the series axes present in the summary, as ``{axis: value}``."""
    axes = [a for a in SERIES_AXES if a in summary.dims]
    values = [[v.item() for v in summary[a].values] for a in axes]
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*values)]


def series_label(point: dict) -> str:
    """``patch 2, positional``: a series' values in words."""
    words = []
    for k, v in point.items():
        if k == "positional":
            words.append("positional" if v else "no positions")
        else:
            words.append(f"{k} {v}")
    return ", ".join(words) or "all runs"


def _convergence_counts(summary: xr.Dataset, kind: str, **point):
    """(runs of class ``kind``, typed runs) per n (pooled over other axes)."""
    cnt = summary["count_convergence"]
    cnt = cnt.sel({k: v for k, v in point.items() if k in cnt.dims})
    rest = [d for d in cnt.dims if d not in ("n", "convergence")]
    cnt = cnt.sum(rest) if rest else cnt
    k = np.atleast_1d(np.asarray(cnt.sel(convergence=kind).values, float))
    n = np.atleast_1d(np.asarray(cnt.sum("convergence").values, float))
    return k, n


def _flag_counts(summary: xr.Dataset, name: str, **point):
    """(runs with the 0/1 flag ``name`` set, runs with a value) per n, from its mean and count."""
    mean, _, count = sd.pooled(summary, name, keep=("n",), **point)
    return np.round(np.nan_to_num(mean) * count), count


#: per panel: the kind of each of its two quantities ("share": counts, "mean": statistics)
KINDS = ("share", "mean", "share", "mean")


def _panels(summary: xr.Dataset, p: str, point: dict) -> list[tuple]:
    """(filled, hollow) of the four panels of one series and parameterization: per quantity
    (successes, count) for a share, (mean, std, count) for a mean, per n."""
    norm = MATCH.get(p, "fro")

    def stats(name: str):
        return sd.pooled(summary, name, keep=("n",), param=p, **point)

    return [
        (
            _flag_counts(summary, "feasible_fro_opt", param=p, **point),
            _flag_counts(summary, "feasible_fro_alpha", param=p, **point),
        ),
        (stats(f"corr_{norm}_alpha"), stats(f"corr_{norm}_opt")),
        (
            _convergence_counts(summary, "global", param=p, **point),
            _convergence_counts(summary, "not-local", param=p, **point),
        ),
        (stats("erank_gd"), stats(f"erank_{norm}_alpha")),
    ]


TITLES = (
    "SVM feasible\nfilled opt, hollow α",
    "corr(W$_{GD}$, SVM)\nfilled α, hollow opt",
    "convergence\nfilled global, hollow not-local",
    "effective rank\nfilled W$_{GD}$, hollow SVM(α)",
)


def _draw(ax, x, data, kind: str, **kw):
    if kind == "share":
        return style.share_errorbar(ax, x, *data, **kw)
    return style.mean_errorbar(ax, x, data, **kw)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Per n and series, means and shares with their intervals, one row per
    parameterization; the points of an n side by side."""
    n = [int(v) for v in sd.grid_values(sweep, "n")] or [Cell.n]
    params = sd.params_of(sweep)
    points = series(summary)
    extra = [
        "filled and hollow markers of one colour are the two quantities named in the panel "
        "title; SVM: Frobenius for W runs, nuclear for KQ runs; convergence types by GD's "
        "selection (docs/science.md §5); ranks of SVMs over the feasible instances",
    ]
    notes = style.notes_text(f"means: {style.MEAN_INTERVAL}; shares: {style.SHARE_INTERVAL}", extra)
    fig, axes = style.new_figure(len(params), 4, height=2.1 * len(params) + 0.3, squeeze=False,
                                 sharex=True)  # fmt: skip
    colors = style.PALETTE
    x = np.arange(len(n), dtype=float)
    offsets = style.dodge(2 * len(points), 0.7)
    for row, p in enumerate(params):
        for k, point in enumerate(points):
            color = colors[k % len(colors)]
            for col, pair in enumerate(_panels(summary, p, point)):
                for q, data in enumerate(pair):
                    _draw(axes[row, col], x + offsets[2 * k + q], data, KINDS[col], ls="none",
                          color=color, marker="o", ms=3,
                          mfc=color if q == 0 else "white")  # fmt: skip
        for col, ax in enumerate(axes[row]):
            ax.set_xticks(x)
            ax.set_xticklabels([str(v) for v in n])
            ax.set_xlim(-0.6, len(n) - 0.4)
            if col < 3:
                ax.set_ylim(-0.05, 1.05)
            else:
                ax.set_ylim(bottom=0)
            if row == len(params) - 1:
                ax.set_xlabel("$n$ (examples)")
            style.panel_label(ax, "abcdefgh"[row * 4 + col], TITLES[col])
        axes[row, 0].set_ylabel(f"{style.PARAM_LABELS.get(p, p)} runs")
    handles = [
        Line2D([], [], ls="none", marker="o", ms=3, color=colors[k % len(colors)],
               label=series_label(point))
        for k, point in enumerate(points)
    ]  # fmt: skip
    handles += [
        Line2D([], [], ls="none", marker="o", ms=3, color="0.3", label="filled: first in title"),
        Line2D([], [], ls="none", marker="o", ms=3, color="0.3", mfc="white",
               label="hollow: second in title"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles) // 2 + 1)
    style.add_notes(fig, notes)
    return fig


def _above_threshold(summary: xr.Dataset, point: dict) -> bool | None:
    """Whether the series' d >= max(T - 1, n) for every n: there every selection of data in
    general position is feasible (docs/science.md §4); None if its sizes are unknown."""

    def value(k, default):
        return point.get(k, summary.attrs.get(f"fixed_{k}", default))

    gen, patch = value("generator", "digits"), int(value("patch", Cell.patch))
    positional = bool(value("positional", False))
    if gen not in ("digits", "photos"):
        return None
    T, d = token_count(patch), token_dim(gen, patch, positional)
    n_max = int(summary["n"].max()) if "n" in summary.dims else int(value("n", Cell.n))
    return d >= max(T - 1, n_max)


def numbers(summary: xr.Dataset) -> list[str]:
    """Feasibility, correlations, convergence shares and ranks per series, from the summary."""
    axes = [a for a in np.atleast_1d(summary.attrs.get("axes", [])) if a != "param"]
    p0 = captions.params(summary)[0]
    out = []
    for point in series(summary):
        above = _above_threshold(summary, point)
        if above is not None:
            where = "≥" if above else "<"
            out.append(
                f"{captions.rst_escape(series_label(point))}: *d* {where} max(*T* − 1, *n*) at "
                "the largest *n*; SVM of opt feasible in "
                + captions.pooled_share(summary, "feasible_fro_opt", param=p0, **point)
                + " of its instances"
            )
    out += captions.corr_lines(summary, cross=False)
    for p in captions.params(summary):
        out.append(
            f"*{p}* runs with corr(*W*\\ :sub:`GD`, {captions.NAMES[MATCH.get(p, 'fro')]} SVM "
            "of α) ≥ the threshold (GD converged to the SVM of its selection): "
            + captions.pooled_share(summary, "corr_converged", param=p)
            + "; SVM of α feasible: "
            + captions.pooled_share(summary, "feasible_fro_alpha", param=p)
        )
    out += captions.global_lines(summary, per_d=False)
    for p in captions.params(summary):
        norm = MATCH.get(p, "fro")
        out.append(
            f"mean rank per point, *{p}* runs: of *W*\\ :sub:`GD`, "
            + captions.per_point(summary, "rank_gd_mean", list(axes), param=p)
            + f"; {captions.NAMES[norm]} SVM of α: "
            + captions.per_point(summary, f"rank_{norm}_alpha_mean", list(axes), param=p)
        )
        out.append(
            f"mean effective rank per point, *{p}* runs: of *W*\\ :sub:`GD`, "
            + captions.per_point(summary, "erank_gd_mean", list(axes), param=p)
            + f"; {captions.NAMES[norm]} SVM of α: "
            + captions.per_point(summary, f"erank_{norm}_alpha_mean", list(axes), param=p)
        )
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="real_tokens",
    label="real tokens",
    what=(
        "Beyond the paper, real tokens: patches of scikit-learn's bundled images (8×8 digits "
        "or windows of two photographs; docs/science.md §9) as tokens, the "
        "head *v* a logistic regression on the mean tokens. Against *n*, per patch size and "
        "positional encoding (means with their "
        f"{style.CI_WORDS}, shares with their {style.CP_WORDS}): feasibility of the Att-SVM "
        "for opt and for GD's selection α, "
        "final corr of GD with the SVM of α and of opt (Frobenius for *W*, nuclear for *KQ*), "
        "shares of global and not-local convergence, effective rank of *W*\\ :sub:`GD` and of "
        "the SVM."
    ),
    look=(
        "The theory predicts corr near 1 with the SVM of α whenever it is feasible (the "
        "implicit bias holds for any data), low rank for *KQ* like the nuclear SVM, and "
        "feasibility for every selection when *d* ≥ max(*T* − 1, *n*) and the tokens are in "
        "general position. Real patches are not: without positions two equal patches (blank "
        "corners of a digit) are equal tokens, and the SVM of a selection with a copy is "
        "infeasible; positional encodings remove the copies."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
