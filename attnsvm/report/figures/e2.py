"""E2: local convergence of W and KQ runs to their SVMs, mean over seeds and its confidence
interval vs iteration (docs/science.md §6, E2).

(a) softmax mass on the selected token; (b) correlation of the GD iterate with the SVM of its
parameterization (W run vs Frobenius W_mm, KQ run vs nuclear W_mm_*; solid) and with the other
one (cross pairs; dashed). Both SVMs are solved for GD's final alpha.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "curve_softmax_mass",
    "curve_corr_fro_alpha",
    "curve_corr_nuc_alpha",
    "convergence",
    "feasible_fro_alpha",
    "feasible_nuc_alpha",
)

MATCHED = {"W": "fro", "KQ": "nuc"}


def _runs(sweep: xr.Dataset, name: str, param: str) -> np.ndarray:
    """(runs, checkpoints) values of a curve for one parameterization, non-ok cells NaN."""
    da = sd.select(sd.ok_values(sweep, name), param=param)
    if "checkpoint" not in da.dims:
        return np.empty((0, 0))
    da = da.transpose(..., "checkpoint")
    return np.asarray(da.values, dtype=float).reshape(-1, da.sizes["checkpoint"])


def _corr_label(param: str, svm: str) -> str:
    target = style.W_MM if svm == "fro" else style.W_MM_NUC
    kind = "Frobenius" if svm == "fro" else "nuclear"
    return rf"{style.PARAM_LABELS.get(param, param)} run vs {kind} ${target}$"


def _convergence_text(sweep: xr.Dataset, params: list[str]) -> str:
    if "convergence" not in sweep:
        return ""
    parts = []
    for p in params:
        conv = np.asarray(
            sd.select(sweep["convergence"].where(sd.ok_mask(sweep)), param=p).values,
            dtype=float,
        ).ravel()
        counts = [f"{int(np.sum(conv == k))} {name}" for k, name in enumerate(codes.CONVERGENCE)]
        na = int(np.sum(~np.isfinite(conv) | (conv < 0)))
        parts.append(f"{p}: " + ", ".join(counts) + (f", {na} n/a" if na else ""))
    return "class of GD's final selection α (the paper's rule): " + "; ".join(parts)


def _notes(sweep: xr.Dataset, params: list[str]) -> list[str]:
    """Caption notes: classes of GD's selection and the runs without a correlation curve."""
    extra = [
        _convergence_text(sweep, params),
        "W(k) = K(k)Q(k)^T for KQ runs; both SVMs solved for GD's final α",
    ]
    undefined = []
    for p in params:
        for svm in ("fro", "nuc"):
            runs = _runs(sweep, f"curve_corr_{svm}_alpha", p)
            ok = sd.select(sd.ok_mask(sweep), param=p).values.ravel()
            if runs.size:
                bad = int(np.sum(ok & ~np.isfinite(runs).any(axis=1)))
                if bad:
                    undefined.append(f"{p} vs {svm}: {bad}")
    if undefined:
        extra.append(
            "runs without a correlation curve (SVM infeasible, excluded): " + ", ".join(undefined)
        )
    return extra


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E2 (docs/science.md §6): means over the ok seeds and their confidence intervals, from
    the summary."""
    params = sd.params_of(sweep)
    x = sd.iterations_of(sweep)
    notes = style.notes_text(
        f"{style.MEAN_INTERVAL}, clipped to the range the values can take",
        extra=_notes(sweep, params),
    )
    fig, axes = style.new_figure(1, 2, height=2.6)
    ax_mass, ax_corr = axes
    for p in params:
        color = style.PARAM_COLORS.get(p, style.PALETTE[4])
        label = f"{style.PARAM_LABELS.get(p, p)} run"
        stats = sd.pooled(summary, "curve_softmax_mass", param=p)
        style.mean_band(ax_mass, x, stats, color, label=label, clip=(0.0, 1.0))
    for p in params:
        color = style.PARAM_COLORS.get(p, style.PALETTE[4])
        own = MATCHED.get(p, "fro")
        for svm in (own, "nuc" if own == "fro" else "fro"):
            stats = sd.pooled(summary, f"curve_corr_{svm}_alpha", param=p)
            ls = "-" if svm == own else "--"
            style.mean_band(ax_corr, x, stats, color, _corr_label(p, svm), ls, clip=(-1.0, 1.0))
    _decorate(axes, x)
    style.add_notes(fig, notes)
    return fig


def _decorate(axes, x) -> None:
    ax_mass, ax_corr = axes
    ax_mass.set_ylabel(r"softmax mass, $\mathrm{mean}_i\,\mathrm{max}_t\, s_{it}(k)$")
    ax_mass.set_ylim(0, 1.03)
    ax_corr.set_ylabel(r"$\mathrm{corr}(W(k), \mathrm{SVM\ solution})$")
    ax_corr.axhline(0.99, color="0.5", lw=0.7, ls=":", zorder=0)
    ax_corr.text(
        x[0] if len(x) else 1, 0.99, " 0.99", va="bottom", ha="left", fontsize=6, color="0.4"
    )
    style.panel_label(ax_mass, "a", "softmax saturation")
    style.panel_label(ax_corr, "b", "correlation with the SVM (GD's $\\alpha$)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("iteration $k$")
    style.legend(ax_mass, loc="lower right")
    style.legend(ax_corr, loc="lower right", handlelength=2.4)
    ax_corr.set_ylim(None, 1.02)


def numbers(summary: xr.Dataset) -> list[str]:
    """Final corr with both SVMs (cross pairs too) and the final softmax mass."""
    return [
        *captions.corr_lines(summary, cross=True),
        "final softmax mass on the selected tokens: "
        + captions.per_point(summary, "softmax_mass_mean", ["param"]),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e2",
    label="E2: local convergence",
    what=(
        "Local convergence: softmax mass on the selected tokens and corr(*W*\\ (*k*), SVM(α)) "
        f"against the iteration: the mean over seeds and its {style.CI_WORDS} (clipped at 1, "
        "the largest value either quantity can take); *W* runs against the Frobenius SVM, "
        "*KQ* runs "
        "against the nuclear SVM, the cross pairs dashed."
    ),
    look="The matching pairs should approach corr = 1; the cross pairs should level off below.",
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
