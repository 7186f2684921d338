"""Status at a glance: status tables for the report and ``attnsvm status`` for a results dir."""

from __future__ import annotations

import html
import json
import os
import socket
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes


def status_frame(summary: xr.Dataset):
    """One row per grid point: counts per cell status, then per convergence type (pandas)."""
    cs = summary["count_status"]
    axes = [d for d in cs.dims if d != "status"]
    table = cs.to_series().unstack("status")[list(codes.CELL_STATUS)]
    conv = summary.get("count_convergence")
    if conv is not None:
        ct = conv.to_series().unstack("convergence")[list(codes.CONVERGENCE)]
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


def write_status_table(summary_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Styled HTML tables: cells per status (and convergence type) for every grid point, and
    SVM solves per status; failed, nonfinite and missing counts above zero are highlighted."""
    summary = xr.open_dataset(summary_path).load()
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
    out = Path(out)
    out.write_text("\n".join(parts), encoding="utf-8")
    return out


def _claim_state(claim: Path) -> str:
    """running / killed for a block's claim file (``.<block>.zarr.running``)."""
    try:
        info = json.loads(claim.read_text())
    except (OSError, ValueError):
        return "running"
    if info.get("host") != socket.gethostname():
        return "running"  # another node: cannot check the process, trust the claim
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return "killed"
    except (PermissionError, KeyError, ValueError):
        return "running"
    return "running"


def _store_info(p: Path) -> tuple[float, dict[str, int], bool]:
    attrs = json.loads((p / "zarr.json").read_text()).get("attributes", {})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
        st = xr.open_zarr(p, consolidated=False)["status"].values
    counts = {s: int((st == i).sum()) for i, s in enumerate(codes.CELL_STATUS)}
    return float(attrs.get("seconds_compute", np.nan)), counts, bool(attrs.get("block_failed"))


def scan_experiment(exp_dir: Path, plan: dict[str, int] | None = None) -> dict:
    """Blocks done / running / failed / missing, cells by status and a time estimate.

    ``plan``: planned blocks of the experiment ``{name: number of cells}`` (from the config);
    without it only what is on disk is known and missing blocks cannot be counted.
    """
    blocks_dir = exp_dir / "blocks"
    done: dict[str, float] = {}
    failed_blocks: list[str] = []
    running: list[str] = []
    killed: list[str] = []
    cells = {s: 0 for s in codes.CELL_STATUS}
    if blocks_dir.is_dir():
        for p in sorted(blocks_dir.iterdir()):
            if p.name.endswith(".zarr.running"):
                name = p.name[1:].removesuffix(".zarr.running")
                (running if _claim_state(p) == "running" else killed).append(name)
            elif not p.name.startswith(".") and p.suffix == ".zarr" and (p / "zarr.json").exists():
                name = p.name.removesuffix(".zarr")
                try:
                    sec, counts, crashed = _store_info(p)
                except (OSError, ValueError, KeyError):
                    continue  # unreadable: counted as missing below
                done[name] = sec
                if crashed:
                    failed_blocks.append(name)
                for k, v in counts.items():
                    cells[k] += v
    if plan is not None:
        done = {k: v for k, v in done.items() if k in plan}
        missing = [b for b in plan if b not in done]
        cells["missing"] += sum(plan[b] for b in missing)
    else:
        missing = sorted(set(killed) - set(done))
    secs = [v for v in done.values() if np.isfinite(v)]
    mean_s = float(np.mean(secs)) if secs else float("nan")
    todo = len([b for b in missing if b not in running])
    return {
        "blocks_planned": len(plan) if plan is not None else None,
        "blocks_done": len(done),
        "blocks_running": len([b for b in running if b not in done]),
        "blocks_killed": sorted(b for b in killed if b not in done),
        "blocks_failed": sorted(failed_blocks),
        "blocks_missing": len(missing),
        "cells": cells,
        "mean_block_seconds": mean_s,
        "estimated_remaining_seconds": mean_s * todo if secs else None,
    }


def plan_from_configfile(configfile: str | os.PathLike) -> tuple[str, dict[str, dict[str, int]]]:
    """Results dir and planned blocks ``{experiment: {block: cells}}`` of a config file."""
    import yaml

    from attnsvm.workflow_plan import Plan

    plan = Plan.from_config(yaml.safe_load(Path(configfile).read_text()))
    blocks = {
        exp: {name: len(b.cells) for name, b in plan.blocks(exp).items()}
        for exp in plan.experiments
    }
    return plan.results, blocks


def print_status(
    path: str | os.PathLike | None = None,
    as_json: bool = False,
    configfile: str | os.PathLike | None = None,
    failed_paths: bool = False,
) -> int:
    """Print per-experiment progress of a sweep (results dir or one experiment dir).

    With ``configfile`` the planned blocks are known, so missing blocks and cells are counted
    and the remaining time is estimated from the measured block times.
    """
    plans: dict[str, dict[str, int]] | None = None
    if configfile is not None:
        results, plans = plan_from_configfile(configfile)
        path = path or results
    root = Path(path or "results")
    if root.is_dir() and (root / "blocks").is_dir():
        exps = {root.name: root}
    else:
        names = set(plans or {}) | (
            {p.name for p in root.iterdir() if (p / "blocks").is_dir()} if root.is_dir() else set()
        )
        exps = {n: root / n for n in sorted(names)}
    report = {
        n: scan_experiment(d, None if plans is None else plans.get(n, {})) for n, d in exps.items()
    }
    if failed_paths:
        for n, r in report.items():
            for b in r["blocks_failed"]:
                print(exps[n] / "blocks" / f"{b}.zarr")
        return 0
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    if not report:
        print(f"attnsvm status: no experiments under {root}")
        return 0
    for name, r in report.items():
        planned = "" if r["blocks_planned"] is None else f" of {r['blocks_planned']}"
        eta = r["estimated_remaining_seconds"]
        print(
            f"{name}: blocks done {r['blocks_done']}{planned}, running {r['blocks_running']}, "
            f"missing {r['blocks_missing']}, killed {len(r['blocks_killed'])}, "
            f"failed (crashed) {len(r['blocks_failed'])}"
        )
        print("  cells: " + ", ".join(f"{k} {v}" for k, v in r["cells"].items()))
        if eta:
            print(
                f"  remaining: ~{eta:.0f} s of block compute time "
                f"({r['mean_block_seconds']:.1f} s per block measured)"
            )
        if r["blocks_failed"]:
            print(
                "  crashed blocks (rerun with --forcerun on their paths; list them with "
                "`attnsvm status --failed-paths`): " + ", ".join(r["blocks_failed"][:5])
            )
    return 0
