"""One publication style for every figure: theme, colours, labels, panels, bands, legends and
the footer (docs/science.md §6 for what the figures show).

All figures use the Agg backend, the seaborn ``paper`` context with ``ticks`` style, the
colorblind palette and STIX (LaTeX-like) mathtext. Every figure carries a one-line footer
with the seed count and the cell status counts; what the bands mean and the counts of
excluded or ambiguous runs go to the figure's report caption (caption notes), so no run is
dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from attnsvm.report.sweepdata import seeds_per_point, status_counts  # noqa: E402
from attnsvm.sweep.summary import nan_quantiles, nan_stats  # noqa: E402

#: Full text width of a two-column paper (inches) and a matching height unit.
WIDTH = 6.75
COLUMN = 3.3
PNG_DPI = 200
FOOTER_SIZE = 6.0

PALETTE = sns.color_palette("colorblind")

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
            "axes.spines.top": False,
            "axes.spines.right": False,
            "pdf.fonttype": 42,
            "ps.fonttype": 42,
            "savefig.dpi": PNG_DPI,
            "figure.dpi": 100,
        }
    )


def new_figure(
    nrows: int = 1,
    ncols: int = 1,
    width: float = WIDTH,
    height: float = 2.4,
    footer_lines: int = 2,
    **kwargs,
):
    """A constrained-layout figure with room at the bottom for ``footer_lines`` footer lines."""
    apply_style()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)
    bottom = min(0.3, footer_lines * FOOTER_SIZE * 1.45 / 72.0 / height + 0.01)
    fig.get_layout_engine().set(rect=(0.0, bottom, 1.0, 1.0 - bottom), h_pad=0.03, w_pad=0.03)
    return fig, axes


def panel_label(ax, letter: str, title: str = "") -> None:
    """Bold panel letter ``(a)`` followed by an optional title, at the axes' top left."""
    ax.set_title(rf"$\bf{{({letter})}}$ {title}".rstrip(), loc="left")


def plot_band(ax, x, values, color, label=None, linestyle="-", stat="mean", clip=None, **kw):
    """Line and band over the first axis of per-run ``values`` (runs x points), for figures
    that split runs the summary does not (E4's clear and ambiguous runs).

    ``stat="mean"``: mean ± std; ``stat="median"``: median and interquartile range. See
    :func:`draw_band` for ``clip`` and the return value.
    """
    values = np.asarray(values, dtype=float).reshape(-1, len(x)) if len(x) else np.empty((0, 0))
    if values.size == 0 or not np.isfinite(values).any():
        return None
    if stat == "median":
        center, lo, hi = nan_quantiles(values, (0.5, 0.25, 0.75))
    else:
        center, std, _ = nan_stats(values)
        lo, hi = center - std, center + std
    return draw_band(ax, x, center, lo, hi, color, label, linestyle, clip, **kw)


def mean_band(ax, x, stats, color, label=None, linestyle="-", clip=None, **kw):
    """Line and mean ± std band from ``stats = (mean, std, count)`` of the summary
    (:func:`attnsvm.report.sweepdata.pooled`)."""
    mean, std, _ = stats
    if not np.isfinite(mean).any():
        return None
    return draw_band(ax, x, mean, mean - std, mean + std, color, label, linestyle, clip, **kw)


def draw_band(ax, x, center, lo, hi, color, label=None, linestyle="-", clip=None, **kw):
    """Line ``center`` and the band ``lo .. hi`` (alpha 0.18). ``clip=(lo, hi)``: the band is
    clipped to the range the values can take (a mean ± std band of a correlation would
    otherwise run above 1). Returns the Line2D (None when nothing is finite)."""
    if not np.isfinite(center).any():
        return None
    if clip is not None:
        lo, hi = np.clip(lo, *clip), np.clip(hi, *clip)
    (line,) = ax.plot(x, center, color=color, linestyle=linestyle, label=label, **kw)
    ax.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
    return line


# ----------------------------------------------------------------------------- footer
def status_text(sweep: xr.Dataset) -> str:
    c = status_counts(sweep)
    return (
        f"cells: {c['ok']} ok, {c['failed']} failed, {c['nonfinite']} nonfinite, "
        f"{c['missing']} missing"
    )


def seeds_text(sweep: xr.Dataset, unit: str = "point") -> str:
    s = seeds_per_point(sweep)
    return f"{s} seed{'s' if s != 1 else ''} per {unit}"


def footer_text(
    sweep: xr.Dataset, band: str | None = "mean ± std", extra: Iterable[str] = (), unit="point"
) -> str:
    """The standard footer: seeds, cell status counts, band meaning, then ``extra`` lines.

    Only its first two parts (seeds, status counts) are drawn in the figure
    (:func:`add_footer`); the rest goes to the report caption (:func:`caption_notes`).
    """
    first = [seeds_text(sweep, unit), status_text(sweep)]
    if band:
        first.append(band if ":" in band else f"band: {band}")
    first.append("only ok cells enter the statistics")
    lines = ["; ".join(first)]
    lines += [e for e in extra if e]
    return "\n".join(lines)


def add_footer(fig, text: str) -> None:
    """Draw the one-line footer of ``text`` and keep the rest as the figure's caption notes."""
    line, notes = split_footer(text)
    fig.text(
        0.005,
        0.005,
        line,
        ha="left",
        va="bottom",
        fontsize=FOOTER_SIZE,
        color="0.25",
        fontfamily="serif",
    )
    set_caption_notes(fig, notes)


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


def footer_lines(text: str) -> int:
    """Lines of the footer drawn in the figure: always one (see :func:`split_footer`)."""
    return 1


# ----------------------------------------------------------------------------- caption notes
# A figure carries one short footer line (seeds and cell status counts); everything else a
# reader needs (band meaning, counts of excluded runs, definitions) goes to the report
# caption, which attnsvm.report.captions writes next to the PNG (issue 11, items 1 and 7).
_NOTES_ATTR = "_attnsvm_caption_notes"


def split_footer(text: str) -> tuple[str, list[str]]:
    """(the drawn line: seeds and status counts, the caption notes: all other parts)."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return "", []
    parts = lines[0].split("; ")
    notes = ["; ".join(parts[2:])] if len(parts) > 2 else []
    return "; ".join(parts[:2]), notes + lines[1:]


def set_caption_notes(fig, notes: Iterable[str]) -> None:
    """Attach caption notes to ``fig`` (added to any already there)."""
    setattr(fig, _NOTES_ATTR, [*caption_notes(fig), *(n for n in notes if n)])


def caption_notes(fig) -> list[str]:
    """The caption notes a figure's plot function attached (:func:`add_footer`)."""
    return list(getattr(fig, _NOTES_ATTR, []))


# ----------------------------------------------------------------------------- legends
def outside_legend(fig, axes, loc: str = "outside right upper", prefixes=None, **kwargs):
    """One figure legend outside the panels (never over data) for the labelled artists of
    ``axes``; a label shared by several panels appears once. ``prefixes``: per axes, a text
    put before its labels (e.g. ``"(a) "``). Returns the legend, or None when nothing is
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
    return fig.legend(handles, labels, loc=loc, **kwargs)
