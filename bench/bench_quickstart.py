"""The README's first Quickstart line from a fresh clone: wall time and jobs.

Usage: python bench/bench_quickstart.py [--keep]

Clones this repository's HEAD into a temporary directory, makes a virtual environment there
that sees this machine's installed packages (``--system-site-packages``: torch and the other
dependencies are not downloaded again, attnsvm itself is installed into the environment from
the clone) and runs the first shell line of the README's Quickstart (read from the README, as
``.ci/run`` reads the second) in the clone with that environment first on PATH, timed as
``time`` would. Writes bench/tables/quickstart.md: seconds, the sweep's jobs, and when its
first and last job finished.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tables import Table  # bench/tables.py: BENCHMARKS.md's tables

REPO = Path(__file__).resolve().parents[1]


def quickstart_line(readme: Path, which: int = 1) -> str:
    """Shell line ``which`` (1 or 2) of the first code block under ``## Quickstart``."""
    text = readme.read_text()
    block = text[text.index("## Quickstart") :].split("```")[1]
    lines = [ln for ln in block.splitlines()[1:] if ln.strip()]
    return lines[which - 1]


def job_times(log: str, since: float) -> list[float]:
    """Seconds after ``since`` (Unix time) at which each job of a Snakemake log finished
    (its stamp before ``Finished jobid``: the profiles' quiet console prints no job header)."""
    return [
        time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")) - since
        for m in re.finditer(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]\n\s*Finished jobid", log)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = ap.parse_args()
    table = Table(
        "quickstart",
        "workflow",
        "The Quickstart from a fresh clone",
        ["seconds", "jobs", "first job done", "last job done"],
        order=10,
    )
    line = quickstart_line(REPO / "README.md")
    tmp = Path(tempfile.mkdtemp(prefix="attnsvm-quickstart-"))
    try:
        fresh = tmp / "fresh"
        subprocess.run(["git", "clone", "-q", str(REPO), str(fresh)], check=True)
        venv = tmp / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True
        )
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(venv))
        print(f"+ {line}  (in {fresh})", flush=True)
        t0, started = time.perf_counter(), time.time()
        proc = subprocess.run(
            ["bash", "-c", line], cwd=fresh, env=env, capture_output=True, text=True
        )
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"the Quickstart line failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        done = re.findall(r"(\d+) of (\d+) steps \(100%\) done", proc.stderr + proc.stdout)
        jobs = int(done[-1][1]) if done else "?"
        done_at = job_times(proc.stderr, started)
        report = fresh / "results" / "report.html"
        if not report.is_file():
            sys.exit(f"the Quickstart line made no {report}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    first, last = (f"{done_at[0]:.0f} s", f"{done_at[-1]:.0f} s") if done_at else ("?", "?")
    table.add(f"{seconds:.0f}", jobs, first, last)
    table.note(
        f"`{line}` in a fresh clone of this commit with a virtual environment that sees the "
        "installed packages (`python -m venv --system-site-packages`; attnsvm is installed from "
        "the clone), config/config.yaml with the default profile; wall time of the whole line, "
        "and when the sweep's first and last jobs finished after the line started (Snakemake's "
        "stamps, 1 s resolution)."
    )
    table.write()


if __name__ == "__main__":
    main()
