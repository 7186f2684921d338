"""The report's status table: cells per status (and convergence type) per grid point, as HTML.

Read from an experiment's ``summary.nc`` (its ``count_*`` variables; docs/store.md) by the
workflow's ``derive`` rule; :mod:`attnsvm.status` is the command line's view of
the results directory while a sweep runs.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import xarray as xr

from attnsvm import codes
from attnsvm.atomic import write_text_atomic
from attnsvm.sweep.derived import record_of, write_record
from attnsvm.sweep.summary import verified_summary


def status_frame(summary: xr.Dataset):
    """One row per grid point: counts per cell status, then per convergence type (pandas)."""
    cs = summary["count_status"]
    axes = [d for d in cs.dims if d != "status"]
    table = _by(cs, "status")[list(codes.CELL_STATUS)]
    conv = summary.get("count_convergence")
    if conv is not None:
        ct = _by(conv, "convergence")[list(codes.CONVERGENCE)]
        ct.columns = [f"conv. {c}" for c in codes.CONVERGENCE]
        table = table.join(ct)
    table = table.astype(int)
    table.columns.name = None
    if not axes:
        table.index = ["all"]
    return table


def status_rows(summary: xr.Dataset) -> tuple[list[str], list[list[str]]]:
    """Header and rows of :func:`status_frame` as strings."""
    table = status_frame(summary)
    axes = [d for d in summary["count_status"].dims if d != "status"]
    rows = []
    for idx, values in table.iterrows():
        key = list(idx) if isinstance(idx, tuple) else ([idx] if axes else [])
        rows.append([str(k) for k in key] + [str(int(v)) for v in values])
    return list(axes) + [str(c) for c in table.columns], rows


STATUS_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 14px;
       color: #222; margin: 1em; }
h3 { margin: 0 0 .3em 0; font-weight: 600; }
p.totals { margin: .2em 0 1em 0; color: #444; }
table.attnsvm { border-collapse: collapse; margin-bottom: 1.5em; }
table.attnsvm caption { text-align: left; color: #555; padding-bottom: .3em; }
table.attnsvm th, table.attnsvm td { padding: 3px 10px; text-align: right;
       border-bottom: 1px solid #e3e3e3; }
table.attnsvm thead th { background: #f3f5f7; border-bottom: 2px solid #b9c2cc; }
table.attnsvm tbody th { text-align: left; font-weight: 500; color: #333; }
table.attnsvm tbody tr:nth-child(even) { background: #fafbfc; }
td.bad { background: #fde2e1; color: #9b1c1c; font-weight: 600; }
td.zero { color: #b0b0b0; }
"""


def _styled(frame, bad_columns: list[str], caption: str) -> str:
    """HTML of a count table: zeros grey, non-zero counts in ``bad_columns`` highlighted."""

    def classes(df):
        out = df.copy().astype(object)
        for col in df.columns:
            out[col] = [
                "bad" if (v and col in bad_columns) else ("zero" if v == 0 else "") for v in df[col]
            ]
        return out

    styler = (
        frame.style.set_td_classes(classes(frame))
        .set_table_attributes('class="attnsvm"')
        .set_caption(html.escape(caption))
    )
    return styler.to_html()


def _by(counts: xr.DataArray, dim: str):
    """Counts as a table: one row per grid point, one column per value of ``dim``."""
    series = counts.to_series()
    if counts.ndim == 1:  # an experiment without grid axes: a single row
        frame = series.to_frame().T
        frame.index = [0]
        return frame
    return series.unstack(dim)


def write_status_table(summary_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Styled HTML tables: cells per status (and convergence type) for every grid point, and
    SVM solves per status; failed, nonfinite and missing counts above zero are highlighted.

    The summary is checked against its digest record first (one error naming the file); the
    table's own record (the summary's SHA-256, docs/store.md) is written last."""
    record_of(out).unlink(missing_ok=True)
    summary_sha = verified_summary(summary_path)
    with xr.open_dataset(summary_path) as ds:  # closed: the derive job's process goes on
        summary = ds.load()
    frame = status_frame(summary)
    total = summary["count_status"].sum([d for d in summary["count_status"].dims if d != "status"])
    totals = ", ".join(f"{s}: {int(total.sel(status=s))}" for s in codes.CELL_STATUS)
    name = html.escape(str(summary.attrs.get("experiment", "")))
    bad = [s for s in codes.CELL_STATUS if s != "ok"]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{name}: cells per status</title><style>{STATUS_CSS}</style></head><body>",
        f"<h3>{name}: cells per status</h3>",
        f"<p class='totals'>Totals: {html.escape(totals)}</p>",
        _styled(frame, bad, "cells per grid point, by status and convergence type"),
    ]
    if "count_svm_status" in summary:
        svm = summary["count_svm_status"]
        tot = svm.sum([d for d in svm.dims if d not in ("svm", "svm_status")])
        svm_frame = tot.to_series().unstack("svm_status")[list(codes.SVM_STATUS)].astype(int)
        svm_frame.columns.name = None
        svm_frame.index.name = "SVM"
        parts.append(
            _styled(svm_frame, ["solver_error"], "SVM solves per status (all grid points)")
        )
    parts.append("</body></html>")
    write_text_atomic(out, "\n".join(parts))
    experiment = str(summary.attrs.get("experiment", ""))
    write_record(record_of(out), "status_table", experiment, [out], {"summary": summary_sha})
    return Path(out)
