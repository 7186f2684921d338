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


def _point_label(ds: xr.Dataset, index: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in index.items()) or "(all)"


def status_rows(summary: xr.Dataset) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per grid point with counts per cell status and convergence."""
    axes = list(summary.attrs.get("axes", []))
    cs = summary["count_status"]
    conv = summary.get("count_convergence")
    header = list(axes) + list(codes.CELL_STATUS)
    if conv is not None:
        header += [f"conv:{c}" for c in codes.CONVERGENCE]
    rows = []
    stacked = cs.stack(point=axes) if axes else cs.expand_dims(point=[0])
    for p in range(stacked.sizes["point"]):
        sel = stacked.isel(point=p)
        row = [str(sel[a].item()) for a in axes]
        row += [str(int(sel.sel(status=s))) for s in codes.CELL_STATUS]
        if conv is not None:
            cv = conv.stack(point=axes).isel(point=p) if axes else conv
            row += [str(int(cv.sel(convergence=c))) for c in codes.CONVERGENCE]
        rows.append(row)
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
    parts.append("</table></body></html>")
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
            if name not in done and log.stat().st_size > 0 and time.time() - log.stat().st_mtime > 5:
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
    exps = [root] if (root / "blocks").is_dir() else sorted(
        p for p in root.iterdir() if (p / "blocks").is_dir()
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
            "cells " + ", ".join(f"{k} {v}" for k, v in r["cells"].items())
            + (f"; ~{eta:.0f} s of block time left" if eta else "")
        )
    return 0
