"""Status at a glance: ``attnsvm status`` for a results directory while a sweep runs.

Blocks done / running / failed / missing, cells by status and the remaining wall time; the
report's HTML status table is :mod:`attnsvm.report.status_table`.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
import warnings
from pathlib import Path

from attnsvm import codes, status_cache
from attnsvm.logs import job_start_time
from attnsvm.status_cache import StatusPlan, StoreChecks, store_key
from attnsvm.sweep import onefile, owner
from attnsvm.sweep.failed import current_failures
from attnsvm.sweep.integrity import check_block, open_store
from attnsvm.sweep.job import RUNNING_SUFFIX


def _claim_state(claim: Path) -> str:
    """running / killed for a block's claim file (``.<block>.zarr.running``): running only
    while its job's process lives (:func:`attnsvm.sweep.owner.state`: not a zombie, not a
    reused pid) or runs on another node, which cannot be checked from here."""
    try:
        info = json.loads(claim.read_text())
    except (OSError, ValueError):
        return "killed"  # written atomically: unreadable means damaged, not being written
    return "killed" if owner.state(info) == owner.DEAD else "running"


def _claim_started(claim: Path) -> float | None:
    """When the job holding a claim started (Unix time), if the claim says."""
    try:
        return float(json.loads(claim.read_text())["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


RUNNING = onefile.SUFFIX + RUNNING_SUFFIX
"""The name's end of a block job's claim (:func:`attnsvm.sweep.job.claim_path`)."""
DEFAULT_CONFIGFILE = "config/config.yaml"
"""The config ``attnsvm status`` reads without ``--configfile`` (Snakemake's default too)."""
BRIDGE_SECONDS = 30.0
"""Gaps between jobs shorter than this count as the sweep's time (Snakemake's own work,
interpreter start-up before a job's log opens, other load); longer ones are idle time between
runs and do not (see :func:`estimate_remaining`)."""
RESULT_JOB_SECONDS = 4.0
"""Assumed wall time of one collect or derive job (start-up included) until the results of
an experiment exist; see :func:`estimate_remaining`."""


def _store_info(p: Path) -> tuple[float, dict[str, int], bool, tuple[float, float] | None]:
    """Compute seconds, cells by status, crashed?, and (job start, job end) of a block store.

    Reads only the store's ``zarr.json`` (status counts and the job's start are attributes;
    the end is the file's modification time, written just before the store is renamed into
    place); stores written before those attributes existed fall back to the status array.
    """
    meta = p if onefile.is_onefile(p) else p / "zarr.json"  # a one-file store: its zarr.json
    text = onefile.member(p, "zarr.json") if onefile.is_onefile(p) else meta.read_bytes()
    attrs = json.loads(text).get("attributes", {})
    stored = attrs.get("status_counts")
    if stored is not None:
        got = json.loads(stored) if isinstance(stored, str) else dict(stored)
        counts = {s: int(got.get(s, 0)) for s in codes.CELL_STATUS}
        counts[status_cache.TORCH_LOOP] = int(attrs.get("cells_torch_loop", 0))  # gd.fused
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
            st = open_store(p)["status"].values
        counts = {s: int((st == i).sum()) for i, s in enumerate(codes.CELL_STATUS)}
    job = None
    if attrs.get("job_started") is not None:
        job = (float(attrs["job_started"]), meta.stat().st_mtime)
    return (
        float(attrs.get("seconds_compute", math.nan)),
        counts,
        bool(attrs.get("block_failed")),
        job,
    )


def _finite_mean(values) -> float:
    """Mean of the finite values (NaN when there are none)."""
    finite = [v for v in values if math.isfinite(v)]
    return float(statistics.fmean(finite)) if finite else float("nan")


def _claim(claim: Path) -> float | bool | None:
    """A block job's claim: False when its job was killed, else when the job started (None
    when the claim does not say)."""
    return False if _claim_state(claim) != "running" else _claim_started(claim)


def _entries(blocks_dir: Path) -> list[str]:
    """Names of the entries of a ``blocks/`` folder, sorted (none when it does not exist)."""
    try:
        return sorted(os.listdir(blocks_dir))
    except OSError:
        return []


def _check_store(
    p: Path, experiment: str, name: str, digest: str | None, verify: bool
) -> tuple[str, str, tuple | None]:
    """State, reason and (when finished) :func:`_store_info` of one block store.

    Quick (``verify`` false): the manifest must parse and name this block, its cells
    (``digest``, or its start: :func:`attnsvm.status_cache.short`) and this attnsvm version;
    its files are not opened (the workflow verifies every file before reading a store).
    ``verify``: every file is also checked, hashing those written since the manifest was
    (:func:`attnsvm.sweep.integrity.check_block`).
    """
    chk = check_block(p, experiment, name, None, full=verify, trust_unchanged=True,
                      contents=verify)  # fmt: skip
    if not chk.finished:
        return chk.state, chk.reason, None
    if digest is not None and not str(chk.manifest.get("cells_digest", "")).startswith(digest):
        return "stale", "its cells differ from the plan's (cells_digest)", None
    try:
        return chk.state, chk.reason, _store_info(p)
    except Exception as err:  # verified, yet its metadata cannot be read
        return "damaged", f"cannot be read: {err}", None


def _cached_check(
    p: str,
    experiment: str,
    name: str,
    digest: str | None,
    cache: StoreChecks | None,
    verify: bool = False,
) -> tuple[str, str, tuple | None]:
    """:func:`_check_store`; the quick one is remembered in ``cache`` under the store's
    :func:`~attnsvm.status_cache.store_key` and the planned ``digest``."""
    if verify:
        return _check_store(Path(p), experiment, name, digest, verify=True)
    key = store_key(p) if cache is not None else None
    hit = cache.get(name, key, digest) if key is not None else None
    if hit is not None:
        return hit[0], "", hit[1]
    state, reason, info = _check_store(Path(p), experiment, name, digest, verify=False)
    if key is not None and info is not None:
        cache.put(name, key, digest, state, info)
    return state, reason, info


def scan_experiment(
    exp_dir: Path,
    plan: dict[str, int] | None = None,
    digests: dict[str, str] | None = None,
    verify: bool = False,
    cache: StoreChecks | None = None,
) -> dict:
    """Blocks done / running / failed / missing, cells by status and measured job times.

    ``plan``: planned blocks of the experiment ``{name: number of cells}`` (from the config);
    without it only what is on disk is known and missing blocks cannot be counted.
    ``digests``: the planned blocks' cells digests; a store holding other cells is stale.
    Only stores that pass :func:`_check_store` count (quick: their manifests; ``verify``:
    every file too); the others are listed in ``blocks_unfinished`` (path, state: damaged /
    stale / foreign / retry, reason) and count as missing; entries that are no planned block
    are listed in ``ignored``. ``cache``: quick checks remembered between calls
    (:mod:`attnsvm.status_cache`), updated in place; not used with ``verify``.
    ``jobs`` holds ``{block: [start, end]}`` (Unix times) of the finished block jobs whose
    store records its job's start (:func:`estimate_remaining` turns them into a time left).
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
    prefix = os.path.join(blocks_dir, "")
    for entry in _entries(blocks_dir):
        if entry.endswith(RUNNING):
            name, started = entry[1:].removesuffix(RUNNING), _claim(blocks_dir / entry)
            (killed if started is False else running).append(name)
            if isinstance(started, float):
                running_since[name] = started
            continue
        if entry.startswith("."):
            continue
        p = prefix + entry
        if entry.endswith(onefile.SUFFIX):
            name = entry[: -len(onefile.SUFFIX)]
        else:
            # an earlier attnsvm's store (a folder; converted to one file by the next run)
            # counts as that block's, unless the block's one-file store is there too
            name = entry.removesuffix(".zarr")
            if not entry.endswith(".zarr") or os.path.exists(prefix + name + onefile.SUFFIX):
                name = None
        if name is None or (plan is not None and name not in plan):
            ignored.append(p)  # not part of this config: neither done nor counted
            continue
        digest = (digests or {}).get(name)
        state, reason, info = _cached_check(p, exp_dir.name, name, digest, cache, verify)
        if info is None:
            unfinished.append({"block": name, "path": p, "state": state, "reason": reason})
            continue
        done[name], counts, crashed, job = info
        if job is not None:
            jobs[name] = list(job)
        if crashed:
            failed_blocks.append(name)
        for k, v in counts.items():
            cells[k] = cells.get(k, 0) + v
    if cache is not None:
        cache.keep_only(set(done))
    if plan is not None:
        missing = [b for b in plan if b not in done]
        cells["missing"] += sum(plan[b] for b in missing)
    else:
        missing = sorted(set(killed) - set(done))
    environment = [
        {"block": r["block"], "reason": str(r.get("reason", "")), "host": r.get("host", "")}
        for r in current_failures(blocks_dir, plan)
        if r.get("kind") == "environment"
    ]
    return {
        "blocks_planned": len(plan) if plan is not None else None,
        "blocks_done": len(done),
        "blocks_running": len([b for b in running if b not in done]),
        "running": sorted(b for b in running if b not in done),
        "blocks_killed": sorted(b for b in killed if b not in done),
        "blocks_failed": sorted(failed_blocks),
        "blocks_failed_environment": environment,
        "blocks_missing": len(missing),
        "missing": missing,
        "blocks_unfinished": unfinished,
        "ignored": ignored,
        "cells_torch_loop": cells.pop(status_cache.TORCH_LOOP, 0),
        "cells": cells,
        "mean_block_seconds": _finite_mean(done.values()),
        "jobs": jobs,
        "running_since": {b: t for b, t in running_since.items() if b not in done},
        "estimated_remaining_seconds": None,
    }


def _union_length(intervals: list[tuple[float, float]], bridge: float = 0.0) -> float:
    """Total length of the union of ``[start, end]`` intervals; gaps up to ``bridge`` seconds
    between them count as covered, longer gaps (idle time) are left out."""
    total, end = 0.0, -math.inf
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
    cost of every block (:meth:`attnsvm.plan.Plan.block_seconds`); ``pending_results``:
    collect and derive jobs not yet done per experiment; ``result_jobs``:
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
    after the other (collect, then derive: 2, 1 or 0). The longest chain is the sweep's tail,
    which runs on one core after the last block: the overall estimate adds it at full length
    instead of dividing it by the concurrency.
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


def _result_job_times(plan: StatusPlan, exp: str) -> list[tuple[float, float]]:
    """(start, end) of the finished result jobs of ``exp``: log opened, output written."""
    out = []
    for log, output in plan.result_jobs[exp]:
        start = job_start_time(log)
        try:
            end = os.stat(output).st_mtime
        except OSError:
            continue
        if start is not None and end >= start:
            out.append((start, end))
    return out


def _result_chain(plan: StatusPlan, exp: str) -> int:
    """Result jobs of ``exp`` still to run one after the other: 2 (collect pending), 1
    (derive pending) or 0."""
    jobs = plan.result_jobs[exp]  # collect, then derive
    pending = [not Path(output).exists() for _, output in jobs]
    return len(pending) - pending.index(True) if any(pending) else 0


def _pending_results(plan: StatusPlan, exp: str) -> int:
    """Result jobs of ``exp`` (collect, derive) not done."""
    return sum(not Path(output).exists() for _, output in plan.result_jobs[exp])


def _fmt_seconds(sec: float) -> str:
    if sec < 90:
        return f"{sec:.0f} s"
    if sec < 5400:
        return f"{sec / 60:.1f} min"
    return f"{sec / 3600:.1f} h"


def _experiment_dirs(path: str | os.PathLike | None, plan: StatusPlan | None) -> dict[str, Path]:
    """``{experiment: its dir}``: the config's experiments first, then others on disk."""
    root = Path(path or (plan.results if plan is not None else "results"))
    if root.is_dir() and (root / "blocks").is_dir():
        return {root.name: root}
    planned = plan.experiments if plan is not None else []
    on_disk = set()
    if root.is_dir():
        on_disk = {p.name for p in root.iterdir() if (p / "blocks").is_dir()}
    return {n: root / n for n in planned + sorted(on_disk - set(planned))}


def _overall(plan: StatusPlan, report: dict[str, dict]) -> dict:
    """The remaining wall time per experiment (set in ``report``) and the overall line."""
    known = [e for e in report if e in plan.blocks]
    est = estimate_remaining(
        {e: report[e] for e in known},
        {e: plan.block_seconds(e) for e in known},
        {e: _pending_results(plan, e) for e in known},
        [t for e in known for t in _result_job_times(plan, e)],
        result_chains={e: _result_chain(plan, e) for e in known},
    )
    for e in known:
        report[e]["estimated_remaining_seconds"] = est["experiments"][e]
    return {
        "blocks_planned": sum(r["blocks_planned"] or 0 for r in report.values()),
        "blocks_done": sum(r["blocks_done"] for r in report.values()),
        "blocks_running": sum(r["blocks_running"] for r in report.values()),
        "blocks_missing": sum(r["blocks_missing"] for r in report.values()),
        "estimated_remaining_seconds": est["overall"],
        "parallel_jobs": est["parallel_jobs"],
        "measured_jobs": est["measured_jobs"],
    }


def sweep_status(
    path: str | os.PathLike | None = None,
    configfile: str | os.PathLike | None = None,
    verify: bool = False,
) -> tuple[dict[str, Path], dict[str, dict], dict | None]:
    """Experiment dirs, :func:`scan_experiment` per experiment and the overall line.

    With a config (``configfile``, or ``config/config.yaml`` when neither is given, as
    Snakemake does) the planned blocks are known, so missing blocks and cells are counted and
    the remaining wall time is estimated from the measured job times
    (:func:`estimate_remaining`), per experiment and overall (``None`` without a config).
    The plan and the quick checks of finished stores are cached between calls
    (:mod:`attnsvm.status_cache`); ``verify`` checks every file of every store.
    """
    if configfile is None and path is None:
        configfile = default_configfile()
    plan, cache, cache_path = None, None, None
    if configfile is not None:
        plan, cache, cache_path = status_cache.load(configfile)
    exps = _experiment_dirs(path, plan)
    checks: dict[str, StoreChecks] = {}
    report = {}
    for n, d in exps.items():
        known = plan is not None and n in plan.blocks
        if cache is not None and not verify:
            checks[n] = StoreChecks(cache["stores"].setdefault(str(d), {}))
        report[n] = scan_experiment(
            d,
            None if plan is None else plan.planned(n) if known else {},
            plan.digests(n) if known else None,
            verify=verify,
            cache=checks.get(n),
        )
    if verify and configfile is not None:  # derived outputs against their digests
        from attnsvm.config.files import load_config_file
        from attnsvm.plan import Plan

        full = Plan.from_config(load_config_file(configfile))
        for n in report:
            if n in full.experiments:
                report[n]["derived_unverified"] = full.check_derived(n)
        first = next((n for n in report if n in full.experiments), None)
        if first is not None:  # run-level outputs (run_info, claims page): under the first
            report[first]["derived_unverified"] += full.check_run_outputs()
    if cache is not None and (cache.get("fresh") or any(c.changed for c in checks.values())):
        cache.pop("fresh", None)
        status_cache.save(cache, cache_path)
    overall = _overall(plan, report) if plan is not None else None
    for r in report.values():
        for key in ("jobs", "missing", "running", "running_since"):
            r.pop(key, None)
    return exps, report, overall


def print_status(
    path: str | os.PathLike | None = None,
    as_json: bool = False,
    configfile: str | os.PathLike | None = None,
    failed_paths: bool = False,
    verify: bool = False,
) -> int:
    """Print per-experiment progress of a sweep (results dir or one experiment dir) and an
    overall line with the remaining wall time (see :func:`sweep_status`)."""
    exps, report, overall = sweep_status(path, configfile, verify)
    root = Path(path) if path is not None else None
    if failed_paths:
        for n, r in report.items():
            for b in r["blocks_failed"]:
                print(exps[n] / "blocks" / f"{b}{onefile.SUFFIX}")
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
        if r.get("cells_torch_loop"):
            print(
                f"  {r['cells_torch_loop']} cell(s) trained in the torch loop, outside the "
                "fused loop (a field their model does not declare; the block logs name it)"
            )
        if eta:
            print(f"  remaining: ~{_fmt_seconds(eta)} of wall time (its share of the sweep)")
        for u in r["blocks_unfinished"]:
            print(f"  {u['state']} block store (recomputed by the next run): {u['path']}")
            print(f"    {u['reason']}")
        for line in r.get("derived_unverified", []):
            print(f"  derived output (rebuilt by the next run): {line}")
        if r["ignored"]:
            print(f"  ignored, no block of the plan: {', '.join(r['ignored'][:5])}")
        env = r.get("blocks_failed_environment", [])
        if env:
            why = env[0]["reason"].splitlines()[0] if env[0]["reason"] else "?"
            print(
                f"  failed for an environmental reason (nothing stored; recomputed by the next "
                f"run): {len(env)}, e.g. {env[0]['block']} on {env[0]['host'] or '?'}: {why}"
            )
        if r["blocks_failed"]:
            print(
                "  crashed blocks (rerun with --forcerun on their paths; list them with "
                "`attnsvm status --failed-paths`): " + ", ".join(r["blocks_failed"][:5])
            )
    if verify:
        print(
            "checked: every file of every block store"
            + (
                ", and the derived outputs against their digests"
                if any("derived_unverified" in r for r in report.values())
                else ""
            )
        )
    else:
        print("checked: block store manifests (--verify checks every file, as each run does)")
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
