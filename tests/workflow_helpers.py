"""Run the Snakemake workflow of this repository in a scratch directory, on shrunk real configs.

The workflow tests do not invent configs: they start from ``.test/config/config.yaml``, which
:func:`shrink_config` derives from ``config/config.yaml`` (the snakemake-workflows catalog's
``.test/`` convention), and override only what a test is about. After editing
``config/config.yaml`` regenerate it with ``python -m tests.workflow_helpers``;
tests/test_workflow.py fails while it is out of date.
"""

from __future__ import annotations

import copy
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
REAL_CONFIG = REPO / "config" / "config.yaml"
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"

# How the .test config shrinks the real one: caps on these values, size axes cut to their two
# smallest values (claims about the sizes cut away are left out), and its own results
# directory (a test run never touches results/).
CAPS = {"seeds": 4, "iterations": 40, "checkpoint_count": 10}
SIZE_AXES = ("n", "T", "d", "m")
TEST_RESULTS = ".test/results"
HEADER = """\
# Generated from config/config.yaml by tests/workflow_helpers.py (shrink_config): the same
# experiments, figures and keys with fewer seeds, fewer iterations and checkpoints and the two
# smallest values of each size axis. Do not edit: run `python -m tests.workflow_helpers`.
# Run it with: snakemake --configfile .test/config/config.yaml
"""


def shrink_experiment(exp: dict[str, Any]) -> dict[str, Any]:
    """One experiment of the real config, shrunk (a new dict; ``exp`` is left as it is)."""
    out = copy.deepcopy(exp)
    fixed = out.get("fixed", {})
    for key in ("iterations", "checkpoint_count"):
        if key in fixed:
            fixed[key] = min(fixed[key], CAPS[key])
    grid = out.get("grid", {})
    for axis in SIZE_AXES:
        if axis in grid:
            grid[axis] = sorted(grid[axis])[:2]
    seeds = out.get("seeds")
    if isinstance(seeds, int):
        out["seeds"] = min(seeds, CAPS["seeds"])
    elif isinstance(seeds, dict):  # {from: S, count: N}: the first seeds of the range
        out["seeds"] = {**seeds, "count": min(seeds["count"], CAPS["seeds"])}
    elif seeds is not None:
        out["seeds"] = seeds[: CAPS["seeds"]]
    if "claims" in out:
        out["claims"] = [c for c in out["claims"] if _claim_fits(c, grid)]
    return out


def _claim_fits(claim: dict[str, Any], grid: dict[str, Any]) -> bool:
    """Whether a claim (and its baseline) still selects grid points once the size axes are
    cut: a claim about sizes the shrunk config no longer has (``where: {d: 10}``) is left out
    of it."""
    from attnsvm.config.claims import condition, holds

    wheres = [claim.get("where", {}), (claim.get("baseline") or {}).get("where") or {}]
    for axis, cond in (item for where in wheres for item in where.items()):
        if axis in SIZE_AXES and axis in grid:
            op, operand = condition(cond)
            if not any(holds(op, v, operand) for v in grid[axis]):
                return False
    along = claim.get("along")
    if along in SIZE_AXES and along in grid and claim.get("order"):
        return all(any(holds("==", v, o) for v in grid[along]) for o in claim["order"])
    return True


def shrink_config(config: dict[str, Any]) -> dict[str, Any]:
    """The .test config: ``config`` with every experiment shrunk and results under .test/."""
    out = {key: value for key, value in config.items() if key != "experiments"}
    out["results"] = TEST_RESULTS
    out["experiments"] = {name: shrink_experiment(e) for name, e in config["experiments"].items()}
    return out


def real_config() -> dict[str, Any]:
    """config/config.yaml, the default sweep."""
    return yaml.safe_load(REAL_CONFIG.read_text())


def render_test_config() -> str:
    """The text .test/config/config.yaml must have."""
    body = yaml.safe_dump(
        shrink_config(real_config()), sort_keys=False, width=100, default_flow_style=None
    )
    return HEADER + body


def load_test_config(*experiments: str) -> dict[str, Any]:
    """A fresh copy of the .test config, restricted to ``experiments`` when some are named."""
    config = yaml.safe_load(TEST_CONFIG.read_text())
    if experiments:
        config["experiments"] = {name: config["experiments"][name] for name in experiments}
    return config


def one_experiment(name: str, block_size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The .test config with only experiment ``name``, cut into blocks of ``block_size`` seeds
    of one grid point each (``block_seconds: 0``) so that a test can count block jobs.
    Returns the config and (a reference to) its experiment, for the test to override."""
    config = load_test_config(name)
    exp = config["experiments"][name]
    exp.update(block_size=block_size, block_seconds=0)
    return config, exp


def seed_count(exp: dict[str, Any]) -> int:
    seeds = exp.get("seeds", 1)
    if isinstance(seeds, dict):  # {from: S, count: N}
        return seeds["count"]
    return seeds if isinstance(seeds, int) else len(seeds)


def first_seed(exp: dict[str, Any]) -> int:
    """The first seed of an experiment (a ``{from: S, count: N}`` range starts at S)."""
    seeds = exp.get("seeds", 1)
    if isinstance(seeds, dict):
        return seeds["from"]
    return 0 if isinstance(seeds, int) else min(seeds)


def expected_blocks(exp: dict[str, Any]) -> int:
    """Block jobs of an experiment from :func:`one_experiment`: grid points x seed blocks."""
    points = math.prod(len(values) for values in exp.get("grid", {}).values())
    return points * math.ceil(seed_count(exp) / exp["block_size"])


def scratch_workflow(tmp: Path) -> Path:
    """Copy the Snakefile, workflow/, config/, .test/config/ and profiles/ into ``tmp`` (as a
    clone would be)."""
    shutil.copy(REPO / "Snakefile", tmp / "Snakefile")
    shutil.copytree(REPO / "workflow", tmp / "workflow")
    shutil.copytree(REPO / "config", tmp / "config")
    shutil.copytree(REPO / ".test" / "config", tmp / ".test" / "config")
    shutil.copytree(REPO / "profiles", tmp / "profiles", symlinks=True)
    return tmp


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


#: Snakemake's job headers (``rule block:`` ... ``jobid: N``), which :func:`executed_jobs`
#: counts: the profiles' quiet console (``quiet: [rules, host]``) hides them, so a test's run
#: is quiet about the host only (tests/test_quickstart.py checks the user's quiet console)
JOB_HEADERS = "--quiet=host"


def snakemake_command(*args: str) -> list[str]:
    """The snakemake command line with the default profile on 2 cores, showing job headers."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--workflow-profile",
        "workflow/profiles/default",
        "--cores",
        "2",
        JOB_HEADERS,
        *args,
    ]


def snakemake(workdir: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir`` with the default profile; returns the completed process."""
    return subprocess.run(
        snakemake_command(*args), cwd=workdir, capture_output=True, text=True, timeout=timeout
    )


def executed_jobs(proc: subprocess.CompletedProcess, rule: str) -> int:
    """How many jobs of ``rule`` a snakemake run executed (from its log)."""
    text = proc.stdout + proc.stderr
    return sum(
        1 for line in text.splitlines() if line.strip() in (f"rule {rule}:", f"localrule {rule}:")
    )


if __name__ == "__main__":
    TEST_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    TEST_CONFIG.write_text(render_test_config())
    print(f"wrote {TEST_CONFIG.relative_to(REPO)}")


def tiny_sweep(out: Path, name: str, raw: dict[str, Any]):
    """``(sweep, summary)`` of experiment ``raw`` computed in-process, its block stores
    under ``out``: the pipeline a figure reads, without Snakemake."""
    from attnsvm.plan import parse_experiment
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.summary import summarize
    from attnsvm.sweep.worker import write_block

    exp = parse_experiment(name, raw, 64)
    paths = {
        b.name: write_block(
            b.cells, out / f"{b.name}.zarr", experiment=exp.name, block=b.name, device="cpu"
        )
        for b in exp.blocks()
    }
    sweep = collect_sweep(exp, paths)
    return sweep, summarize(sweep)


def tiny_results(root: Path, *experiments: str) -> Path:
    """A results directory at ``root`` as the workflow writes it (block stores, sweep,
    summary, run info) for ``experiments`` of the .test config, computed in-process."""
    from attnsvm.plan import parse_experiment
    from attnsvm.report.text import write_run_info
    from attnsvm.sweep.collect import write_sweep
    from attnsvm.sweep.paths import Paths
    from attnsvm.sweep.summary import write_summary
    from attnsvm.sweep.worker import write_block

    config = load_test_config(*experiments)
    paths = Paths(str(root))
    for name, raw in config["experiments"].items():
        exp = parse_experiment(name, raw, config.get("block_size", 64))
        for b in exp.blocks():
            write_block(
                b.cells, paths.block(name, b.name), experiment=name, block=b.name, device="cpu"
            )
        write_sweep(exp, paths.blocks_dir(name), paths.sweep(name))
        write_summary(paths.sweep(name), paths.summary(name))
    write_run_info(config, {name: paths.sweep(name) for name in experiments}, paths.run_info())
    return root


def opened_stores(monkeypatch) -> list[str]:
    """The sweep stores and summaries decoded from now on (attnsvm.open_results decodes each
    through attnsvm.sweep.skeleton.open_store), in order."""
    from attnsvm.sweep import skeleton

    opened: list[str] = []
    open_store = skeleton.open_store
    monkeypatch.setattr(skeleton, "open_store", lambda p: opened.append(str(p)) or open_store(p))
    return opened
