"""Which norm does each optimizer's attention minimize? (docs/science.md §10, beyond the paper.)

Grid axes ``optimizer`` (normalized, sign, adam, spectral, mirror1p5, mirror3, signum, muon),
optionally ``param`` and ``d``, and Adam's ``adam_beta1`` / ``adam_beta2``, ``batch_size`` and
``momentum`` (one row per value, issues 29 and 42);
cells with ``norm_svms: true``. (a) heatmap optimizer x norm of the mean
final corr(W_GD, SVM_norm(alpha)), the cell the linear theory predicts outlined; (b) the same
for the margin ratio (1: W_GD's direction is a max-margin direction in that norm, whichever
solution); (c) mean corr with the predicted norm's SVM vs iteration per optimizer, band: the
mean's confidence interval; (d) when
``d`` is a grid axis: the diagonal's lead, final corr with the predicted SVM minus the best
corr with any other norm's SVM, vs d (> 0: the prediction wins). The spectral SVM's corr is
not stored (its optimal face is wide, :data:`attnsvm.svm.norms.WIDE_FACE`): its column of (a)
is grey ("not stored"), and a prediction of the spectral norm is outlined and judged in the
margin ratio, panel (b), only.
"""

from __future__ import annotations

import itertools

import numpy as np
import seaborn as sns
import xarray as xr
from matplotlib.patches import Rectangle

from attnsvm.gd.optimizers import PREDICTED_NORM
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure
from attnsvm.svm.norms import WIDE_FACE

#: the SVM norms compared, in column order (attnsvm.svm.norms + Frobenius and nuclear)
NORMS = ("fro", "nuc", "max", "spec", "l1p5", "l3")
NORM_LABELS = {"fro": "Frob.", "nuc": "nuclear", "max": "max-entry", "spec": "spectral",
               "l1p5": r"$\ell_{1.5}$", "l3": r"$\ell_3$"}  # fmt: skip
#: the norms whose corr is not stored (their optimal face is wide: attnsvm.svm.norms)
NO_CORR = WIDE_FACE
VARIABLES = tuple(
    f"{k}_{n}_alpha"
    for k in ("corr", "mratio", "curve_corr")
    for n in NORMS
    if k == "mratio" or n not in NO_CORR
)


def predicted(opt: str, param: str) -> str | None:
    """The norm the linear theory predicts for ``opt`` on ``param`` (None: no prediction;
    for (K, Q) only normalized GD has one, the nuclear norm)."""
    if param == "KQ":
        return "nuc" if opt == "normalized" else None
    return PREDICTED_NORM.get(opt)


#: grid axes that split an optimizer's row, one row per value (Adam's betas, issue 29; the
#: batch size and the momentum of Signum and Muon, issue 42)
ROW_AXES = ("adam_beta1", "adam_beta2", "batch_size", "momentum")
#: a row of the heatmaps: optimizer, param and the values of the row axes ((axis, value), ...)
Row = tuple[str, str, tuple[tuple[str, float | str], ...]]


def rows_of(summary: xr.Dataset) -> list[Row]:
    """(optimizer, param, split) rows of the heatmaps, in the grid's order; ``split`` holds
    the values of the :data:`ROW_AXES` that are grid axes (empty without them)."""
    if "optimizer" in summary.dims:
        opts = [str(o) for o in np.atleast_1d(summary["optimizer"].values)]
    else:
        opts = [str(summary.attrs.get("fixed_optimizer", "normalized"))]
    axes = [[(a, _value(v)) for v in summary[a].values] for a in ROW_AXES if a in summary.dims]
    splits = list(itertools.product(*axes))
    return [(o, p, sp) for p in captions.params(summary) for o in opts for sp in splits]


def _value(v):
    """A row axis' coordinate value as the summary holds it (it selects the row): a float, or
    the collected string of an optional field (``batch_size``: ``"1"``, ``"null"``)."""
    v = v.item() if hasattr(v, "item") else v
    return v if isinstance(v, str) else float(v)


def _shown(axis: str, v, number) -> str:
    """A row axis' value in words (``number`` formats a float): ``null`` of ``batch_size`` is
    the full batch."""
    if not isinstance(v, str):
        return number(v)
    return "full" if (axis, v) == ("batch_size", "null") else v


def label(row: Row, with_param: bool = True) -> str:
    """The optimizer's readable name, with its parameterization when asked and the row axes'
    values (``Adam, $\\beta_2 = 0.95$``)."""
    o, p, split = row
    text = style.optimizer_label(o)
    if with_param:
        text += f" ({style.PARAM_LABELS.get(p, p)})"
    return ", ".join([text, *(style.axis_value(a, _shown(a, v, "{:g}".format)) for a, v in split)])


#: the row axes' names in caption text (RST, no mathtext)
CAPTION_AXES = {"adam_beta1": "β₁", "adam_beta2": "β₂", "batch_size": "batch size",
                "momentum": "momentum β"}  # fmt: skip


def caption_label(row: Row) -> str:
    """A row in caption text: ``adam, β₂ = 0.95``."""
    o, _, split = row
    values = (f"{CAPTION_AXES.get(a, a)} = {_shown(a, v, captions.fmt)}" for a, v in split)
    return ", ".join([o, *values])


def table(summary: xr.Dataset, prefix: str, keep=(), **point) -> np.ndarray:
    """(rows, norms, *keep) pooled means of ``<prefix>_<norm>_alpha`` (NaN where absent)."""
    out = []
    for o, p, split in rows_of(summary):
        out.append([sd.pooled(summary, f"{prefix}_{n}_alpha", keep, optimizer=o, param=p,
                              **dict(split), **point)[0] for n in NORMS])  # fmt: skip
    return np.asarray(out, float)


def _heatmap(ax, summary, prefix: str, title: str, letter: str, labels: bool = True) -> None:
    """One heatmap optimizer x norm; cells without a value grey; the predicted cell outlined
    where it has a value (a prediction of a norm whose corr is not stored: in (b) only)."""
    rows = rows_of(summary)
    vals = table(summary, prefix)
    names = [label(r, len({p for _, p, _ in rows}) > 1) for r in rows] if labels else False
    text = np.vectorize(lambda x: "" if not np.isfinite(x) else f"{x:.2f}".replace("0.", "."))
    sns.heatmap(vals, ax=ax, vmin=0, vmax=1, cmap=style.SEQUENTIAL, annot=text(vals), fmt="",
                annot_kws={"fontsize": 5}, cbar=False,
                xticklabels=[NORM_LABELS[n] for n in NORMS], yticklabels=names)  # fmt: skip
    ax.set_facecolor(style.NO_VALUE)  # NaN cells: not stored / no value
    for i, (o, p, _) in enumerate(rows):
        n = predicted(o, p)
        if n is not None and np.isfinite(vals[i, NORMS.index(n)]):
            ax.add_patch(_box(NORMS.index(n), i))
    ax.set_xlabel("SVM norm")
    ax.tick_params(labelsize=6)
    ax.tick_params(axis="y", labelrotation=0)
    style.panel_label(ax, letter, title)


def _box(x: int, y: int):

    return Rectangle((x, y), 1, 1, fill=False, edgecolor=BOX, lw=1.2)


#: the outline of a predicted cell
BOX = style.PALETTE[3]


def _colors(summary) -> dict[Row, tuple]:
    """One colour per (optimizer, param) row of the house palette, the same in (c) and (d)."""
    rows = rows_of(summary)
    return {row: style.PALETTE[i % len(style.PALETTE)] for i, row in enumerate(rows)}


def _curves(ax, summary, it) -> None:
    colors = _colors(summary)
    for row in rows_of(summary):
        o, p, split = row
        if (n := predicted(o, p)) is None or n in NO_CORR:
            continue
        stats = sd.pooled(summary, f"curve_corr_{n}_alpha", optimizer=o, param=p, **dict(split))
        style.mean_band(ax, it, stats, colors[row], label=f"{label(row)} vs {NORM_LABELS[n]}",
                        clip=(-1.0, 1.0))  # fmt: skip
    ax.set_xscale("log")
    ax.axhline(1.0, color="0.6", lw=0.5)
    ax.set_xlabel("iteration $k$")
    ax.set_ylabel("mean corr with predicted SVM")
    style.panel_label(ax, "c", "vs iteration")


def lead(summary: xr.Dataset, keep=()) -> dict[Row, np.ndarray]:
    """Per row with a prediction: mean final corr with the predicted SVM minus the largest mean
    final corr with another norm's SVM (> 0: the prediction wins), over ``keep`` dims."""
    vals = table(summary, "corr", keep)
    out = {}
    for i, row in enumerate(rows_of(summary)):
        if (n := predicted(*row[:2])) is not None and n not in NO_CORR:
            j = NORMS.index(n)
            others = np.delete(vals[i], j, axis=0)
            out[row] = vals[i, j] - np.nanmax(others, axis=0)
    return out


def _versus_d(ax, summary) -> None:
    ds = np.asarray(summary["d"].values, float)
    colors = _colors(summary)
    for row, v in lead(summary, keep=("d",)).items():
        ax.plot(ds, v, color=colors[row])
    ax.axhline(0.0, color="0.6", lw=0.5)
    ax.set_xlabel("$d$")
    ax.set_ylabel("corr lead of predicted SVM")
    style.panel_label(ax, "d", "lead vs d")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a, b) heatmaps and (c) curves from the summary; (d) when d is a grid axis."""
    with_d = "d" in summary.dims and summary.sizes["d"] > 1
    extra = [
        "(a) mean final corr(W_GD, SVM of α in each norm; spectral: not stored, its optimal face "
        "is wide: grey), (b) mean margin ratio in each norm (1: a max-margin direction); "
        "outlined: the norm the linear theory predicts (a spectral prediction in (b) only)",
        "(c) mean corr with the predicted norm's SVM; (d) predicted corr minus the best other",
        "heatmap cells: means over seeds (the claims ledger states their intervals)",
    ]
    notes = style.notes_text(f"(c) {style.MEAN_INTERVAL}", extra)
    height = max(2.8, 0.2 * len(rows_of(summary)))
    fig, axes = style.new_figure(1, 4 if with_d else 3, height=height, squeeze=False)
    _heatmap(axes[0, 0], summary, "corr", "final corr", "a")
    _heatmap(axes[0, 1], summary, "mratio", "margin ratio", "b", labels=False)
    _curves(axes[0, 2], summary, sd.iterations_of(sweep))
    if with_d:
        _versus_d(axes[0, 3], summary)
    handles, labels = axes[0, 2].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=6)
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Per optimizer with a prediction: its predicted norm, the mean final corr with that
    norm's SVM, the norm with the largest mean corr, and whether the prediction held (without
    one: the norm with the largest mean corr); a prediction of a norm whose corr is not stored
    (:data:`NO_CORR`) by the margin ratios instead; per d, the prediction's lead."""
    vals = table(summary, "corr")
    mr = table(summary, "mratio")
    out = []
    for i, row in enumerate(rows_of(summary)):
        o, p, _ = row
        n = predicted(o, p)
        head = f"*{caption_label(row)}* on *{p}*"
        if not np.isfinite(vals[i]).any():
            continue
        if n is None:
            k = int(np.nanargmax(vals[i]))
            out.append(f"{head}: no prediction; largest final corr with the "
                       f"{NORMS[k]} SVM, {captions.fmt(vals[i, k])}")  # fmt: skip
            continue
        if n in NO_CORR:
            j, best = NORMS.index(n), NORMS[int(np.nanargmax(mr[i]))]
            held = "held" if best == n else f"did not hold (largest margin ratio: {best})"
            out.append(
                f"{head}: predicted {n}, margin ratio {captions.fmt(mr[i, j])} (corr not "
                f"stored: the {n} SVM's optimal face is wide); by the margin ratios the "
                f"prediction {held}"
            )
            continue
        j, best = NORMS.index(n), NORMS[int(np.nanargmax(vals[i]))]
        held = "held" if best == n else f"did not hold (largest: {best})"
        out.append(
            f"{head}: predicted {n}, final corr {captions.fmt(vals[i, j])}, margin ratio "
            f"{captions.fmt(mr[i, j])}; the prediction {held}"
        )
    if "d" in summary.dims and summary.sizes["d"] > 1:
        ds = [captions.fmt(x) for x in summary["d"].values]
        for row, v in lead(summary, keep=("d",)).items():
            per_d = "; ".join(f"d = {d}: {captions.fmt(x)}" for d, x in zip(ds, v, strict=True))
            head = f"*{caption_label(row)}* on *{row[1]}*"
            out.append(f"lead of the predicted SVM's corr over the best other, {head}: {per_d}")
    return out


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="norms",
    label="optimizer x norm",
    what=(
        "Beyond the paper (docs/science.md §10): for each optimizer, the mean final corr of W "
        "with the attention SVM of its selection α in each norm (Frobenius, nuclear, "
        "max-entry, spectral, l_1.5, l_3), the margin ratio in each norm, and the corr with "
        "the predicted norm's SVM against the iteration."
    ),
    look=(
        "The linear theory predicts the outlined cells: normalized GD the Frobenius SVM, sign "
        "descent, Signum and Adam the max-entry SVM, spectral descent and Muon the spectral "
        "SVM, l_p mirror descent the l_p SVM, normalized GD on (K, Q) the nuclear SVM; at "
        "batch size 1, Adam may reach the Frobenius SVM instead (Baek, Song, Yun, arXiv "
        "2510.26303). A prediction holds "
        "where its cell is the largest of its row; the spectral SVM's optimal face is wide, "
        "so its correlation, which depends on the solution the solver returns, is not stored "
        "and its prediction is read in the margin ratios."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
