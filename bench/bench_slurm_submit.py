"""Submission time of 200 block jobs on SLURM, with and without job arrays.

Runs the workflow through workflow/profiles/slurm against a local single-node slurmctld
(tests/slurm/start_cluster.sh; needs root and apt, like tests/test_slurm.py) for a sweep of
200 one-seed blocks, once as the profile ships it (``slurm-array-jobs: block``) and once
without arrays (one ``sbatch`` per block). Block jobs are submitted held (``sbatch --hold``
through ``slurm_extra``), so nothing runs and only submission is timed: from the controller's
start until all 200 tasks are in ``squeue`` (planning included), and from the first to the
last (the submission phase alone). Then the controller is interrupted (it scancels its jobs).
Prints the ratios measured in this run and writes bench/tables/slurm_submit.md.

Usage: sudo python bench/bench_slurm_submit.py [--blocks 200] [--repeats 2] [--state DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "slurm"
EXP = "e6_types"  # the .test config's E6: 4 grid points (d x param)
POINTS = 4


def workdir(tmp: Path, blocks: int, arrays: bool) -> Path:
    """A scratch clone with a sweep of ``blocks`` one-seed blocks and the SLURM profile fitted
    to one CPU and held block jobs; without ``arrays`` the profile's array setting is removed."""
    for name in ("Snakefile",):
        shutil.copy(REPO / name, tmp / name)
    for name in ("workflow", "config", ".test/config"):
        shutil.copytree(REPO / name, tmp / name)
    shutil.copytree(REPO / "profiles", tmp / "profiles", symlinks=True)
    config = yaml.safe_load((REPO / ".test/config/config.yaml").read_text())
    exp = config["experiments"][EXP]
    exp.update(seeds=blocks // POINTS, block_size=1, block_seconds=0)
    config["experiments"] = {EXP: exp}
    (tmp / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    fit_profile(tmp, arrays=arrays, held=True)
    return tmp


def fit_profile(tmp: Path, arrays: bool = True, held: bool = True) -> None:
    """Fit the scratch clone's SLURM profile to the test node: 1 CPU and 500 MB per job, the
    cpu partition, no GPU; without ``arrays`` its array setting removed; ``held`` block jobs
    are submitted held (``sbatch --hold``: queued, never started)."""
    path = tmp / "workflow/profiles/slurm/profile.yaml"
    prof = yaml.safe_load(path.read_text())
    if not arrays:
        del prof["slurm-array-jobs"]
    for rule in prof["set-threads"]:
        prof["set-threads"][rule] = 1
        prof["set-resources"][rule]["cpus_per_task"] = 1
    for res in [prof["default-resources"], *prof["set-resources"].values()]:
        if "mem_mb" in res:
            res["mem_mb"] = 500
    prof["default-resources"]["slurm_partition"] = "cpu"
    prof["set-resources"]["block"].pop("gpu", None)
    if held:
        prof["set-resources"]["block"]["slurm_extra"] = "'--hold'"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))


def queued(wd: Path) -> list[str]:
    """Ids of the jobs (array tasks expanded) that slurmctld holds for ``wd``."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-o", "%i %Z"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split()[0] for line in out.splitlines() if line.split()[1:] == [str(wd)]]


def submit(wd: Path, blocks: int, timeout: float = 600) -> tuple[float, float, int]:
    """Start the controller; seconds until all block jobs are queued, seconds from the first
    queued to the last, and how many sbatch calls (SLURM job ids) they took."""
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", "workflow/profiles/slurm"]
    cmd += ["--configfile", "c.yaml", "--slurm-no-account", "--slurm-status-command", "squeue"]
    results = yaml.safe_load((wd / "c.yaml").read_text())["results"]
    cmd += [f"{results}/{EXP}/sweep.zarr"]
    log = open(wd / "controller.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=wd, stdout=log, stderr=subprocess.STDOUT)
    first = None
    try:
        while True:
            ids = queued(wd)
            now = time.perf_counter()
            if ids and first is None:
                first = now
            if len(ids) >= blocks:
                break
            if proc.poll() is not None or now - t0 > timeout:
                raise SystemExit((wd / "controller.log").read_text()[-3000:])
            time.sleep(0.1)
        return now - t0, now - first, len({i.split("_")[0] for i in ids})
    finally:
        stop_controller(proc, wd)
        log.close()


def stop_controller(proc: subprocess.Popen, wd: Path, timeout: float = 120) -> None:
    """Interrupt a controller (it scancels its jobs and exits); scancel what is left."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
    left = queued(wd)
    if left:
        subprocess.run(["scancel", *{i.split("_")[0] for i in left}], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--state", default="/tmp/attnsvm-slurm-bench")
    args = ap.parse_args()
    if args.blocks % POINTS:
        raise SystemExit(f"--blocks must be a multiple of {POINTS} (grid points of {EXP})")
    if os.geteuid() != 0:
        raise SystemExit("needs root: tests/slurm/start_cluster.sh runs slurmctld as root")
    table = Table(
        "slurm_submit",
        "workflow",
        "SLURM: submitting block jobs with and without job arrays",
        ["submission", "blocks", "sbatch calls", "to all queued s", "submission phase s"],
        order=60,
    )
    start = subprocess.run(
        [SCRIPTS / "start_cluster.sh", args.state], capture_output=True, text=True
    )
    if start.returncode != 0:
        raise SystemExit(start.stderr[-3000:])
    os.environ["SLURM_CONF"] = str(Path(args.state) / "slurm.conf")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    try:
        runs: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
        for _ in range(args.repeats):  # alternating, so that neither mode gets a warm start
            for arrays in (False, True):
                with tempfile.TemporaryDirectory() as tmp:
                    wd = workdir(Path(tmp), args.blocks, arrays)
                    runs[arrays].append(submit(wd, args.blocks))
                total, phase, calls = runs[arrays][-1]
                name = "job arrays (profile)" if arrays else "one sbatch per block"
                table.add(name, str(args.blocks), str(calls), f"{total:.1f}", f"{phase:.2f}")
        results = {arrays: min(r) for arrays, r in runs.items()}  # the fastest of each
    finally:
        subprocess.run([SCRIPTS / "stop_cluster.sh", args.state], capture_output=True)
    (plain_total, plain_phase, plain_calls), (arr_total, _, arr_calls) = (
        results[False],
        results[True],
    )
    ratio_total = plain_total / arr_total
    print(f"to all queued: {ratio_total:.2f}x faster with arrays")
    print(f"sbatch calls: {plain_calls} without arrays, {arr_calls} with")
    table.note(
        f"{args.blocks} one-seed blocks of the .test config's {EXP} through "
        "workflow/profiles/slurm (fitted to 1 CPU, 500 MB, block jobs held with `sbatch "
        "--hold` so that only submission is timed) against a local single-node slurmctld "
        "(tests/slurm/start_cluster.sh, SLURM from apt, no accounting). 'to all queued': "
        "from the controller's start (planning included) until every block is in `squeue "
        "-r`; 'submission phase': from the first block in the queue to the last (polled "
        f"every 0.1 s; an array's tasks appear together). Each mode ran {args.repeats} times, "
        "alternating; the ratios compare the fastest run of each. Measured in this run: "
        f"arrays {ratio_total:.2f}x faster to all queued, {plain_calls} sbatch calls taking "
        f"{plain_phase:.2f} s without arrays against {arr_calls} with them. An idle local "
        "slurmctld answers an sbatch in milliseconds, so here planning dominates; on a "
        "busy production controller each call and each queue entry costs more, and the "
        "queue holds one entry per array instead of one per block."
    )
    table.write()


if __name__ == "__main__":
    main()
