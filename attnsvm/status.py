"""Status at a glance: status tables for the report and ``attnsvm status`` for a results dir."""

from __future__ import annotations

import html
import json
import os
import socket
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.integrity import check_block, open_store


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
    st = open_store(p)["status"].values
    counts = {s: int((st == i).sum()) for i, s in enumerate(codes.CELL_STATUS)}
    return float(attrs.get("seconds_compute", np.nan)), counts, bool(attrs.get("block_failed"))


def scan_experiment(
    exp_dir: Path, plan: dict[str, int] | None = None, digests: dict[str, str] | None = None
) -> dict:
    """Blocks done / running / failed / missing, cells by status and a time estimate.

    ``plan``: planned blocks of the experiment ``{name: number of cells}`` (from the config);
    without it only what is on disk is known and missing blocks cannot be counted.
    ``digests``: the planned blocks' cells digests; a store holding other cells is stale.
    Only verified stores count (:func:`attnsvm.integrity.check_block`); the others are
    listed in ``blocks_unfinished`` (path, state: damaged / stale / foreign / retry, reason)
    and count as missing; entries that are no planned block are listed in ``ignored``.
    """
    blocks_dir = exp_dir / "blocks"
    done: dict[str, float] = {}
    failed_blocks: list[str] = []
    running: list[str] = []
    killed: list[str] = []
    cells = {s: 0 for s in codes.CELL_STATUS}
    unfinished: list[dict[str, str]] = []
    ignored: list[str] = []
    if blocks_dir.is_dir():
        for p in sorted(blocks_dir.iterdir()):
            if p.name.endswith(".zarr.running"):
                name = p.name[1:].removesuffix(".zarr.running")
                (running if _claim_state(p) == "running" else killed).append(name)
            elif not p.name.startswith("."):
                name = p.name.removesuffix(".zarr")
                if p.suffix != ".zarr" or (plan is not None and name not in plan):
                    ignored.append(str(p))
                    continue
                chk = check_block(p, exp_dir.name, name, (digests or {}).get(name))
                if chk.finished:
                    try:
                        sec, counts, crashed = _store_info(p)
                    except Exception as err:  # verified, yet zarr cannot read it
                        chk = type(chk)(p, "damaged", f"cannot be read: {err}")
                if not chk.finished:
                    unfinished.append(
                        {"block": name, "path": str(p), "state": chk.state, "reason": chk.reason}
                    )
                    continue
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
        "blocks_unfinished": unfinished,
        "ignored": ignored,
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


def _digests_from_configfile(configfile: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Cells digests of the planned blocks ``{experiment: {block: digest}}`` of a config."""
    import yaml

    from attnsvm.workflow_plan import Plan

    plan = Plan.from_config(yaml.safe_load(Path(configfile).read_text()))
    return {exp: plan.block_digests(exp) for exp in plan.experiments}


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
    digests: dict[str, dict[str, str]] = {}
    if configfile is not None:
        results, plans = plan_from_configfile(configfile)
        digests = _digests_from_configfile(configfile)
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
        n: scan_experiment(d, None if plans is None else plans.get(n, {}), digests.get(n))
        for n, d in exps.items()
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
        for u in r["blocks_unfinished"]:
            print(f"  {u['state']} block store (recomputed by the next run): {u['path']}")
            print(f"    {u['reason']}")
        if r["ignored"]:
            print(f"  ignored, no block of the plan: {', '.join(r['ignored'][:5])}")
        if r["blocks_failed"]:
            print(
                "  crashed blocks (rerun with --forcerun on their paths; list them with "
                "`attnsvm status --failed-paths`): " + ", ".join(r["blocks_failed"][:5])
            )
    return 0
