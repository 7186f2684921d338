"""Accuracy of ``attnsvm status``'s remaining-time estimate on a real sweep, and its speed.

Runs a sweep from scratch in a temporary copy of the workflow (plain ``snakemake``, default
profile, ``--cores``), polls :func:`attnsvm.status.sweep_status` about once a second, and
records the overall estimate when 25%, 50% and 75% of the blocks are done. When the sweep
has finished, the actual remaining wall time at each of those moments is known; the
relative error ``(estimate - actual) / actual`` is printed and written to a CSV with the
machine and the command. The issue's target: within 30% from a quarter of the blocks on.

Usage (the default sweep; --paper for config/paper.yaml; --config for any other):
    python bench/bench_status.py [--cores 2] [--paper | --config FILE] [--csv bench/status.csv]
    python bench/bench_status.py --scale 100000    # status time for 10^5 synthetic blocks
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

REPO = Path(__file__).resolve().parents[1]

MARKS = (0.25, 0.50, 0.75)
FIELDS = (
    "config",
    "cores",
    "mark",
    "blocks_done",
    "blocks_planned",
    "elapsed_s",
    "estimated_remaining_s",
    "actual_remaining_s",
    "relative_error",
    "total_wall_s",
    "machine",
    "command",
)


def scratch(tmp: Path) -> Path:
    """A fresh clone's workflow files (Snakefile, workflow/, config/, profiles/) in ``tmp``."""
    shutil.copy(REPO / "Snakefile", tmp / "Snakefile")
    for name in ("workflow", "config"):
        shutil.copytree(REPO / name, tmp / name)
    shutil.copytree(REPO / "profiles", tmp / "profiles", symlinks=True)
    return tmp


def machine() -> str:
    return f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def run_sweep(configfile: str, cores: int, poll: float) -> list[dict]:
    """Run the sweep of ``configfile`` from scratch; the estimate at each mark and the truth."""
    from attnsvm.status import sweep_status

    with tempfile.TemporaryDirectory() as tmp:
        wd = scratch(Path(tmp))
        config_in_wd = wd / "run_config.yaml"
        shutil.copy(REPO / configfile, config_in_wd)
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores)]
        cmd += ["--configfile", config_in_wd.name]
        log = open(wd / "snakemake.log", "w")  # noqa: SIM115 - closed below
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=wd, stdout=log, stderr=subprocess.STDOUT)
        seen: list[dict] = []
        pending = list(MARKS)
        cwd = os.getcwd()
        try:
            os.chdir(wd)
            while proc.poll() is None:
                time.sleep(poll)
                _, _, overall = sweep_status(None, config_in_wd.name)
                if overall is None or not pending:
                    continue
                frac = overall["blocks_done"] / max(1, overall["blocks_planned"])
                while pending and frac >= pending[0]:
                    seen.append(
                        {
                            "mark": pending.pop(0),
                            "blocks_done": overall["blocks_done"],
                            "blocks_planned": overall["blocks_planned"],
                            "elapsed_s": time.time() - t0,
                            "estimated_remaining_s": overall["estimated_remaining_seconds"],
                        }
                    )
                    print(f"  {json.dumps(seen[-1])}", flush=True)
        finally:
            os.chdir(cwd)
            log.close()
        total = time.time() - t0
        if proc.returncode != 0:
            raise SystemExit((wd / "snakemake.log").read_text()[-3000:])
    for row in seen:
        row["actual_remaining_s"] = total - row["elapsed_s"]
        actual = row["actual_remaining_s"]
        row["relative_error"] = (row["estimated_remaining_s"] - actual) / actual if actual else 0
        row["total_wall_s"] = total
    return seen


REAL_STORE_FILES = 147
"""Files of a block store of the default sweep (its manifest lists each one)."""


def _fake_block(p: Path, exp: str, name: str, cells: list, started: float) -> None:
    """A finished one-file block store as the quick status check reads it: ``zarr.json`` and
    a manifest the size of a real store's (:data:`REAL_STORE_FILES` entries); the content
    members themselves are not written (the quick check does not read them)."""
    from attnsvm.config.cell import cells_digest
    from attnsvm.sweep import onefile
    from attnsvm.sweep.integrity import onefile_manifest

    attrs = {
        "job_started": started,
        "seconds_compute": 0.5,
        "status_counts": json.dumps({"ok": len(cells)}),
        "cells": json.dumps([c.to_dict() for c in cells]),
    }
    meta = json.dumps({"attributes": attrs, "node_type": "group"}).encode()
    m = onefile_manifest({"zarr.json": meta}, {"experiment": exp, "block": name,
                                               "cells_digest": cells_digest(cells)})  # fmt: skip
    for i in range(REAL_STORE_FILES - 1):
        m["files"][f"var{i // 3}/c/{i % 3}/0"] = [4096, f"{i:064x}"]
    p.write_bytes(onefile.zip_bytes({"zarr.json": meta}, onefile.sealed(m)))
    os.utime(p, (started + 2, started + 2))


def scale(blocks: int) -> tuple[float, float]:
    """Seconds of ``attnsvm status`` for ``blocks`` planned blocks, 3/4 of them finished:
    the first call (nothing cached) and the next (the plan and the checks cached)."""
    import yaml

    from attnsvm.config.files import load_config_file
    from attnsvm.plan import Plan

    side = int(blocks**0.5)
    cfg = {
        "results": "res",
        "max_blocks": blocks,
        "experiments": {
            "big": {
                "fixed": {"train": False, "d": 4},
                "grid": {"n": list(range(1, side + 1)), "T": list(range(2, side + 2))},
            }
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        wd = Path(tmp)
        (wd / "c.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        plan = Plan.from_config(load_config_file(wd / "c.yaml"))
        bd = wd / "res" / "big" / "blocks"
        bd.mkdir(parents=True)
        now = time.time()
        planned = plan.blocks("big")
        for i, (name, b) in enumerate(planned.items()):
            if i >= 3 * len(planned) // 4:
                break
            _fake_block(bd / f"{name}.zarr.zip", "big", name, b.cells, now - 3600 + i)
        cmd = [sys.executable, "-m", "attnsvm.cli", "status", "--configfile", "c.yaml"]
        seconds = []
        for _ in range(2):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, check=True)
            seconds.append(time.perf_counter() - t0)
            print(out.stdout.splitlines()[-1])
    return seconds[0], seconds[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--paper", action="store_true", help="run config/paper.yaml")
    ap.add_argument("--config", default=None, help="another config file (repository-relative)")
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between status polls")
    ap.add_argument("--csv", default=str(REPO / "bench" / "status_estimate.csv"))
    ap.add_argument("--scale", type=int, default=0, help="time status for this many blocks")
    args = ap.parse_args()
    if args.scale:
        table = Table(
            "status_speed",
            "status",
            f"`attnsvm status` on {args.scale} blocks",
            ["call", "seconds"],
            order=30,
        )
        cold, warm = scale(args.scale)
        table.add(f"first (plans the config, reads {3 * args.scale // 4} manifests)", f"{cold:.2f}")
        table.add("next (the plan and the checks from the cache)", f"{warm:.2f}")
        table.note(
            f"{args.scale} planned blocks, 3/4 of them finished; each finished store is one file "
            f"holding a `zarr.json` and a manifest listing {REAL_STORE_FILES} files, the size "
            "of a real block store's. Target: under 2 s (issue 44: at 10^5)."
        )
        table.write()
        return
    configfile = "config/paper.yaml" if args.paper else (args.config or "config/config.yaml")
    command = "python " + " ".join(["bench/bench_status.py", *sys.argv[1:]])
    print(f"{configfile} on {args.cores} cores ({machine()})", flush=True)
    kind = {"config/config.yaml": "default", "config/paper.yaml": "paper"}
    name = kind.get(configfile, Path(configfile).stem)
    table = Table(
        f"status_estimate_{name}",
        "status",
        f"Time-left estimate, {configfile}",
        ["sweep", "blocks", "mark", "estimate", "actual remaining", "error"],
        order=10 if name == "default" else 20,
    )
    rows = run_sweep(configfile, args.cores, args.poll)
    new = not Path(args.csv).exists()
    with open(args.csv, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for row in rows:
            w.writerow({"config": configfile, "cores": args.cores, "machine": machine(),
                        "command": command, **row})  # fmt: skip
    print(f"{'done':>6} {'elapsed':>8} {'estimate':>9} {'actual':>8} {'error':>7}")
    for r in rows:
        print(
            f"{r['mark']:>6.0%} {r['elapsed_s']:>7.0f}s {r['estimated_remaining_s']:>8.0f}s "
            f"{r['actual_remaining_s']:>7.0f}s {r['relative_error']:>+7.0%}"
        )
    if not rows:
        sys.exit("the sweep ended before a quarter of its blocks was seen done: poll more often")
    print(f"sweep wall time {rows[0]['total_wall_s']:.0f} s; rows appended to {args.csv}")
    for i, r in enumerate(rows):
        first = i == 0
        table.add(
            f"{configfile}, {r['total_wall_s']:.0f} s" if first else "",
            r["blocks_planned"] if first else "",
            f"{r['mark']:.0%}",
            f"{r['estimated_remaining_s']:.0f} s",
            f"{r['actual_remaining_s']:.0f} s",
            f"{r['relative_error']:+.0%}",
        )
    csv_path = Path(args.csv).resolve()
    shown = csv_path.relative_to(REPO) if csv_path.is_relative_to(REPO) else csv_path
    table.note(
        f"The sweep runs from scratch (plain `snakemake`, `--cores {args.cores}`) while "
        f"`attnsvm.status.sweep_status` is polled every {args.poll:g} s; the estimate at each "
        "mark is compared with the remaining wall time known at the end (also appended to "
        f"`{shown.as_posix()}`). Target (issue 11): within 30% from a quarter of the blocks on."
    )
    table.write()


if __name__ == "__main__":
    main()
