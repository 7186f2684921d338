"""Hostile files end in one line, fast (issue 31): a ``results`` path the workflow cannot write
into, a config that is no regular file or is nested too deep, a figure whose task the
experiment's cells do not have. Each is refused by ``attnsvm check-config`` and, where the
workflow's own code reads it, by ``snakemake -n``: exit non-zero, one line, no traceback,
nothing written (the time each took is printed, not asserted: speed is for bench/; a
subprocess timeout catches a reader that blocks, such as a FIFO opened before it is checked).
(Snakemake itself reads ``--configfile`` before any
workflow code runs; config/README.md says so and makes ``check-config`` the first step)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from workflow_helpers import scratch_workflow, snakemake

from attnsvm.config.files import MAX_DEPTH

SMALL = {"n": 3, "T": 3, "d": 3, "iterations": 10}


def config(results: str = "results", **exp) -> dict:
    return {"results": results, "experiments": {"x": {"fixed": dict(SMALL), **exp}}}


def _file(wd: Path) -> str:
    (wd / "taken").write_text("a file\n")
    return "taken"


def _dangling(wd: Path) -> str:
    (wd / "gone").symlink_to(wd / "nowhere")
    return "gone"


def _loop(wd: Path) -> str:
    (wd / "loop_a").symlink_to(wd / "loop_b")
    (wd / "loop_b").symlink_to(wd / "loop_a")
    return "loop_a"


def _below_a_file(wd: Path) -> str:
    (wd / "plain").write_text("")
    return "plain/results"


def _unwritable(wd: Path) -> str:
    (wd / "ro").mkdir()
    (wd / "ro").chmod(0o555)
    return "ro/results"


#: row -> (makes the hostile results path in the work dir, a fragment of the one line)
RESULTS_ROWS = {
    "results_is_a_file": (_file, "is a file, not a directory"),
    "results_dangling_symlink": (_dangling, "is a dangling symlink"),
    "results_symlink_loop": (_loop, "cannot be used: Too many levels of symbolic links"),
    "results_below_a_file": (_below_a_file, "cannot be used: Not a directory"),
    "results_unwritable": (_unwritable, "is not writable"),
}


def _snapshot(wd: Path) -> set[str]:
    return {str(p.relative_to(wd)) for p in wd.rglob("*") if ".snakemake" not in p.parts}


def _check_config(wd: Path, path: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "check-config", path],
        cwd=wd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc, time.perf_counter() - t0


def _assert_one_line(proc: subprocess.CompletedProcess, seconds: float, fragment: str) -> None:
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-2000:]
    assert fragment in log, log[-2000:]
    assert "Traceback" not in log, log[-2000:]
    print(f"{proc.args[2:4]}: refused in {seconds:.1f} s")


@pytest.mark.parametrize("row", RESULTS_ROWS)
def test_hostile_results_path_refused_by_check_config_and_snakemake(row, tmp_path):
    if row == "results_unwritable" and os.geteuid() == 0:
        pytest.skip("root writes into any directory")
    make, fragment = RESULTS_ROWS[row]
    wd = scratch_workflow(tmp_path)
    results = make(wd)
    (wd / "c.yaml").write_text(yaml.safe_dump(config(results, seeds=1)))
    before = _snapshot(wd)
    proc, seconds = _check_config(wd, "c.yaml")
    _assert_one_line(proc, seconds, fragment)
    t0 = time.perf_counter()
    proc = snakemake(wd, "-n", "--configfile", "c.yaml", timeout=120)
    _assert_one_line(proc, time.perf_counter() - t0, "attnsvm: config error: ")
    assert fragment in proc.stderr
    assert _snapshot(wd) == before


def _fifo(wd: Path) -> str:
    os.mkfifo(wd / "fifo.yaml")
    return "fifo.yaml"


def _directory(wd: Path) -> str:
    (wd / "dir.yaml").mkdir()
    return "dir.yaml"


def _deep(wd: Path) -> str:
    nested: list = []
    for _ in range(MAX_DEPTH):
        nested = [nested]
    (wd / "deep.yaml").write_text(yaml.safe_dump(config(seeds=1, description=nested)))
    return "deep.yaml"


def _very_deep(wd: Path) -> str:
    (wd / "deep.yaml").write_text("experiments: " + "[" * 5000 + "]" * 5000 + "\n")
    return "deep.yaml"


#: row -> (makes the hostile config file, a fragment of the one line, whether the workflow's
#: code reads it before Snakemake does: then `snakemake -n` must refuse it in one line too)
CONFIG_ROWS = {
    "config_fifo": (_fifo, "a FIFO (named pipe), not a regular file", False),
    "config_dev_zero": (lambda wd: "/dev/zero", "a character device, not a regular file", False),
    "config_directory": (_directory, "a directory, not a regular file", False),
    "config_nested_too_deep": (_deep, f"values nested more than {MAX_DEPTH} deep", True),
    "config_nested_5000_deep": (_very_deep, f"values nested more than {MAX_DEPTH} deep", False),
}


@pytest.mark.parametrize("row", CONFIG_ROWS)
def test_hostile_config_file_refused(row, tmp_path):
    make, fragment, by_snakemake = CONFIG_ROWS[row]
    wd = scratch_workflow(tmp_path)
    path = make(wd)
    before = _snapshot(wd)
    proc, seconds = _check_config(wd, path)
    _assert_one_line(proc, seconds, fragment)
    if by_snakemake:
        t0 = time.perf_counter()
        proc = snakemake(wd, "-n", "--configfile", path, timeout=120)
        _assert_one_line(proc, time.perf_counter() - t0, "attnsvm: config error: ")
        assert fragment in proc.stderr
    assert _snapshot(wd) == before


@pytest.mark.parametrize(
    ("figure", "exp", "tasks"),
    [
        ("ntp", {"seeds": 1}, "ntp, but the experiment has cells of task train"),
        (
            "e1",
            {"seeds": 1, "grid": {"task": ["train", "regpath"]}},
            "train, but the experiment has cells of task regpath",
        ),
    ],
)
def test_figure_of_another_task_refused_at_config_time(figure, exp, tasks, tmp_path):
    wd = scratch_workflow(tmp_path)
    (wd / "c.yaml").write_text(yaml.safe_dump(config(figures=[figure], **exp)))
    fragment = f"experiment 'x': figure '{figure}' draws cells of task {tasks}"
    proc, seconds = _check_config(wd, "c.yaml")
    _assert_one_line(proc, seconds, fragment)
    t0 = time.perf_counter()
    proc = snakemake(wd, "-n", "--configfile", "c.yaml", timeout=120)
    _assert_one_line(proc, time.perf_counter() - t0, "attnsvm: config error: " + fragment)
    assert not (wd / "results").exists()


def test_every_figure_declares_the_tasks_it_draws():
    from attnsvm.config.fields import BY_NAME
    from attnsvm.report.figures import FIGURES, figure_tasks

    for name in FIGURES:
        tasks = figure_tasks(name)
        assert tasks and set(tasks) <= set(BY_NAME["task"].choices), name


def test_unwritable_results_refused_in_process(tmp_path, monkeypatch):
    """The unwritable row where the tests run as root (who may write anywhere)."""
    from attnsvm.config import files
    from attnsvm.config.errors import ConfigError

    monkeypatch.setattr(files.os, "access", lambda path, mode: False)
    with pytest.raises(ConfigError, match=f"{tmp_path} is not writable"):
        files.check_results_dir(tmp_path / "results")
    assert not (tmp_path / "results").exists()


# -------------------------------------------- a bad ATTNSVM_* variable, a stale lock
@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("ATTNSVM_FUSED", "yes", "ATTNSVM_FUSED='yes': leave it unset"),
        ("ATTNSVM_FUSED_LEVEL", "x86-64-v9", "ATTNSVM_FUSED_LEVEL='x86-64-v9': one of the builds"),
        ("ATTNSVM_FUSD", "0", "ATTNSVM_FUSD='0': no such variable"),
        ("ATTNSVM_FAULT_INJECT", "kil:x", "ATTNSVM_FAULT_INJECT='kil:x'"),
    ],
)
def test_a_bad_attnsvm_variable_is_refused_before_any_block(tmp_path, name, value, fragment):
    """A typo in an ATTNSVM_* variable's value or name: one line naming it, from check-config
    and from the workflow before any job (a typo must not fail every trained cell)."""
    wd = scratch_workflow(tmp_path)
    (wd / "c.yaml").write_text(yaml.safe_dump(config()))
    env = {**os.environ, name: value}
    checked = subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "check-config", "c.yaml"],
        cwd=wd, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    _assert_one_line(checked, 0.0, fragment)
    run = subprocess.run(
        [sys.executable, "-m", "snakemake", "--configfile", "c.yaml", "--cores", "1"],
        cwd=wd, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    _assert_one_line(run, 0.0, f"attnsvm: environment error: {fragment}")
    assert not (wd / "results").exists()


@pytest.mark.parametrize("content", ["", "{not json", '{"pid": "x"}', "dead"])
def test_a_stale_lock_is_taken_over_with_a_line(tmp_path, content):
    """A lock left empty by a full disk, unreadable, or naming a process of this host that is
    gone (or a zombie) is stale: taken over, with a line saying so."""
    import json
    import socket

    from attnsvm.sweep.lock import LOCK_NAME, lock_experiments, unlock_experiments

    lock = tmp_path / "x" / LOCK_NAME
    lock.parent.mkdir()
    zombie = None
    if content == "dead":
        zombie = subprocess.Popen([sys.executable, "-c", "pass"])
        time.sleep(1)  # exited, not reaped: a zombie, as a killed job in a container
        content = json.dumps({"pid": zombie.pid, "host": socket.gethostname()})
    lock.write_text(content)
    notes: list[str] = []
    assert lock_experiments(tmp_path, ["x"], notes) == [lock]
    assert len(notes) == 1 and f"the lock {lock}" in notes[0] and "taken over" in notes[0]
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    unlock_experiments(tmp_path, ["x"])
    assert not lock.exists()
    if zombie is not None:
        zombie.wait()


def test_a_full_disk_leaves_no_empty_lock(tmp_path, monkeypatch):
    """The lock is created whole (a complete temporary file linked into place) or not at all."""
    import errno
    from pathlib import Path as P

    from attnsvm.sweep.lock import LOCK_NAME, lock_experiments

    real = P.write_text

    def full(self, *args, **kwargs):
        real(self, "")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(P, "write_text", full)
    with pytest.raises(OSError, match="No space left"):
        lock_experiments(tmp_path, ["x"])
    assert not (tmp_path / "x" / LOCK_NAME).exists()


def test_the_report_names_config_files_relative_to_the_workflow(tmp_path, monkeypatch):
    """Snakemake hands the config files over absolute; the report's run_info params name them
    relative to the working directory, so a moved or cloned run reruns nothing, and a file
    outside it keeps its path."""
    from attnsvm.config.files import config_file_names

    (tmp_path / "config").mkdir()
    monkeypatch.chdir(tmp_path)
    outside = tmp_path.parent / "elsewhere.yaml"
    names = config_file_names([tmp_path / "config" / "a.yaml", "b.yaml", outside])
    assert names == ["config/a.yaml", "b.yaml", str(outside)]
