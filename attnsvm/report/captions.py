"""Report captions computed from the run: the shared machinery of every figure's caption.

Every figure of the report gets a caption file ``figures/<fig>.caption.rst`` written next to
its PNG by :func:`attnsvm.report.draw.make_figure`; ``workflow/report/figure.rst`` includes it.
A caption has four parts, none typed by hand from one run:

- what the figure shows and what to look for (the theory's prediction, docs/science.md §6):
  ``what`` and ``look`` of the figure's declaration (:mod:`attnsvm.report.figures`);
- *this run*: the headline numbers, computed by the declaration's ``numbers`` from the
  experiment's ``summary.nc`` (means over seeds per grid point) with the helpers here;
- notes the figure's plot function made (band meaning, counts of excluded or ambiguous runs;
  :func:`attnsvm.report.style.caption_notes`);
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
from attnsvm.atomic import write_text_atomic
from attnsvm.report.figures import figure

# RST snippets for the symbols of docs/science.md
# (each ends with an escaped space, so that any character may follow it)
WMM = r"*W*\ :sub:`mm`\ "
WMM_NUC = r"*W*\ :sub:`mm,⋆`\ "
KQ = r"*KQ*\ :sup:`⊤`\ "
KR_QR = r"*K*\ :sub:`R` *Q*\ :sub:`R`\ :sup:`⊤`\ "


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


def pooled_share(summary: xr.Dataset, flag: str, **sel) -> str:
    """``k of N (share)`` of a 0/1 flag pooled over every grid point (after ``sel``)."""
    if f"{flag}_sum" not in summary:
        return "n/a"
    s, c = summary[f"{flag}_sum"], summary[f"{flag}_count"]
    sel = {k: v for k, v in sel.items() if k in s.dims}
    k, n = int(s.sel(sel).sum()), int(c.sel(sel).sum())
    return f"{k} of {n}" + (f" ({k / n:.0%})" if n else "")


def params(summary: xr.Dataset) -> list[str]:
    if "param" in summary.dims:
        return [str(p) for p in summary["param"].values]
    return [str(summary.attrs.get("fixed_param", "W"))]


MATCH = {"W": "fro", "KQ": "nuc"}
NAMES = {"fro": "Frobenius", "nuc": "nuclear"}


def last(da: xr.DataArray) -> xr.DataArray:
    return da.isel(checkpoint=-1) if "checkpoint" in da.dims else da


def phase_sides(summary: xr.Dataset) -> list[str]:
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


def corr_lines(summary: xr.Dataset, cross: bool = False) -> list[str]:
    """Final corr of each parameterization's runs with its own SVM of α (Frobenius for *W*,
    nuclear for *KQ*) per point of the other axes; with ``cross``, also with the other SVM."""
    axes = [str(a) for a in np.atleast_1d(summary.attrs.get("axes", []))]
    others = [a for a in axes if a != "param"]
    out = []
    for p in params(summary):
        own, other = MATCH.get(p, "fro"), "nuc" if MATCH.get(p) == "fro" else "fro"
        text = per_point(summary, f"corr_{own}_alpha_mean", others, param=p)
        line = f"final corr of *{p}* runs with the {NAMES[own]} SVM of α: {text}"
        if cross:
            line += f"; with the {NAMES[other]} SVM (cross pair): " + per_point(
                summary, f"corr_{other}_alpha_mean", others, param=p
            )
        out.append(line)
    return out


def global_lines(summary: xr.Dataset, per_d: bool) -> list[str]:
    """Share of each parameterization's runs converging globally (α = opt), from
    ``count_convergence``: per *d* (``per_d``) or pooled over the grid."""
    if "share_convergence" not in summary:
        return []
    out = []
    for p in params(summary):
        glob = summary["count_convergence"].sel(convergence="global")
        total = summary["count_convergence"].sum("convergence")
        if "param" in glob.dims:
            glob, total = glob.sel(param=p), total.sel(param=p)
        if per_d:
            share = (glob / total.where(total > 0)).rename("share")
            text = per_point(share.to_dataset(), "share", ["d"])
        else:
            k, n = int(glob.sum()), int(total.sum())
            text = f"{k} of {n}" + (f" ({k / n:.0%})" if n else "")
        out.append(f"share of *{p}* runs converging globally: {text}")
    return out


def gen_svm_lines(summary: xr.Dataset, over: list[str]) -> list[str]:
    """Final corr with the Gen-SVM parts and the single-token SVM per point of ``over``."""
    return [
        f"final corr with {label}: " + per_point(summary, f"corr_{key}_mean", over)
        for key, label in (
            ("svmeq", "*W*\\ :sub:`svmeq`"),
            ("mm_gen", "*W*\\ :sub:`mm,gen`"),
            ("single", "the single-token SVM"),
        )
    ]


def figure_caption(name: str, summary: xr.Dataset, notes: Iterable[str] = ()) -> str:
    """The RST caption of figure ``name`` of one experiment (see the module docstring)."""
    decl = figure(name)
    what, look = decl.what, decl.look
    exp = str(summary.attrs.get("experiment", ""))
    lines = [f"**{rst_escape(exp)}, figure {rst_escape(name)}.** {what}", ""]
    if look:
        lines += [f"*What to see:* {look}", ""]
    numbers = decl.numbers(summary)
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
    return write_text_atomic(path, text)
