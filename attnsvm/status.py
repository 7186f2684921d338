"""Status at a glance: status tables for the report and ``attnsvm status`` for a results dir."""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes


def status_rows(summary: xr.Dataset) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per grid point with counts per cell status and convergence."""
    cs = summary["count_status"]
    axes = [d for d in cs.dims if d != "status"]
    table = cs.to_series().unstack("status")[list(codes.CELL_STATUS)]
    header = list(axes) + list(codes.CELL_STATUS)
    conv = summary.get("count_convergence")
    if conv is not None:
        ct = conv.to_series().unstack("convergence")[list(codes.CONVERGENCE)]
        ct.columns = [f"conv:{c}" for c in codes.CONVERGENCE]
        table = table.join(ct)
        header += list(ct.columns)
    rows = []
    for idx, values in table.iterrows():
        key = list(idx) if isinstance(idx, tuple) else ([idx] if axes else [])
        rows.append([str(k) for k in key] + [str(int(v)) for v in values])
    return header, rows


def write_status_table(summary_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """HTML table of cells per status (and convergence type) for every grid point."""
    summary = xr.open_dataset(summary_path).load()
    header, rows = status_rows(summary)
    total = summary["count_status"].sum([d for d in summary["count_status"].dims if d != "status"])
    totals = ", ".join(f"{s}: {int(total.sel(status=s))}" for s in codes.CELL_STATUS)
    parts = [
        "<html><body>",
        f"<h3>{html.escape(str(summary.attrs.get('experiment', '')))}: cells per status</h3>",
        f"<p>Totals &mdash; {html.escape(totals)}</p>",
        "<table border='1' cellpadding='3'><tr>",
        "".join(f"<th>{html.escape(h)}</th>" for h in header),
        "</tr>",
    ]
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    if "count_svm_status" in summary:
        svm = summary["count_svm_status"]
        tot = svm.sum([d for d in svm.dims if d not in ("svm", "svm_status")])
        parts.append("<h4>SVM solves per status (all grid points)</h4>")
        parts.append(
            "<table border='1' cellpadding='3'><tr><th>svm</th>"
            + "".join(f"<th>{s}</th>" for s in codes.SVM_STATUS)
            + "</tr>"
        )
        for name in tot["svm"].values:
            cells = "".join(
                f"<td>{int(tot.sel(svm=name, svm_status=s))}</td>" for s in codes.SVM_STATUS
            )
            parts.append(f"<tr><td>{html.escape(str(name))}</td>{cells}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    out = Path(out)
    out.write_text("\n".join(parts))
    return out


def scan_experiment(exp_dir: Path, plan_blocks: list[str] | None = None) -> dict:
    """Blocks done / running / failed / missing and measured block times for one experiment."""
    blocks_dir = exp_dir / "blocks"
    done, running, seconds, cells = [], [], [], {s: 0 for s in codes.CELL_STATUS}
    if blocks_dir.is_dir():
        for p in blocks_dir.iterdir():
            if p.name.startswith(".") and ".partial-" in p.name:
                running.append(p.name)
            elif p.suffix == ".zarr" and (p / "zarr.json").exists():
                done.append(p.name.removesuffix(".zarr"))
                try:
                    attrs = json.loads((p / "zarr.json").read_text()).get("attributes", {})
                    seconds.append(float(attrs.get("seconds_compute", np.nan)))
                    st = xr.open_zarr(p, consolidated=False)["status"].values
                    for i, s in enumerate(codes.CELL_STATUS):
                        cells[s] += int((st == i).sum())
                except (OSError, ValueError, KeyError):
                    pass
    logs = exp_dir / "logs" / "block"
    failed = []
    if logs.is_dir():
        for log in logs.glob("*.log"):
            name = log.name.removesuffix(".log")
            if (
                name not in done
                and log.stat().st_size > 0
                and time.time() - log.stat().st_mtime > 5
            ):
                failed.append(name)
    planned = plan_blocks if plan_blocks is not None else sorted(set(done) | set(failed))
    missing = [b for b in planned if b not in done]
    mean_s = float(np.nanmean(seconds)) if seconds else float("nan")
    return {
        "blocks_planned": len(planned),
        "blocks_done": len(done),
        "blocks_running": len(running),
        "blocks_failed_or_killed": len([b for b in failed if b in missing]),
        "blocks_missing": len(missing),
        "cells": cells,
        "mean_block_seconds": mean_s,
        "estimated_remaining_seconds": mean_s * len(missing) if seconds else None,
    }


def print_status(path: str | os.PathLike, as_json: bool = False) -> int:
    """Print per-experiment progress of the sweep(s) under ``path`` (results dir or one exp)."""
    root = Path(path)
    if not root.exists():
        print(f"attnsvm status: no such directory: {root}")
        return 2
    exps = (
        [root]
        if (root / "blocks").is_dir()
        else sorted(p for p in root.iterdir() if (p / "blocks").is_dir())
    )
    report = {p.name: scan_experiment(p) for p in exps}
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    if not report:
        print(f"attnsvm status: no experiments under {root}")
        return 0
    for name, r in report.items():
        eta = r["estimated_remaining_seconds"]
        print(
            f"{name}: blocks done {r['blocks_done']}, running {r['blocks_running']}, "
            f"failed/killed {r['blocks_failed_or_killed']}, missing {r['blocks_missing']}; "
            "cells "
            + ", ".join(f"{k} {v}" for k, v in r["cells"].items())
            + (f"; ~{eta:.0f} s of block time left" if eta else "")
        )
    return 0
