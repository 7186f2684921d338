"""One publication style for every figure: theme, colours, labels, panels, intervals, legends
and the caption notes (docs/science.md §6 for what the figures show).

All figures use the Agg backend, the seaborn ``paper`` context with ``ticks`` style, one
palette (seaborn's ``colorblind``, :data:`PALETTE`; heatmaps: :data:`SEQUENTIAL`) and STIX
(LaTeX-like) mathtext. Uncertainty is drawn as the claims state it (docs/science.md §13):
95% confidence intervals, of a mean by Student's t (:func:`mean_interval`,
``scipy.stats.t``), of a share by Clopper-Pearson (:func:`share_interval`,
``scipy.stats.binomtest``); each figure's caption names the interval it draws. Nothing of the
run's bookkeeping is drawn in the image: seed and cell counts, what the bands mean and the
counts of excluded or ambiguous runs go to the figure's report caption (:func:`add_notes`),
so no run is dropped silently. Readable names of optimizers and grid axes come from one place
(:data:`OPTIMIZER_LABELS`, :data:`AXIS_LABELS`).
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from scipy import stats  # noqa: E402

from attnsvm.config.claims import DEFAULT_CONFIDENCE  # noqa: E402
from attnsvm.sweep.summary import nan_quantiles, nan_stats  # noqa: E402

#: Full text width of a two-column paper (inches) and a matching height unit.
WIDTH = 6.75
COLUMN = 3.3
PNG_DPI = 200

PALETTE = sns.color_palette("colorblind")
#: the colormap of every heatmap (shares and means in [0, 1]); cells without a value: light grey
SEQUENTIAL = "viridis"
NO_VALUE = "0.88"

#: confidence level of every interval drawn (the claims' default, docs/science.md §13)
CONFIDENCE = DEFAULT_CONFIDENCE
#: fewest runs behind a share that a heatmap colours, or a median curve summarizes (below it,
#: even a share of 0 or 1 has a 95% Clopper-Pearson interval wider than 0.6: counts are shown)
MIN_RUNS = 5
#: caption phrases naming the intervals (scipy functions that compute them)
MEAN_INTERVAL = (
    f"{CONFIDENCE:.0%} confidence interval of the mean over seeds (Student t, "
    "scipy.stats.t; none from a single seed)"
)
SHARE_INTERVAL = f"{CONFIDENCE:.0%} Clopper-Pearson interval (scipy.stats.binomtest)"
#: the same, short, for the ``what`` of a caption
CI_WORDS = f"{CONFIDENCE:.0%} confidence interval (Student t)"
CP_WORDS = f"{CONFIDENCE:.0%} Clopper-Pearson interval"

#: Colors of the two parameterizations and of the convergence types (fixed across figures).
PARAM_COLORS = {"W": PALETTE[0], "KQ": PALETTE[1]}
CONVERGENCE_COLORS = {
    "global": PALETTE[2],
    "local": PALETTE[0],
    "not-local": PALETTE[3],
    "unsaturated": PALETTE[7],
}
"""(``unsaturated`` is a class of the strict rule only, ``codes.CONVERGENCE_STRICT``.)"""

#: Math labels used in legends and axes.
W_MM = r"W^{\mathrm{mm}}"
W_MM_NUC = r"W^{\mathrm{mm}}_{\star}"
W_SVMEQ = r"W^{\mathrm{svm}}_{\mathrm{eq}}"
W_MM_GEN = r"W^{\mathrm{mm}}_{\mathrm{gen}}"
PARAM_LABELS = {"W": r"$W$", "KQ": r"$KQ^{\top}$"}

#: readable optimizer names (Cell.optimizer values; docs/science.md §3, §10)
OPTIMIZER_LABELS = {
    "normalized": "normalized GD",
    "plain": "GD",
    "sign": "sign descent",
    "adam": "Adam",
    "spectral": "spectral descent",
    "mirror1p5": r"$\ell_{1.5}$ mirror descent",
    "mirror3": r"$\ell_3$ mirror descent",
    "polyak": "Polyak step",
    "signum": "Signum",
    "muon": "Muon",
}
#: short optimizer names for tick labels
OPTIMIZER_SHORT = {
    "normalized": "norm.",
    "plain": "GD",
    "sign": "sign",
    "adam": "Adam",
    "spectral": "spectral",
    "mirror1p5": r"$\ell_{1.5}$ mirror",
    "mirror3": r"$\ell_3$ mirror",
    "polyak": "Polyak",
    "signum": "Signum",
    "muon": "Muon",
}
#: math names of grid axes in labels
AXIS_LABELS = {
    "adam_beta1": r"$\beta_1$",
    "adam_beta2": r"$\beta_2$",
    "lr": r"$\eta$",
    "lam": r"$\lambda$",
    "snr": "SNR",
    "n": "$n$",
    "T": "$T$",
    "d": "$d$",
    "m": "$m$",
    "heads": "$H$",
    "batch_size": "$b$",
    "momentum": r"$\beta$",
}


def optimizer_label(name: str, short: bool = False) -> str:
    """The readable name of optimizer ``name`` (the name itself when it has none)."""
    return (OPTIMIZER_SHORT if short else OPTIMIZER_LABELS).get(str(name), str(name))


def axis_value(axis: str, value) -> str:
    """``$\\beta_2 = 0.95$``-like text for one grid value."""
    v = value.item() if hasattr(value, "item") else value
    text = f"{v:g}" if isinstance(v, float) else str(v)
    name = AXIS_LABELS.get(axis, axis)
    if name.startswith("$") and name.endswith("$") and not text.isalpha():
        return f"${name[1:-1]} = {text}$"
    return f"{name} = {text}"  # a word (``full``) stays upright, out of the math


def apply_style() -> None:
    """Set the publication style (idempotent)."""
    sns.set_theme(context="paper", style="ticks", palette="colorblind")
    plt.rcParams.update(
        {
            "font.family": "serif",
            "font.serif": ["STIXGeneral", "DejaVu Serif"],
            "mathtext.fontset": "stix",
            "font.size": 8,
            "axes.titlesize": 8.5,
            "axes.labelsize": 8,
            "legend.fontsize": 6.5,
            "legend.title_fontsize": 7,
            "xtick.labelsize": 7,
            "ytick.labelsize": 7,
            "lines.linewidth": 1.3,
            "lines.markersize": 4,
            "legend.frameon": False,
            "legend.handlelength": 3.0,  # a dash and its gap show beside a centred marker
            "axes.spines.top": False,
            "axes.spines.right": False,
            "pdf.fonttype": 42,
            "ps.fonttype": 42,
            "savefig.dpi": PNG_DPI,
            "figure.dpi": 100,
        }
    )


def new_figure(nrows: int = 1, ncols: int = 1, width: float = WIDTH, height: float = 2.4, **kwargs):
    """A constrained-layout figure (nothing drawn below the panels: notes go to the caption)."""
    apply_style()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)
    fig.get_layout_engine().set(h_pad=0.03, w_pad=0.03)
    return fig, axes


def panel_label(ax, letter: str, title: str = "") -> None:
    """Bold panel letter ``(a)`` followed by an optional title, at the axes' top left."""
    ax.set_title(rf"$\bf{{({letter})}}$ {title}".rstrip(), loc="left")


def mean_interval(mean, std, count, confidence: float = CONFIDENCE):
    """``(lo, hi)``: the Student t confidence interval of a mean from its sample standard
    deviation (ddof 1) and count (``scipy.stats.t``); NaN where ``count < 2``."""
    mean, std, count = (np.asarray(v, dtype=float) for v in (mean, std, count))
    df = np.where(count >= 2, count - 1, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.5 + confidence / 2, df) * std / np.sqrt(count)
    return mean - half, mean + half


def share_interval(successes, count, confidence: float = CONFIDENCE):
    """``(lo, hi)``: the exact (Clopper-Pearson) interval of each share ``successes / count``
    (``scipy.stats.binomtest``, as the claims compute it); NaN where ``count == 0``."""
    k = np.atleast_1d(np.asarray(successes, dtype=float))
    n = np.atleast_1d(np.asarray(count, dtype=float))
    k, n = np.broadcast_arrays(k, n)
    lo, hi = np.full(k.shape, np.nan), np.full(k.shape, np.nan)
    for idx in np.ndindex(k.shape):
        if n[idx] > 0 and np.isfinite(k[idx]):
            ci = stats.binomtest(int(k[idx]), int(n[idx])).proportion_ci(confidence, "exact")
            lo[idx], hi[idx] = ci.low, ci.high
    return lo, hi


def plot_band(ax, x, values, color, label=None, linestyle="-", stat="mean", clip=None, **kw):
    """Line and band over the first axis of per-run ``values`` (runs x points), for figures
    that split runs the summary does not (E4's clear and ambiguous runs).

    ``stat="mean"``: mean and its confidence interval (:func:`mean_interval`);
    ``stat="median"``: median and interquartile range. See :func:`draw_band` for ``clip`` and
    the return value.
    """
    values = np.asarray(values, dtype=float).reshape(-1, len(x)) if len(x) else np.empty((0, 0))
    if values.size == 0 or not np.isfinite(values).any():
        return None
    if stat == "median":
        center, lo, hi = nan_quantiles(values, (0.5, 0.25, 0.75))
    else:
        center, std, count = nan_stats(values)
        lo, hi = mean_interval(center, std, count)
    return draw_band(ax, x, center, lo, hi, color, label, linestyle, clip, **kw)


def mean_band(ax, x, stats, color, label=None, linestyle="-", clip=None, **kw):
    """Line of the mean and band of its confidence interval (:func:`mean_interval`) from
    ``stats = (mean, std, count)`` of the summary (:func:`attnsvm.report.sweepdata.pooled`)."""
    mean, std, count = stats
    if not np.isfinite(mean).any():
        return None
    lo, hi = mean_interval(mean, std, count)
    return draw_band(ax, x, mean, lo, hi, color, label, linestyle, clip, **kw)


def draw_band(ax, x, center, lo, hi, color, label=None, linestyle="-", clip=None, **kw):
    """Line ``center`` and the band ``lo .. hi`` (alpha 0.18). ``clip=(lo, hi)``: the band is
    clipped to the range the values can take (a band of a correlation would otherwise run
    above 1). Returns the Line2D (None when nothing is finite)."""
    if not np.isfinite(center).any():
        return None
    if clip is not None:
        lo, hi = np.clip(lo, *clip), np.clip(hi, *clip)
    (line,) = ax.plot(x, center, color=color, linestyle=linestyle, label=label, **kw)
    ax.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
    return line


def mean_errorbar(ax, x, stats, clip=None, **kw):
    """Markers at the means and bars of their confidence intervals (:func:`mean_interval`)
    from ``stats = (mean, std, count)``; ``clip``: the range the values can take."""
    mean, std, count = (np.atleast_1d(np.asarray(v, dtype=float)) for v in stats)
    lo, hi = mean_interval(mean, std, count)
    if clip is not None:
        lo, hi = np.clip(lo, *clip), np.clip(hi, *clip)
    yerr = np.nan_to_num(np.vstack([mean - lo, hi - mean]), nan=0.0)
    kw.setdefault("capsize", 1.5)
    kw.setdefault("elinewidth", 0.7)
    return ax.errorbar(x, mean, yerr=np.maximum(yerr, 0.0), **kw)


def share_errorbar(ax, x, successes, count, **kw):
    """Markers at the shares ``successes / count`` and bars of their Clopper-Pearson
    intervals (:func:`share_interval`); nothing where ``count == 0``."""
    k = np.atleast_1d(np.asarray(successes, dtype=float))
    n = np.atleast_1d(np.asarray(count, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    lo, hi = share_interval(k, n)
    yerr = np.nan_to_num(np.vstack([share - lo, hi - share]), nan=0.0)
    kw.setdefault("capsize", 1.5)
    kw.setdefault("elinewidth", 0.7)
    return ax.errorbar(x, share, yerr=np.maximum(yerr, 0.0), **kw)


def dodge(n_series: int, width: float = 0.6) -> np.ndarray:
    """Offsets that set ``n_series`` series side by side around a categorical position."""
    if n_series <= 1:
        return np.zeros(max(n_series, 1))
    return np.linspace(-width / 2, width / 2, n_series)


# ----------------------------------------------------------------------------- caption notes
# Nothing of the run's bookkeeping is drawn in a figure: the caption (attnsvm.report.captions)
# states the settings, seeds and cell counts, and carries the notes a plot function makes
# (what its intervals are, counts of excluded or ambiguous runs, definitions).
_NOTES_ATTR = "_attnsvm_caption_notes"


def notes_text(interval: str | None = MEAN_INTERVAL, extra: Iterable[str] = ()) -> list[str]:
    """A figure's caption notes: what its intervals are (``interval``), that only ok cells
    enter the statistics, then ``extra``."""
    first = [f"intervals: {interval}"] if interval else []
    first.append("only ok cells enter the statistics")
    return ["; ".join(first), *(e for e in extra if e)]


def add_notes(fig, notes: Iterable[str]) -> None:
    """Attach caption notes to ``fig`` (added to any already there)."""
    setattr(fig, _NOTES_ATTR, [*caption_notes(fig), *(n for n in notes if n)])


def caption_notes(fig) -> list[str]:
    """The caption notes a figure's plot function attached (:func:`add_notes`)."""
    return list(getattr(fig, _NOTES_ATTR, []))


def legend(ax, **kwargs):
    """``ax.legend`` when something is labelled, else a centred "no ok data" note."""
    handles, labels = ax.get_legend_handles_labels()
    if kwargs.get("handles") or handles:
        return ax.legend(**kwargs)
    ax.text(0.5, 0.5, "no ok data", transform=ax.transAxes, ha="center", va="center", color="0.4")
    return None


def runs(k: int, word: str = "run") -> str:
    """``"1 run"`` / ``"3 runs"``."""
    return f"{k} {word}{'' if k == 1 else 's'}"


def plain_log_axis(ax, axis: str = "y") -> None:
    """Log axis labelled at 1, 2, 5 x 10^k with plain numbers when it spans few decades."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if lo > 0 and hi > 0 and np.log10(hi / lo) < 2.5:
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


# ----------------------------------------------------------------------------- legends
def outside_legend(fig, axes, loc: str = "outside right upper", prefixes=None, extra=(), **kwargs):
    """One figure legend outside the panels (never over data) for the labelled artists of
    ``axes``; a label shared by several panels appears once. ``prefixes``: per axes, a text
    put before its labels (e.g. ``"(a) "``); ``extra``: more (labelled) handles, appended.
    Returns the legend, or None when nothing is
    labelled (each empty panel then says "no ok data", as :func:`legend` does)."""
    handles, labels = [], []
    axes = list(np.atleast_1d(axes))
    for i, ax in enumerate(axes):
        pre = prefixes[i] if prefixes else ""
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if pre + lab not in labels:
                handles.append(h)
                labels.append(pre + lab)
    if not handles:
        for ax in axes:
            legend(ax)
        return None
    handles += list(extra)
    labels += [h.get_label() for h in extra]
    return fig.legend(handles, labels, loc=loc, **kwargs)
