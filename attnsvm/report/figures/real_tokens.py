"""Real tokens: does the attention SVM predict GD on image patches? Beyond the paper
(docs/science.md §9, §6 "Beyond the paper").

The experiment's grid has ``n`` and ``param`` (W, KQ) and any of ``patch``, ``positional``,
``generator``, ``digit_pos`` / ``digit_neg``; every combination of those is one series (one
colour; solid and dashed lines in a panel are two quantities of it). One row per
parameterization, against n:
(a) share of instances whose Att-SVM is feasible, for the optimal tokens (solid) and for GD's
selection alpha (dashed); (b) final corr of W_GD with the SVM of alpha matching the
parameterization (Frobenius for W, nuclear for KQ; solid) and with that of opt (dashed);
(c) shares of the runs converging globally (solid) and not locally (dashed), by selection
(docs/science.md §5); (d) mean effective rank of W_GD (solid) and of the matching SVM of alpha
(dashed); the caption also states the ranks (relative tolerance).
"""

from __future__ import annotations

import itertools

import numpy as np
import xarray as xr

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


def _convergence_share(summary: xr.Dataset, kind: str, **point) -> np.ndarray:
    """Share of the typed runs of class ``kind`` per n (pooled over other axes)."""
    cnt = summary["count_convergence"]
    cnt = cnt.sel({k: v for k, v in point.items() if k in cnt.dims})
    rest = [d for d in cnt.dims if d not in ("n", "convergence")]
    cnt = cnt.sum(rest) if rest else cnt
    total = cnt.sum("convergence")
    share = cnt.sel(convergence=kind) / total.where(total > 0)
    return np.atleast_1d(np.asarray(share.values, float))


def _panels(summary: xr.Dataset, p: str, point: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """(solid, dashed) means per n of the four panels of one series and parameterization."""
    norm = MATCH.get(p, "fro")

    def mean(name: str) -> np.ndarray:
        return sd.pooled(summary, name, keep=("n",), param=p, **point)[0]

    return [
        (mean("feasible_fro_opt"), mean("feasible_fro_alpha")),
        (mean(f"corr_{norm}_alpha"), mean(f"corr_{norm}_opt")),
        (
            _convergence_share(summary, "global", param=p, **point),
            _convergence_share(summary, "not-local", param=p, **point),
        ),
        (mean("erank_gd"), mean(f"erank_{norm}_alpha")),
    ]


TITLES = (
    "SVM feasible\nopt —, α - -",
    "corr(W$_{GD}$, SVM)\nα —, opt - -",
    "convergence\nglobal —, not-local - -",
    "effective rank\nW$_{GD}$ —, SVM(α) - -",
)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Means over the ok runs per n for every series, one row per parameterization."""
    n = [int(v) for v in sd.grid_values(sweep, "n")] or [Cell.n]
    params = sd.params_of(sweep)
    points = series(summary)
    extra = [
        "solid and dashed lines of one colour are the two quantities named in the panel title; "
        "SVM: Frobenius for W runs, nuclear for KQ runs; convergence types by GD's selection "
        "(docs/science.md §5); ranks of SVMs over the feasible instances",
    ]
    footer = style.footer_text(sweep, band=None, extra=extra, unit="point (n, series, param)")
    fig, axes = style.new_figure(
        len(params), 4, height=2.0 * len(params), footer_lines=style.footer_lines(footer),
        squeeze=False, sharex=True,
    )  # fmt: skip
    colors = style.PALETTE
    for row, p in enumerate(params):
        for k, point in enumerate(points):
            color = colors[k % len(colors)]
            for col, (solid, dashed) in enumerate(_panels(summary, p, point)):
                ax = axes[row, col]
                label = series_label(point) if row == 0 and col == 0 else None
                ax.plot(n, solid, color=color, marker="o", ms=3, label=label)
                ax.plot(n, dashed, color=color, marker="s", ms=3, ls="--", mfc="white")
        for col, ax in enumerate(axes[row]):
            ax.set_xscale("log", base=2)
            ax.set_xticks(n)
            ax.set_xticklabels([str(v) for v in n])
            if col < 3:
                ax.set_ylim(-0.05, 1.05)
            else:
                ax.set_ylim(bottom=0)
            if row == len(params) - 1:
                ax.set_xlabel("$n$ (examples)")
            style.panel_label(ax, "abcdefgh"[row * 4 + col], TITLES[col])
        axes[row, 0].set_ylabel(f"{style.PARAM_LABELS.get(p, p)} runs")
    style.outside_legend(fig, axes[0, :1].tolist(), loc="outside upper center", ncols=4)
    style.add_footer(fig, footer)
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
        "positional encoding: feasibility of the Att-SVM for opt and for GD's selection α, "
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
