"""Sakamoto & Sato's phase diagram, scaled (docs/science.md §15, "Sakamoto & Sato's own
setting"; arXiv 2409.17625, their code github.com/keitaroskmt/benign-attention).

Grid axes ``d`` and ``signal_norm`` of the generator weakly_relevant (other axes pooled).
(a) the final training loss and (b) the final test loss (clean test labels), mean over seeds
per grid point, as heat maps over the dimension d (rows) and the signal norm ||mu||
(columns); each cell is annotated with its mean and its SNR ``||mu|| / sqrt(d)``. Their
diagram is the same two heat maps over d in 250..5000 and ||mu|| in 5..100. (c)-(e) the test
error, training error and flipped labels fit over the iterations at the largest d, one panel
each for the lowest, middle and highest ||mu|| (memorization, and generalization before or
after it; one panel per ||mu|| so that no curve hides another); a sweep of fewer distinct
||mu|| has as many curve panels, sharing the row.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("loss", "test_loss")
PANELS = (("loss", "a", "final training loss"), ("test_loss", "b", "final test loss"))
#: the curves of panels (c)-(e): name -> (label, colour, line style, width); styles and
#: widths keep two curves on the same values (e.g. both at 0) visible: each later one is
#: thinner and dashed, over the earlier
CURVES = {
    "curve_test_err": ("test error", style.PALETTE[0], "-", 2.4),
    "curve_train_err": ("training error", style.PALETTE[1], "--", 1.6),
    "curve_flip_fit": ("flipped labels fit", style.PALETTE[2], (0, (2, 1.5)), 1.1),
}
#: the letters of the curve panels, one per signal norm of :func:`curve_norms`
CURVE_PANELS = "cde"


def mosaic(curves: int) -> list[list[str]]:
    """The layout: the two heat maps above, the ``curves`` (1 to 3) curve panels below, each
    as wide as the others, so that no empty panel is left where the sweep has fewer
    distinct signal norms than three."""
    width = 6 // curves
    return [["a"] * 3 + ["b"] * 3, [c for c in CURVE_PANELS[:curves] for _ in range(width)]]


#: per number of curve panels: their letters and the signal norms they show
PANEL_NAMES = {
    1: ("(c)", "the one"),
    2: ("(c, d)", "the lowest and highest"),
    3: ("(c)-(e)", "the lowest, middle and highest"),
}


def mean_grid(sweep: xr.Dataset, name: str) -> xr.DataArray:
    """Mean over the ok cells of ``name`` per (d, signal_norm), every other axis pooled."""
    values = sd.ok_values(sweep, name)
    over = [dim for dim in values.dims if dim not in ("d", "signal_norm")]
    mean = values.mean(dim=over, skipna=True) if over else values
    keep = [dim for dim in ("d", "signal_norm") if dim in mean.dims]
    return mean.transpose(*keep)


def _axis_values(sweep: xr.Dataset, axis: str) -> np.ndarray:
    """The grid values of ``axis``, or its one fixed value."""
    return np.asarray([float(v) for v in sd.grid_values(sweep, axis)], float)


def curve_norms(norms: np.ndarray) -> list[float]:
    """The signal norms of panels (c)-(e): the lowest, the middle one and the highest
    (distinct)."""
    ordered = np.sort(norms)
    return list(dict.fromkeys(float(v) for v in (ordered[0], ordered[len(ordered) // 2],
                                                 ordered[-1])))  # fmt: skip


def _over_iterations(ax, sweep: xr.Dataset, summary: xr.Dataset, d: float, norm: float) -> None:
    """Medians and interquartile bands over seeds of the test error, training error and
    flipped labels fit against the iteration, at ``d`` and the signal norm ``norm``."""
    x = sd.iterations_of(sweep)
    for name, (label, color, ls, width) in CURVES.items():
        if f"{name}_q50" not in summary:
            continue
        mid, lo, hi = sd.quantile_band(summary, name, d=d, signal_norm=norm)
        style.draw_band(ax, x, mid, lo, hi, color, label, ls, lw=width)
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("iteration $k$")


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """(a, b) means over seeds (pooled over any other axis) of the sweep's ok cells; (c)-(e)
    quantiles over seeds from the summary."""
    ds = _axis_values(sweep, "d")
    norms = _axis_values(sweep, "signal_norm")
    fig, _ = style.new_figure(1, 1, width=style.WIDTH * 1.5, height=5.0)
    fig.clear()
    chosen = curve_norms(norms)
    axes = fig.subplot_mosaic(mosaic(len(chosen)))
    for name, letter, title in PANELS:
        ax = axes[letter]
        grid = np.asarray(mean_grid(sweep, name).values, float).reshape(len(ds), len(norms))
        finite = grid[np.isfinite(grid)]
        vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if not vmax > vmin:  # one value: a band around it keeps the colour bar's ticks short
            half = 0.05 * max(abs(vmin), 1.0)
            vmin, vmax = vmin - half, vmin + half
        im = ax.imshow(
            grid, origin="lower", aspect="auto", cmap=style.SEQUENTIAL, vmin=vmin, vmax=vmax
        )
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                snr = norms[j] / np.sqrt(ds[i])
                dark = v < vmin + 0.6 * (vmax - vmin)
                ax.text(j, i, f"{v:.2f}\n({snr:.2g})", ha="center", va="center", fontsize=5,
                        color="white" if dark else "black")  # fmt: skip
        ax.set_xticks(range(len(norms)), [f"{s:.3g}" for s in norms])
        ax.set_yticks(range(len(ds)), [f"{y:g}" for y in ds])
        ax.set_xlabel(r"signal norm $\|\mu\|$")
        ax.set_ylabel("d")
        style.panel_label(ax, letter, title)
        fig.colorbar(im, ax=ax, label=title)
    d = float(ds.max())
    curve_axes = [axes[k] for k in CURVE_PANELS[: len(chosen)]]
    for k, ax in enumerate(curve_axes):
        _over_iterations(ax, sweep, summary, d, chosen[k])
        title = f"d = {d:g}, SNR {chosen[k] / np.sqrt(d):.2g}"
        style.panel_label(ax, CURVE_PANELS[k], title)
        if k:
            ax.sharey(curve_axes[0])
            ax.tick_params(labelleft=False)
        else:
            ax.set_ylabel("share of examples")
    style.outside_legend(fig, curve_axes[:1], loc="outside lower center", ncol=len(CURVES))
    panels, which = PANEL_NAMES[len(chosen)]
    notes = style.notes_text(
        f"{panels} line: median, band: interquartile range",
        [
            "(a, b) cells: mean over seeds at the last step, with the SNR ||mu||/sqrt(d) in "
            f"brackets; {panels} {which} ||mu|| at the largest d",
            "training loss on the stored (noisy) labels, test loss on clean labels; d scaled "
            "down from their 250..5000 (docs/science.md §15)",
        ],
    )
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """The mean final training and test losses, test error and flipped labels fit at every
    grid point."""
    over = [a for a in ("d", "signal_norm") if a in summary.dims]
    return [
        "mean final training loss: " + captions.per_point(summary, "loss_mean", over),
        "mean final test loss: " + captions.per_point(summary, "test_loss_mean", over),
        "mean final test error: " + captions.per_point(summary, "test_err_mean", over),
        "mean share of flipped training labels fit: "
        + captions.per_point(summary, "flip_fit_mean", over),
    ]


FIGURE = Figure(
    name="sakamoto_sato",
    label="Sakamoto & Sato's phase diagram",
    what=(
        "Beyond the paper, Sakamoto & Sato's phase diagram in their own setting (arXiv "
        "2409.17625; their model, data and plain GD on W and p, d scaled down): the final "
        "training and test losses over the dimension d and the signal norm ||mu||."
    ),
    look=(
        "Their diagram: at a high SNR ||mu||/sqrt(d) the noisy labels are not fit (training "
        "loss stays high) and the test loss is low; at a low SNR the noisy labels are fit "
        "(training loss low), with a low test loss (benign) down to a point and a high one "
        "below it (harmful); in the curve panels their delayed generalization is the test "
        "error falling after the flipped labels are fit, docs/science.md §15."
    ),
    plot=plot,
    numbers=numbers,
    variables=("loss", "test_loss", "test_err", "flip_fit", *CURVES),
)


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)
