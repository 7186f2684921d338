"""Report captions computed from the run: text per figure plus numbers from its own summary.

Every figure of the report gets a caption file ``figures/<fig>.caption.rst`` written next to
its PNG by :func:`attnsvm.figures.make_figure`; ``workflow/report/figure.rst`` includes it.
A caption has four parts, none typed by hand from one run:

- what the figure shows and what to look for (the theory's prediction, SCIENCE.md section 6);
- *this run*: the headline numbers, computed by :func:`caption_numbers` from the
  experiment's ``summary.nc`` (means over seeds per grid point);
- notes the figure's plot function made from the sweep (band meaning, counts of excluded or
  ambiguous runs; :func:`attnsvm.figures.style.caption_notes`);
- the experiment's settings (fixed values, grid axes, seeds) and cell counts per status.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes

# RST snippets for the symbols of SCIENCE.md
# (each ends with an escaped space, so that any character may follow it)
WMM = r"*W*\ :sub:`mm`\ "
WMM_NUC = r"*W*\ :sub:`mm,⋆`\ "
KQ = r"*KQ*\ :sup:`⊤`\ "
KR_QR = r"*K*\ :sub:`R` *Q*\ :sub:`R`\ :sup:`⊤`\ "

#: What each figure shows and what a reader should look for (no run-specific numbers).
TEXT: dict[str, tuple[str, str]] = {
    "e1": (
        "GD trajectories of *W*\\ (*k*) *z*\\ :sub:`i` for *W* trained directly and for "
        f"*W* = {KQ} against the rays of {WMM} *z*\\ :sub:`i` (Frobenius SVM, solid) and "
        f"{WMM_NUC} *z*\\ :sub:`i` (nuclear SVM, dashed).",
        "Each path should bend onto its own SVM's ray: *W* runs onto the Frobenius ray, "
        "*KQ* runs onto the nuclear ray.",
    ),
    "e2": (
        "Local convergence: softmax mass on the selected tokens and corr(*W*\\ (*k*), SVM(α)) "
        "against the iteration, mean ± std over seeds (the band is clipped at 1, the largest "
        "value either quantity can take); *W* runs against the Frobenius SVM, *KQ* runs "
        "against the nuclear SVM, the cross pairs dashed.",
        "The matching pairs should approach corr = 1; the cross pairs should level off below.",
    ),
    "e3": (
        "Rank of the SVM solutions for the optimal tokens against *d*, over feasible "
        "instances only (Frobenius solid, nuclear dashed; the number of feasible instances "
        "behind each point is printed at it, points from fewer than 10 are circled), and the "
        "share of infeasible instances. An SVM answer without a certificate counts as not "
        "solved, neither feasible nor infeasible.",
        "The nuclear SVM should have lower rank than the Frobenius SVM; infeasibility should "
        "appear only for small *d*.",
    ),
    "e4": (
        "Relu head: 1 − corr of GD with the Gen-SVM solution *W*\\ :sub:`svmeq`, its "
        "max-margin part *W*\\ :sub:`mm,gen` and the single-token SVM against the iteration "
        "(log scale), and the final 1 − corr(*W*, *W*\\ :sub:`svmeq`) against the largest "
        "masked softmax probability. The main curves (median, interquartile band) are the "
        "clear runs, the paper's accepted runs; ambiguous runs (a final softmax entry in "
        "(10\\ :sup:`−6`, 10\\ :sup:`−3`)), which the paper rejects, are drawn apart (dashed "
        "median; hollow markers in the scatter). Values below 10\\ :sup:`−12` are marked on "
        "the axis with their count instead of being clipped.",
        "GD should follow *W*\\ :sub:`svmeq` (smallest 1 − corr) in the clear runs; the "
        "counts of clear and ambiguous runs are in the notes.",
    ),
    "e5": (
        "λ head on orthonormal tokens: number of selected (relevant) tokens and the "
        "correlation of GD with the Gen-SVM parts against λ.",
        "The number of relevant tokens should grow with λ (the quadratic penalty makes mixing "
        "tokens pay); GD should stay predicted by *W*\\ :sub:`svmeq` while the single-token "
        "SVM degrades.",
    ),
    "e6": (
        "Shares of convergence types per *d*, for *W* and *KQ* runs, classified by GD's "
        "selection α at the last iterate as in the paper (store variable ``convergence``): "
        "global (α = opt), local (α ≠ opt and locally optimal), not-local (neither). Hatched "
        "inside each bar: the runs of that class that have not converged by the diagnostics "
        "(softmax not saturated, or corr with SVM(α) below the threshold), with counts. The "
        "strict rule (``convergence_strict``: unsaturated first, then corr ≥ threshold) is "
        "summarized in the notes.",
        "Global convergence should dominate at large *d*; small *d* breeds local and "
        "not-local runs.",
    ),
    "phase": (
        "Beyond the paper, phase map over *d* and *n* (or *T*): share of instances whose "
        "Att-SVM of the optimal tokens is feasible, shares of *W* and *KQ* runs that converge "
        "globally (GD's selection α = opt, as in E6), and share of *W* runs in which every "
        "non-selected token is a support "
        "vector. The white line marks *d* = max(*T* − 1, *n*) along the cell edges.",
        "On or right of the white line every instance should be feasible (SCIENCE.md "
        "section 4); infeasibility only left of it.",
    ),
    "rank_gd": (
        "Beyond the paper, low-rank bias of *KQ*: rank and effective rank of the trained "
        f"*W* for *W* runs and *KQ* runs (*m* = *d*) against *d*, next to {WMM}(α) and "
        f"{WMM_NUC}(α).",
        "*KQ* runs should have the low rank of the nuclear SVM, *W* runs the rank of the "
        "Frobenius SVM (the strict rank of *W* runs stays *d*: the initialization never "
        "vanishes, so compare effective ranks).",
    ),
    "rank_m": (
        "Beyond the paper, *KQ* with *m* < *n*: final corr of "
        f"{KQ} with the rank-*m* constrained nuclear SVM (attnsvm.lowrank, best of its "
        f"restarts) and with the convex {WMM_NUC}; relative excess of the rank-*m* objective "
        "over the convex bound; ranks.",
        "Where *m* is at least the convex solution's rank the constraint is inactive and GD "
        "should match the SVM; below it the rank-*m* answer is a local optimum without a "
        "certificate, so a low correlation there is inconclusive.",
    ),
    "attention": (
        "Beyond the paper, cross, self, sequence and causal attention: corr of *W*\\ (*k*) "
        f"(*W* runs, Frobenius SVM) and {KQ}\\ (*k*) (*KQ* runs, nuclear SVM) with the SVM of "
        "GD's own selection (solid) and of the optimal tokens (dashed), mean ± std.",
        "The solid curves should rise to corr ≈ 1 for every kind: the max-margin picture "
        "extends to self, sequence and causal attention.",
    ),
    "regpath": (
        "Beyond the paper, regularization path: the norm-constrained minimizers *W*\\ "
        f":sub:`R` and {KR_QR} against the radius *R*, corr with "
        "the Frobenius and nuclear SVM of the optimal tokens, and 1 − corr on log axes.",
        f"corr(*W*\\ :sub:`R`, {WMM}) and corr({KR_QR}, "
        f"{WMM_NUC}) should increase to 1 with *R*; the cross pairs should level off.",
    ),
    "optimizer": (
        "Beyond the paper, optimizer ablation: mean corr with the matching SVM of the run's "
        "selection against the iteration for normalized and plain GD at several step sizes, "
        "and the final direction of every setting against normalized GD at the middle step.",
        "Normalized GD should converge fast; plain GD more slowly (its gradient vanishes as "
        "the softmax saturates) but towards the same direction.",
    ),
}


def fmt(x: float) -> str:
    """A number as a caption shows it: 3 significant digits, ``n/a`` for NaN."""
    x = float(x)
    return "n/a" if not np.isfinite(x) else f"{x:.3g}"


def rst_escape(text: str) -> str:
    """Plain text safe inside RST (no accidental emphasis, links or substitutions)."""
    return re.sub(r"([\\*`|_<>\[\]])", r"\\\1", text)


def _label(dim: str, value) -> str:
    v = value.item() if hasattr(value, "item") else value
    return f"{dim} = {v:g}" if isinstance(v, float) else f"{dim} = {v}"


def per_point(
    summary: xr.Dataset, var: str, over: Iterable[str], value: Callable | None = None, **sel
) -> str:
    """``"d = 2: 0.998; d = 4: 0.991"``: ``var`` of the summary at every point of ``over``.

    ``sel`` fixes dimensions (those the variable has); ``value`` turns the DataArray at one
    point into a number (e.g. a mean over the other dimensions). Dimensions left after
    ``value`` (or all others, without it) are listed too, so every number is stated.
    """
    if var not in summary:
        return "n/a"
    da = summary[var]
    da = da.sel({k: v for k, v in sel.items() if k in da.dims})
    over = [d for d in over if d in da.dims]
    if value is None:
        over += [d for d in da.dims if d not in over]
    parts = []
    for combo in itertools.product(*(da[d].values for d in over)):
        point = dict(zip(over, combo, strict=True))
        x = da.sel(point) if point else da
        x = value(x) if value else x
        if np.ndim(x) > 0:  # dimensions ``value`` left: list them as well
            x = per_point(xr.Dataset({"v": x}), "v", list(x.dims))
        else:
            x = fmt(x)
        label = ", ".join(_label(d, v) for d, v in point.items())
        parts.append(f"{label}: {x}" if label else x)
    return "; ".join(parts)


def _pooled_share(summary: xr.Dataset, flag: str, **sel) -> str:
    """``k of N (share)`` of a 0/1 flag pooled over every grid point (after ``sel``)."""
    if f"{flag}_sum" not in summary:
        return "n/a"
    s, c = summary[f"{flag}_sum"], summary[f"{flag}_count"]
    sel = {k: v for k, v in sel.items() if k in s.dims}
    k, n = int(s.sel(sel).sum()), int(c.sel(sel).sum())
    return f"{k} of {n}" + (f" ({k / n:.0%})" if n else "")


def _params(summary: xr.Dataset) -> list[str]:
    if "param" in summary.dims:
        return [str(p) for p in summary["param"].values]
    return [str(summary.attrs.get("fixed_param", "W"))]


MATCH = {"W": "fro", "KQ": "nuc"}
NAMES = {"fro": "Frobenius", "nuc": "nuclear"}


def _last(da: xr.DataArray) -> xr.DataArray:
    return da.isel(checkpoint=-1) if "checkpoint" in da.dims else da


def caption_numbers(name: str, summary: xr.Dataset) -> list[str]:
    """The headline numbers of figure ``name``, as RST sentences, from the run's summary."""
    axes = [str(a) for a in np.atleast_1d(summary.attrs.get("axes", []))]
    others = [a for a in axes if a != "param"]
    out: list[str] = []
    if name in ("e1", "e2", "rank_gd", "attention", "optimizer"):
        for p in _params(summary):
            own, cross = MATCH.get(p, "fro"), "nuc" if MATCH.get(p) == "fro" else "fro"
            text = per_point(summary, f"corr_{own}_alpha_mean", others, param=p)
            line = f"final corr of *{p}* runs with the {NAMES[own]} SVM of α: {text}"
            if name in ("e1", "e2"):
                line += f"; with the {NAMES[cross]} SVM (cross pair): " + per_point(
                    summary, f"corr_{cross}_alpha_mean", others, param=p
                )
            out.append(line)
    if name == "e2":
        out.append(
            "final softmax mass on the selected tokens: "
            + per_point(summary, "softmax_mass_mean", ["param"])
        )
    if name == "e3":
        for norm in ("fro", "nuc"):
            out.append(
                f"mean rank of the {NAMES[norm]} SVM(opt) per *d* (over *n*, *T*): "
                + per_point(summary, f"rank_{norm}_opt_mean", ["d"], lambda x: x.mean())
            )
        out.append("feasible instances: " + _pooled_share(summary, "feasible_fro_opt"))
    if name in ("e4", "e5"):
        over = ["lam"] if name == "e5" else ["d"]
        if name == "e5":
            out.append(
                "relevant tokens per example: " + per_point(summary, "n_relevant_mean", over)
            )
        for key, label in (
            ("svmeq", "*W*\\ :sub:`svmeq`"),
            ("mm_gen", "*W*\\ :sub:`mm,gen`"),
            ("single", "the single-token SVM"),
        ):
            out.append(f"final corr with {label}: " + per_point(summary, f"corr_{key}_mean", over))
        out.append("runs with an ambiguous softmax: " + _pooled_share(summary, "ambiguous"))
    if name in ("e6", "phase"):
        if "share_convergence" in summary:
            for p in _params(summary):
                glob = summary["count_convergence"].sel(convergence="global")
                total = summary["count_convergence"].sum("convergence")
                if "param" in glob.dims:
                    glob, total = glob.sel(param=p), total.sel(param=p)
                if name == "e6":
                    share = (glob / total.where(total > 0)).rename("share")
                    text = per_point(share.to_dataset(), "share", ["d"])
                else:
                    k, n = int(glob.sum()), int(total.sum())
                    text = f"{k} of {n}" + (f" ({k / n:.0%})" if n else "")
                out.append(f"share of *{p}* runs converging globally: {text}")
    if name == "phase":
        out += _phase_sides(summary)
        out.append(
            "*W* runs with every token a support vector: "
            + _pooled_share(summary, "all_support", param="W")
        )
    if name == "rank_gd":
        for p, svm in (("W", "fro_alpha"), ("KQ", "nuc_alpha")):
            if p in _params(summary):
                out.append(
                    f"effective rank per *d*, *{p}* runs: "
                    + per_point(summary, "erank_gd_mean", ["d"], param=p)
                    + f"; of their {NAMES[svm[:3]]} SVM: "
                    + per_point(summary, f"erank_{svm}_mean", ["d"], param=p)
                )
    if name == "rank_m":
        out += [
            "final corr with the rank-*m* SVM: "
            + per_point(summary, "corr_lowrank_alpha_mean", ["m"]),
            f"final corr with the convex {WMM_NUC}: "
            + per_point(summary, "corr_nuc_alpha_mean", ["m"]),
            "mean excess of the rank-*m* objective over the convex bound: "
            + per_point(summary, "lowrank_gap_mean", ["m"]),
            "rank-*m* solutions certified optimal: " + _pooled_share(summary, "lowrank_certified"),
        ]
    if name == "attention":
        for p in _params(summary):
            out.append(
                f"*{p}* runs selecting the optimal token for every query: "
                + per_point(summary, "alpha_is_opt_sum", ["attention"], param=p)
                + " seeds"
            )
    if name == "regpath":
        radius = summary.get("curve_radius_mean")
        r_max = fmt(_last(radius).max()) if radius is not None else "n/a"
        for p in _params(summary):
            own = MATCH.get(p, "fro")
            cross = "nuc" if own == "fro" else "fro"
            out.append(
                f"*{p}* path at the largest radius *R* = {r_max}: corr with the {NAMES[own]} SVM "
                + per_point(summary, f"curve_corr_{own}_opt_mean", [], _last, param=p)
                + f", with the {NAMES[cross]} SVM "
                + per_point(summary, f"curve_corr_{cross}_opt_mean", [], _last, param=p)
            )
    return out


def _phase_sides(summary: xr.Dataset) -> list[str]:
    """Feasible instances on or right of d = max(T - 1, n), and left of it."""
    if "feasible_fro_opt_sum" not in summary or "d" not in summary.dims:
        return []
    s, c = summary["feasible_fro_opt_sum"], summary["feasible_fro_opt_count"]

    def axis(name: str) -> xr.DataArray | float:
        if name in summary.dims:
            return summary[name].astype(float)
        return float(summary.attrs.get(f"fixed_{name}", np.nan))

    right = summary["d"].astype(float) >= np.maximum(axis("T") - 1, axis("n"))
    out = []
    for label, where in (("on or right of the line", right), ("left of it", ~right)):
        k, n = int(s.where(where).sum()), int(c.where(where).sum())
        share = f" ({k / n:.0%})" if n else ""
        out.append(f"feasible instances {label}: {k} of {n}{share}")
    return out


def settings_text(summary: xr.Dataset) -> str:
    """Fixed settings, grid axes and seeds of the experiment, readable (no dict reprs)."""
    fixed = [
        f"{k[len('fixed_') :]} = {v}" for k, v in summary.attrs.items() if k.startswith("fixed_")
    ]
    axes = [str(a) for a in np.atleast_1d(summary.attrs.get("axes", []))]
    grid = []
    for a in axes:
        if a in summary.coords:
            vals = ", ".join(str(v.item() if hasattr(v, "item") else v) for v in summary[a].values)
            grid.append(f"{a} ∈ {{{vals}}}")
    seeds = len(np.atleast_1d(summary.attrs.get("seeds", [])))
    parts = []
    if fixed:
        parts.append("fixed " + ", ".join(fixed))
    if grid:
        parts.append("grid " + "; ".join(grid))
    parts.append(f"{seeds} seed{'s' if seeds != 1 else ''} per grid point")
    return rst_escape("; ".join(parts)) + "."


def status_text(summary: xr.Dataset) -> str:
    """Cells per status of the whole experiment, from ``count_status``."""
    cs = summary["count_status"]
    total = cs.sum([d for d in cs.dims if d != "status"])
    return ", ".join(f"{int(total.sel(status=s))} {s}" for s in codes.CELL_STATUS)


def figure_caption(name: str, summary: xr.Dataset, notes: Iterable[str] = ()) -> str:
    """The RST caption of figure ``name`` of one experiment (see the module docstring)."""
    what, look = TEXT.get(name, (f"Figure {name}.", ""))
    exp = str(summary.attrs.get("experiment", ""))
    lines = [f"**{rst_escape(exp)}, figure {rst_escape(name)}.** {what}", ""]
    if look:
        lines += [f"*What to see:* {look}", ""]
    numbers = caption_numbers(name, summary)
    if numbers:
        lines += ["*This run* (means over seeds, computed from its ``summary.nc``):", ""]
        lines += [f"- {n}" for n in numbers] + [""]
    notes = [n for n in notes if n]
    if notes:
        lines += ["*Notes:*", ""] + [f"- {rst_escape(n)}" for n in notes] + [""]
    lines += [
        f"*Settings:* {settings_text(summary)} *Cells:* {status_text(summary)}.",
        "",
    ]
    return "\n".join(lines)


def write_caption(path: str | os.PathLike, text: str) -> Path:
    """Write a caption file atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
