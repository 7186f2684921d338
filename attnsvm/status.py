"""Status at a glance: status tables for the report and ``attnsvm status`` for a results dir."""

from __future__ import annotations

import html
import json
import os
import socket
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attnsvm import codes
from attnsvm.integrity import check_block

if TYPE_CHECKING:
    import xarray as xr


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
    SVM solves per status; failed, nonfinite and missing counts above zero are highlighted."""
    import xarray as xr

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
    return write_text_atomic(out, "\n".join(parts))


def write_text_atomic(out: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``out`` through a unique temporary file and a rename, so a reader (or
    another workflow writing the same file) never sees a partial file."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.partial-{socket.gethostname()}-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
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


def _claim_started(claim: Path) -> float | None:
    """When the job holding a claim started (Unix time), if the claim says."""
    try:
        return float(json.loads(claim.read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


DEFAULT_CONFIGFILE = "config/config.yaml"
"""The config ``attnsvm status`` reads without ``--configfile`` (Snakemake's default too)."""
BRIDGE_SECONDS = 30.0
"""Gaps between jobs shorter than this count as the sweep's time (Snakemake's own work,
interpreter start-up before a job's log opens, other load); longer ones are idle time between
runs and do not (see :func:`estimate_remaining`)."""
RESULT_JOB_SECONDS = 4.0
"""Assumed wall time of one collect / summarize / status_table / figure job (start-up
included) until the results of an experiment exist; see :func:`estimate_remaining`."""


def _store_info(p: Path) -> tuple[float, dict[str, int], bool, tuple[float, float] | None]:
    """Compute seconds, cells by status, crashed?, and (job start, job end) of a block store.

    Reads only the store's ``zarr.json`` (status counts and the job's start are attributes;
    the end is the file's modification time, written just before the store is renamed into
    place); stores written before those attributes existed fall back to the status array.
    """
    meta = p / "zarr.json"
    attrs = json.loads(meta.read_text()).get("attributes", {})
    stored = attrs.get("status_counts")
    if stored is not None:
        got = json.loads(stored) if isinstance(stored, str) else dict(stored)
        counts = {s: int(got.get(s, 0)) for s in codes.CELL_STATUS}
    else:
        import xarray as xr

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
            st = xr.open_zarr(p, consolidated=False)["status"].values
        counts = {s: int((st == i).sum()) for i, s in enumerate(codes.CELL_STATUS)}
    job = None
    if attrs.get("job_started") is not None:
        job = (float(attrs["job_started"]), meta.stat().st_mtime)
    return (
        float(attrs.get("seconds_compute", np.nan)),
        counts,
        bool(attrs.get("block_failed")),
        job,
    )


def scan_experiment(
    exp_dir: Path, plan: dict[str, int] | None = None, digests: dict[str, str] | None = None
) -> dict:
    """Blocks done / running / failed / missing, cells by status and measured job times.

    ``plan``: planned blocks of the experiment ``{name: number of cells}`` (from the config);
    without it only what is on disk is known and missing blocks cannot be counted.
    ``digests``: the planned blocks' cells digests; a store holding other cells is stale.
    Only verified stores count (:func:`attnsvm.integrity.check_block`, hashing each file
    written since its manifest was, so that untouched stores cost no hashing); the others are
    listed in ``blocks_unfinished`` (path, state: damaged / stale / foreign / retry, reason)
    and count as missing; entries that are no planned block are listed in ``ignored``.
    ``jobs`` holds ``{block: [start, end]}`` (Unix times) of the finished block jobs whose
    store records its job's start; :func:`estimate_remaining` turns them into a time left.
    """
    blocks_dir = exp_dir / "blocks"
    done: dict[str, float] = {}
    jobs: dict[str, list[float]] = {}
    running_since: dict[str, float] = {}
    failed_blocks: list[str] = []
    running: list[str] = []
    killed: list[str] = []
    cells = {s: 0 for s in codes.CELL_STATUS}
    unfinished: list[dict[str, str]] = []
    ignored: list[str] = []
    if blocks_dir.is_dir():
        with os.scandir(blocks_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            p = Path(e.path)
            if e.name.endswith(".zarr.running"):
                name = e.name[1:].removesuffix(".zarr.running")
                if _claim_state(p) == "running":
                    running.append(name)
                    started = _claim_started(p)
                    if started is not None:
                        running_since[name] = started
                else:
                    killed.append(name)
            elif not e.name.startswith("."):
                name = e.name.removesuffix(".zarr")
                if p.suffix != ".zarr" or (plan is not None and name not in plan):
                    ignored.append(str(p))  # not part of this config: neither done nor counted
                    continue
                # quick: files not written since their hash was taken are not hashed again
                digest = (digests or {}).get(name)
                chk = check_block(p, exp_dir.name, name, digest, trust_unchanged=True)
                if chk.finished:
                    try:
                        sec, counts, crashed, job = _store_info(p)
                    except Exception as err:  # verified, yet its metadata cannot be read
                        chk = type(chk)(p, "damaged", f"cannot be read: {err}")
                if not chk.finished:
                    unfinished.append(
                        {"block": name, "path": str(p), "state": chk.state, "reason": chk.reason}
                    )
                    continue
                done[name] = sec
                if job is not None:
                    jobs[name] = list(job)
                if crashed:
                    failed_blocks.append(name)
                for k, v in counts.items():
                    cells[k] += v
    if plan is not None:
        missing = [b for b in plan if b not in done]
        cells["missing"] += sum(plan[b] for b in missing)
    else:
        missing = sorted(set(killed) - set(done))
    secs = [v for v in done.values() if np.isfinite(v)]
    return {
        "blocks_planned": len(plan) if plan is not None else None,
        "blocks_done": len(done),
        "blocks_running": len([b for b in running if b not in done]),
        "running": sorted(b for b in running if b not in done),
        "blocks_killed": sorted(b for b in killed if b not in done),
        "blocks_failed": sorted(failed_blocks),
        "blocks_missing": len(missing),
        "missing": missing,
        "blocks_unfinished": unfinished,
        "ignored": ignored,
        "cells": cells,
        "mean_block_seconds": float(np.mean(secs)) if secs else float("nan"),
        "jobs": jobs,
        "running_since": {b: t for b, t in running_since.items() if b not in done},
        "estimated_remaining_seconds": None,
    }


def _union_length(intervals: list[tuple[float, float]], bridge: float = 0.0) -> float:
    """Total length of the union of ``[start, end]`` intervals; gaps up to ``bridge`` seconds
    between them count as covered, longer gaps (idle time) are left out."""
    total, end = 0.0, -np.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - (a if a > end + bridge else end)
        end = b
    return total


def estimate_remaining(
    scans: dict[str, dict],
    predicted: dict[str, dict[str, float]],
    pending_results: dict[str, int],
    result_jobs: list[tuple[float, float]] = (),
    now: float | None = None,
    result_chains: dict[str, int] | None = None,
) -> dict:
    """Remaining wall time of a sweep, per experiment and overall, from measured job times.

    ``scans``: :func:`scan_experiment` per experiment; ``predicted``: the plan's relative
    cost of every block (:meth:`attnsvm.workflow_plan.Plan.block_seconds`); ``pending_results``:
    collect / summarize / status / figure jobs not yet done per experiment; ``result_jobs``:
    (start, end) of the finished ones (their mean wall time replaces ``RESULT_JOB_SECONDS``).

    Every finished block job measured its wall time, start-up included (job start to store
    written). A missing block is predicted as its planned cost times the measured / planned
    ratio of its experiment's finished blocks (of all finished blocks while its experiment
    has none; a running block counts half). Their sum, plus ``RESULT_JOB_SECONDS`` per
    pending result job, is divided by the job slots (the most jobs seen running at once).
    Each job also gets the measured per-job overhead its own clock misses (interpreter
    start-up before its log opens, Snakemake's work between jobs): the slots' time over the
    union of the job intervals (running jobs up to ``now``; gaps of up to ``BRIDGE_SECONDS``
    included, longer ones are idle time between runs) minus the jobs' wall times, per job.

    ``result_chains``: per experiment, how many of its result jobs still have to run one
    after the other (collect, then summarize, then the status table and figures side by
    side: 3, 2, 1 or 0). The longest chain is the sweep's tail, which runs on one core
    after the last block: the overall estimate adds it at full length instead of dividing
    it by the concurrency.
    """
    now = time.time() if now is None else now
    walls: dict[str, list[tuple[float, float]]] = {}  # exp -> [(wall, planned)]
    intervals: list[tuple[float, float]] = []
    for exp, r in scans.items():
        for block, (a, b) in r.get("jobs", {}).items():
            plan_s = predicted.get(exp, {}).get(block)
            if plan_s and b > a:
                walls.setdefault(exp, []).append((b - a, plan_s))
                intervals.append((a, b))
    every = [x for w in walls.values() for x in w]
    ratio_all = sum(w for w, _ in every) / sum(p for _, p in every) if every else 1.0
    done_results = [(a, b) for a, b in result_jobs if b >= a]
    result_s = (
        sum(b - a for a, b in done_results) / len(done_results)
        if done_results
        else RESULT_JOB_SECONDS
    )
    intervals += done_results
    for r in scans.values():
        intervals += [(t, now) for t in r.get("running_since", {}).values() if t <= now]
    busy = sum(b - a for a, b in intervals)
    span = _union_length(intervals, BRIDGE_SECONDS)
    slots = _max_overlap(intervals)
    # per job, the part its own clock does not see (interpreter start-up before the job's
    # log or claim, Snakemake's work between jobs): the slots' time not covered by jobs
    overhead = max(0.0, (slots * span - busy) / len(intervals)) if intervals else 0.0
    per_exp: dict[str, float] = {}
    for exp, r in scans.items():
        own = walls.get(exp, [])
        ratio = sum(w for w, _ in own) / sum(p for _, p in own) if own else ratio_all
        plan = predicted.get(exp, {})
        running = set(r.get("running", []))
        work = sum(
            (ratio * plan.get(b, 0.0) + overhead) * (0.5 if b in running else 1.0)
            for b in r.get("missing", [])
        )
        per_exp[exp] = (work + pending_results.get(exp, 0) * (result_s + overhead)) / slots
    tail = max((result_chains or {}).values(), default=0) * (result_s + overhead)
    overall = sum(per_exp.values()) + tail - tail / slots if per_exp else 0.0
    return {
        "experiments": per_exp,
        "overall": float(overall),
        "parallel_jobs": slots,
        "overhead_per_job": overhead,
        "measured_jobs": len(every),
        "measured_over_planned": ratio_all,
        "result_job_seconds": result_s,
    }


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one time (the job slots a sweep used), at least 1."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = level = 0
    for _, step in events:  # ends sort before starts at equal times
        level += step
        most = max(most, level)
    return max(1, most)


def default_configfile() -> Path | None:
    """``config/config.yaml`` under the working directory when it exists (as for Snakemake)."""
    p = Path(DEFAULT_CONFIGFILE)
    return p if p.is_file() else None


def plan_from_configfile(configfile: str | os.PathLike) -> tuple[str, dict[str, dict[str, int]]]:
    """Results dir and planned blocks ``{experiment: {block: cells}}`` of a config file."""
    plan = _plan(configfile)
    blocks = {
        exp: {name: len(b.cells) for name, b in plan.blocks(exp).items()}
        for exp in plan.experiments
    }
    return plan.results, blocks


def _plan(configfile: str | os.PathLike):
    """The plan of a config file, read by the safe loader (:mod:`attnsvm.config_io`)."""
    from attnsvm.config_io import load_config_file
    from attnsvm.workflow_plan import Plan

    return Plan.from_config(load_config_file(configfile))


def _result_jobs(plan, exp: str) -> list[tuple[str, str]]:
    """(log, output) of every result job of ``exp``: the paths of workflow/rules/*.smk."""
    p, logs = plan.paths, f"{plan.paths.experiment(exp)}/logs"
    jobs = [
        (f"{logs}/collect.log", f"{p.sweep(exp)}/zarr.json"),
        (f"{logs}/summarize.log", p.summary(exp)),
        (f"{logs}/status_table.log", p.status_table(exp)),
    ]
    jobs += [
        (f"{logs}/figure_{f}.log", p.figure(exp, f, "png")) for f in plan.experiments[exp].figures
    ]
    return jobs


def _result_job_times(plan, exp: str) -> list[tuple[float, float]]:
    """(start, end) of the finished result jobs of ``exp``: log opened, output written."""
    from attnsvm.logs import job_start_time

    out = []
    for log, output in _result_jobs(plan, exp):
        start = job_start_time(log)
        try:
            end = os.stat(output).st_mtime
        except OSError:
            continue
        if start is not None and end >= start:
            out.append((start, end))
    return out


def _result_chain(plan, exp: str) -> int:
    """Result jobs of ``exp`` still to run one after the other: 3 (collect pending), 2
    (summarize pending), 1 (a status table or figure pending) or 0."""
    jobs = _result_jobs(plan, exp)  # collect, summarize, then status table and figures
    pending = [not Path(output).exists() for _, output in jobs]
    if pending[0]:
        return 3
    if pending[1]:
        return 2
    return int(any(pending[2:]))


def _pending_results(plan, exp: str) -> int:
    """Result jobs of ``exp`` (collect, summarize, status table, figures) not yet done."""
    return sum(not Path(output).exists() for _, output in _result_jobs(plan, exp))


def _fmt_seconds(sec: float) -> str:
    if sec < 90:
        return f"{sec:.0f} s"
    if sec < 5400:
        return f"{sec / 60:.1f} min"
    return f"{sec / 3600:.1f} h"


def sweep_status(
    path: str | os.PathLike | None = None, configfile: str | os.PathLike | None = None
) -> tuple[dict[str, Path], dict[str, dict], dict | None]:
    """Experiment dirs, :func:`scan_experiment` per experiment and the overall line.

    With a config (``configfile``, or ``config/config.yaml`` when neither is given, as
    Snakemake does) the planned blocks are known, so missing blocks and cells are counted and
    the remaining wall time is estimated from the measured job times
    (:func:`estimate_remaining`), per experiment and overall (``None`` without a config).
    """
    if configfile is None and path is None:
        configfile = default_configfile()
    plan = None
    plans: dict[str, dict[str, int]] | None = None
    if configfile is not None:
        plan = _plan(configfile)
        plans = {
            exp: {name: len(b.cells) for name, b in plan.blocks(exp).items()}
            for exp in plan.experiments
        }
        path = path or plan.results
    root = Path(path or "results")
    if root.is_dir() and (root / "blocks").is_dir():
        exps = {root.name: root}
    else:
        names = set(plans or {}) | (
            {p.name for p in root.iterdir() if (p / "blocks").is_dir()} if root.is_dir() else set()
        )
        order = list(plans or {})  # config order first, then what else is on disk
        exps = {n: root / n for n in order + sorted(names - set(order))}
    digests = {e: plan.block_digests(e) for e in plan.experiments} if plan is not None else {}
    report = {
        n: scan_experiment(d, None if plans is None else plans.get(n, {}), digests.get(n))
        for n, d in exps.items()
    }
    overall = None
    if plan is not None:
        known = [e for e in report if e in plan.experiments]
        est = estimate_remaining(
            {e: report[e] for e in known},
            {e: plan.block_seconds(e) for e in known},
            {e: _pending_results(plan, e) for e in known},
            [t for e in known for t in _result_job_times(plan, e)],
            result_chains={e: _result_chain(plan, e) for e in known},
        )
        for e in known:
            report[e]["estimated_remaining_seconds"] = est["experiments"][e]
        overall = {
            "blocks_planned": sum(r["blocks_planned"] or 0 for r in report.values()),
            "blocks_done": sum(r["blocks_done"] for r in report.values()),
            "blocks_running": sum(r["blocks_running"] for r in report.values()),
            "blocks_missing": sum(r["blocks_missing"] for r in report.values()),
            "estimated_remaining_seconds": est["overall"],
            "parallel_jobs": est["parallel_jobs"],
            "measured_jobs": est["measured_jobs"],
        }
    for r in report.values():
        for key in ("jobs", "missing", "running", "running_since"):
            r.pop(key, None)
    return exps, report, overall


def print_status(
    path: str | os.PathLike | None = None,
    as_json: bool = False,
    configfile: str | os.PathLike | None = None,
    failed_paths: bool = False,
) -> int:
    """Print per-experiment progress of a sweep (results dir or one experiment dir) and an
    overall line with the remaining wall time (see :func:`sweep_status`)."""
    exps, report, overall = sweep_status(path, configfile)
    root = Path(path) if path is not None else None
    if failed_paths:
        for n, r in report.items():
            for b in r["blocks_failed"]:
                print(exps[n] / "blocks" / f"{b}.zarr")
        return 0
    if as_json:
        print(json.dumps({"experiments": report, "overall": overall}, indent=2))
        return 0
    if not report:
        print(f"attnsvm status: no experiments under {root or 'results'}")
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
            print(f"  remaining: ~{_fmt_seconds(eta)} of wall time (its share of the sweep)")
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
    if overall is not None:
        left = overall["estimated_remaining_seconds"]
        print(
            f"overall: blocks done {overall['blocks_done']} of {overall['blocks_planned']}, "
            f"running {overall['blocks_running']}, missing {overall['blocks_missing']}; "
            + (
                f"remaining ~{_fmt_seconds(left)} of wall time "
                f"({overall['parallel_jobs']:.1f} jobs in parallel, "
                f"from {overall['measured_jobs']} measured jobs)"
                if left
                else "nothing left to run"
            )
        )
    return 0
