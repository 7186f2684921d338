"""E6: convergence types by GD's selection (global / local / not-local) vs d, the paper's rule
(docs/science.md §6, E6).

One panel per parameterization (W, KQ); one stacked bar per d with the shares, over the ok runs
that have a type, of the class of GD's selection alpha at the last iterate (docs/science.md
§5): global (alpha = opt), local (alpha != opt, locally optimal), not-local (neither, an
infeasible alpha included). Inside each segment the hatched part is the runs of that class that
have not converged by the diagnostics (softmax not saturated, or corr(W_GD, SVM(alpha)) below
the threshold), with the counts "runs (hatched)" written in the segment. The strict rule
(``convergence_strict``: unsaturated first, then corr >= threshold) is summarized in the
caption. Runs without a type (non-ok cells, not applicable) are counted in the caption and the
number of classified runs is written above each bar.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.patches import Patch

from attnsvm import codes
from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("convergence", "convergence_strict", "saturated", "corr_converged", "corr_matching")
HATCH = "//////"


def _values(sweep: xr.Dataset, name: str, param: str, d) -> np.ndarray:
    v = sd.select(sd.ok_values(sweep, name), param=param)
    return np.asarray((sd.select(v, d=d) if d is not None else v).values, float).ravel()


def not_converged(sweep: xr.Dataset) -> xr.DataArray:
    """1 where a run has not converged by the diagnostics: not saturated or corr < threshold."""
    sat = sweep["saturated"] if "saturated" in sweep else xr.zeros_like(sweep["convergence"]) + 1
    if "corr_converged" in sweep:
        close = sweep["corr_converged"]
    else:  # stores written before the variable existed
        thr = sd.fixed_settings(sweep).get("corr_threshold", 0.99)
        close = (sweep["corr_matching"] >= thr).astype(float)
    return ((sat != 1) | (close != 1)).astype(float)


def counts(sweep: xr.Dataset, param: str, d_values: list) -> tuple[np.ndarray, np.ndarray]:
    """(d, class) counts of the class by selection over ok runs, and of its unconverged part."""
    conv_da = sd.select(sd.ok_values(sweep, "convergence"), param=param)
    bad_da = sd.select(not_converged(sweep).where(sd.ok_mask(sweep)), param=param)
    out = np.zeros((len(d_values), len(codes.CONVERGENCE)), dtype=int)
    hatched = np.zeros_like(out)
    for i, d in enumerate(d_values):
        conv = np.asarray((sd.select(conv_da, d=d) if d is not None else conv_da).values)
        bad = np.asarray((sd.select(bad_da, d=d) if d is not None else bad_da).values)
        conv, bad = conv.ravel(), bad.ravel()
        for k in range(len(codes.CONVERGENCE)):
            out[i, k] = int(np.sum(conv == k))
            hatched[i, k] = int(np.sum((conv == k) & (bad == 1)))
    return out, hatched


def strict_counts(sweep: xr.Dataset, param: str, d_values: list) -> np.ndarray | None:
    """(d, class) counts of the strict rule over ok runs (None for stores without it)."""
    if "convergence_strict" not in sweep:
        return None
    out = np.zeros((len(d_values), len(codes.CONVERGENCE_STRICT)), dtype=int)
    for i, d in enumerate(d_values):
        v = _values(sweep, "convergence_strict", param, d)
        for k in range(len(codes.CONVERGENCE_STRICT)):
            out[i, k] = int(np.sum(v == k))
    return out


def counts_text(data: tuple[np.ndarray, np.ndarray], d_values: list, param: str) -> str:
    """Caption sentence: per d, runs per class by selection and (not converged) among them."""
    c, h = data
    parts = []
    for i, d in enumerate(d_values):
        cls = ", ".join(
            f"{c[i, k]} {name}" + (f" ({h[i, k]})" if h[i, k] else "")
            for k, name in enumerate(codes.CONVERGENCE)
        )
        parts.append(f"d={d}: {cls}" if d is not None else cls)
    return f"{param} runs per class (not converged): " + "; ".join(parts)


def _notes(sweep: xr.Dataset, params: list[str], d_values: list, data: dict) -> list[str]:
    """Caption notes: unclassified runs, the class definitions, counts per d, the strict rule."""
    n_ok = int(sd.ok_mask(sweep).sum())
    classified = sum(int(c.sum()) for c, _ in data.values())
    fixed = sd.fixed_settings(sweep)
    thr = fixed.get("corr_threshold", 0.99)
    tol = fixed.get("saturation_tol", 1e-3)
    extra = [
        f"ok runs without a convergence type (n/a): {n_ok - classified}; bars: share of the "
        "classified ok runs, number above each bar; in a segment: runs (hatched)",
        "class of GD's selection α at the last iterate (the paper's rule): global: α = opt; "
        "local: α ≠ opt and locally optimal; not-local: neither (infeasible α included)",
        f"hatched: not converged by the diagnostics, min_i max_t s_it < 1 - {tol:g} or "
        f"corr(W_GD, SVM(α)) < {thr:g}; SVM: Frobenius for W, nuclear for KQ",
    ]
    extra += [counts_text(data[p], d_values, p) for p in params]
    for p in params:
        sc = strict_counts(sweep, p, d_values)
        if sc is None:
            continue
        per_d = ", ".join(
            f"d={d}: {g}" for d, g in zip(d_values, sc[:, 0], strict=True) if d is not None
        )
        extra.append(
            f"strict rule ({p}; unsaturated first, then corr ≥ {thr:g}): global runs {per_d}; "
            f"unsaturated {int(sc[:, 3].sum())}, not-local {int(sc[:, 2].sum())} in all"
        )
    return extra


def _draw_bars(ax, c: np.ndarray, h: np.ndarray, d_values: list) -> None:
    """Stacked shares per d, the unconverged part of each segment hatched at its top."""
    xpos = np.arange(len(d_values))
    width = 0.76
    total = c.sum(axis=1)
    denom = np.maximum(total[:, None], 1)
    share = np.where(total[:, None] > 0, c / denom, 0.0)
    hshare = np.where(total[:, None] > 0, h / denom, 0.0)
    bottom = np.zeros(len(d_values))
    for k, name in enumerate(codes.CONVERGENCE):
        color = style.CONVERGENCE_COLORS[name]
        ax.bar(xpos, share[:, k], bottom=bottom, width=width, color=color, label=name,
               edgecolor="white", linewidth=0.5)  # fmt: skip
        ax.bar(xpos, hshare[:, k], bottom=bottom + share[:, k] - hshare[:, k], width=width,
               color=color, hatch=HATCH, edgecolor="0.15", linewidth=0.0)  # fmt: skip
        for x in range(len(d_values)):
            if share[x, k] >= 0.07:
                ax.text(
                    xpos[x], bottom[x] + share[x, k] / 2,
                    f"{c[x, k]}" + (f"\n({h[x, k]})" if h[x, k] else ""),
                    ha="center", va="center", fontsize=5.3, color="black",
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.75),
                )  # fmt: skip
        bottom += share[:, k]
    for x, t in zip(xpos, total, strict=True):
        ax.text(x, 1.01, f"{t}" if t else "no data", ha="center", va="bottom",
                fontsize=6, color="0.35")  # fmt: skip
    ax.set_xticks(xpos)
    ax.set_xticklabels([str(d) for d in d_values])
    ax.set_xlabel("$d$")
    ax.set_ylim(0, 1.08)
    ax.set_yticks(np.linspace(0, 1, 6))


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E6 (docs/science.md §6): counts per class and of its unconverged runs over the ok runs,
    from the sweep (the hatched part needs each run's class and diagnostics together)."""

    params = sd.params_of(sweep)
    d_values = sd.grid_values(sweep, "d") or [None]
    data = {p: counts(sweep, p, d_values) for p in params}
    notes = style.notes_text(None, _notes(sweep, params, d_values, data))
    fig, axes = style.new_figure(1, len(params), height=2.6, squeeze=False, sharey=True)
    for j, (ax, p) in enumerate(zip(axes[0], params, strict=True)):
        _draw_bars(ax, *data[p], d_values)
        style.panel_label(ax, "abcdefgh"[j], f"{style.PARAM_LABELS.get(p, p)} runs")
        if j == 0:
            ax.set_ylabel("share of runs")
    handles = [Patch(color=style.CONVERGENCE_COLORS[n], label=n) for n in codes.CONVERGENCE]
    handles.append(Patch(facecolor="white", edgecolor="0.15", hatch=HATCH, label="not converged"))
    fig.legend(handles=handles, loc="outside right center", title="class of α")
    style.add_notes(fig, notes)
    return fig


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e6",
    label="E6: convergence types",
    what=(
        "Shares of convergence types per *d*, for *W* and *KQ* runs, classified by GD's "
        "selection α at the last iterate as in the paper (store variable ``convergence``): "
        "global (α = opt), local (α ≠ opt and locally optimal), not-local (neither). Hatched "
        "inside each bar: the runs of that class that have not converged by the diagnostics "
        "(softmax not saturated, or corr with SVM(α) below the threshold), with counts. The "
        "strict rule (``convergence_strict``: unsaturated first, then corr ≥ threshold) is "
        "summarized in the notes."
    ),
    look=(
        "Global convergence should dominate at large *d*; small *d* breeds local and "
        "not-local runs."
    ),
    plot=plot,
    numbers=lambda summary: captions.global_lines(summary, per_d=True),
    variables=VARIABLES,
)
