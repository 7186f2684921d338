"""Self, sequence and causal attention: correlation of GD with its matching SVM vs iteration,
beyond the paper (docs/science.md §6, "Beyond the paper").

One panel per attention kind of the grid (cross, self: z_i = x_i1, sequence: every token a
query over all tokens, causal: every token a query over tokens up to itself; docs/science.md
§4). Lines: mean over seeds (band: its confidence interval) of corr(W(k), W_mm(alpha)) for W
runs and
corr(K Q^T(k), W_mm_*(alpha)) for KQ runs (alpha: GD's final selection, per query for
sequence / causal); dashed: the same runs against the SVM of the optimal tokens.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = (
    "curve_corr_fro_alpha",
    "curve_corr_nuc_alpha",
    "curve_corr_fro_opt",
    "curve_corr_nuc_opt",
    "alpha_is_opt",
    "convergence",
)
MATCH = {"W": "fro", "KQ": "nuc"}
TITLES = {  # short: the panels are narrow; the caption says what each kind is
    "cross": "cross",
    "self": "self, $z_i = x_{i1}$",
    "sequence": "sequence",
    "causal": r"causal, $t \leq k$",
}


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """Means over the ok seeds and their confidence intervals, from the summary; α = opt
    counts from the sweep."""
    kinds = [str(v) for v in sd.grid_values(sweep, "attention")] or ["cross"]
    params = sd.params_of(sweep)
    it = sd.iterations_of(sweep)
    lines = []
    for a in kinds:
        for p in params:
            opt = sd.select(sd.ok_values(sweep, "alpha_is_opt"), attention=a, param=p)
            v = np.asarray(opt.values, float).ravel()
            v = v[np.isfinite(v)]
            lines.append(f"{a}/{p}: α = opt in {int(v.sum())} of {v.size}")
    extra = [
        "solid: corr with the matching SVM of GD's selection α (Frobenius for W, nuclear for "
        "KQ); dashed: with the SVM of the optimal tokens",
        "; ".join(lines[: len(lines) // 2]),
        "; ".join(lines[len(lines) // 2 :]),
    ]
    notes = style.notes_text(f"{style.MEAN_INTERVAL}, clipped to [-1, 1]", extra)
    fig, axes = style.new_figure(1, len(kinds), height=2.5, squeeze=False, sharey=True)
    for k, (ax, a) in enumerate(zip(axes[0], kinds, strict=True)):
        for p in params:
            color = style.PARAM_COLORS.get(p, "0.3")
            for sel, ls in (("alpha", "-"), ("opt", "--")):
                name = f"curve_corr_{MATCH[p]}_{sel}"
                stats = sd.pooled(summary, name, attention=a, param=p)
                label = f"{style.PARAM_LABELS.get(p, p)} runs, " + (
                    r"SVM($\alpha$)" if sel == "alpha" else r"SVM($\mathrm{opt}$)"
                )
                style.mean_band(ax, it, stats, color, label=label, linestyle=ls, clip=(-1.0, 1.0))
        ax.set_xscale("log")
        ax.axhline(1.0, color="0.6", lw=0.5)
        ax.set_xlabel("iteration $k$")
        style.panel_label(ax, "abcd"[k], TITLES.get(a, a))
        if k == 0:
            ax.set_ylabel("corr with matching SVM")
    style.outside_legend(fig, axes[0], loc="outside upper center", ncol=4)
    style.add_notes(fig, notes)
    return fig


def numbers(summary: xr.Dataset) -> list[str]:
    """Final corr with the matching SVM; seeds selecting the optimal token, per kind."""
    return [
        *captions.corr_lines(summary),
        *(
            f"*{p}* runs selecting the optimal token for every query: "
            + captions.per_point(summary, "alpha_is_opt_sum", ["attention"], param=p)
            + " seeds"
            for p in captions.params(summary)
        ),
    ]


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="attention",
    label="cross, self, sequence and causal attention",
    what=(
        "Beyond the paper, cross, self, sequence and causal attention: corr of *W*\\ (*k*) "
        f"(*W* runs, Frobenius SVM) and {captions.KQ}\\ (*k*) (*KQ* runs, nuclear SVM) with "
        "the SVM of GD's own selection (solid) and of the optimal tokens (dashed): means over "
        f"seeds with their {style.CI_WORDS}."
    ),
    look=(
        "The solid curves should rise to corr ≈ 1 for every kind: the max-margin picture "
        "extends to self, sequence and causal attention."
    ),
    plot=plot,
    numbers=numbers,
    variables=VARIABLES,
)
