"""The attnsvm command line: conventional options, help from the field docs, early failures."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import attnsvm
from attnsvm.cli import EXIT_SIGINT, EXIT_SIGPIPE, build_parser, main
from attnsvm.config.fields import CHOICES, FIELDS, NAMES


def _help(*args: str) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*args, "--help"])
    assert exc.value.code == 0


def test_every_cell_field_is_documented():
    from attnsvm.config.cell import Cell

    assert tuple(f.name for f in dataclasses.fields(Cell)) == NAMES
    assert all(f.doc and f.long_name for f in FIELDS)


def test_help_is_conventional(capsys):
    _help()
    top = capsys.readouterr().out
    for command in ("run-cell", "check-config", "status", "claims", "open"):
        assert command in top
    assert "--version" in top and "``" not in top
    _help("run-cell")
    text = capsys.readouterr().out
    assert "``" not in text
    assert "--checkpoint-spacing {log,linear}" in text and "--checkpoint_spacing" not in text
    for name, allowed in CHOICES.items():
        assert "{" + ",".join(allowed) + "}" in text, name
    assert "--train, --no-train" in text
    assert "tokens per example" in text  # help from the field docs
    _help("status")
    text = capsys.readouterr().out
    assert "--failed-paths" in text and "--failed_paths" not in text


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnsvm {attnsvm.__version__}"


def test_dashed_options_and_hidden_underscore_aliases():
    args = build_parser().parse_args(
        ["run-cell", "--checkpoint-spacing", "linear", "--corr_threshold", "0.5", "--no-train"]
    )
    assert args.checkpoint_spacing == "linear" and args.corr_threshold == 0.5
    assert args.train is False


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_fails_at_once(capsys):
    assert main(["run-cell", "--device", "cuda", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err  # one message, no traceback, no loss=None
    assert lines[0].startswith("attnsvm: error: device 'cuda' requested but CUDA is not available")
    assert "device 'auto'" in lines[0]  # and what to do instead


def test_run_cell_shows_progress():
    cmd = [sys.executable, "-m", "attnsvm.cli", "run-cell", "--d", "4", "--T", "3", "--n", "3"]
    cmd += ["--iterations", "300", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cell"]["iterations"] == 300  # stdout stays clean JSON
    assert "train W (S=1)" in out.stderr and "300/300" in out.stderr
    assert "SVMs + metrics" in out.stderr and "1/1" in out.stderr
    quiet = subprocess.run(cmd + ["--no-progress"], capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0 and "300/300" not in quiet.stderr


# ------------------------------------------------------------ closed pipes and Ctrl-C
REPO = Path(__file__).resolve().parents[1]


def _commands(results: Path) -> dict[str, tuple[list[str], int]]:
    """One invocation of every command that writes to stdout, and its status when stdout is
    a closed pipe: 141 (128 + SIGPIPE, as a shell reports it), or 0 where argparse writes
    (help, version), which ignores a failed write itself."""
    return {
        "--help": (["--help"], 0),
        "--version": (["--version"], 0),
        "run-cell": (["run-cell", "--d", "3", "--iterations", "20", "--no-progress"], 141),
        "check-config": (["check-config", "config/paper.yaml"], EXIT_SIGPIPE),
        "status": (["status", "--configfile", ".test/config/config.yaml", "--json"], 141),
        "generate": (["generate", "--help"], 0),  # its work writes files, --check nothing
        "open": (["open", str(results)], EXIT_SIGPIPE),
        "claims": (["claims", "--configfile", str(results.parent / "config.yaml")], EXIT_SIGPIPE),
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    from tests.workflow_helpers import load_test_config, tiny_results, write_config

    root = tiny_results(tmp_path_factory.mktemp("open") / "results", "e3_rank")
    write_config(root.parent / "config.yaml", {**load_test_config("e3_rank"), "results": str(root)})
    return root


def test_every_command_survives_a_closed_pipe(results):
    """``attnsvm check-config config/paper.yaml | head -2``, with the reader gone before the
    first line: no traceback, nothing on stderr."""
    commands = _commands(results)
    assert set(build_parser()._subparsers._group_actions[0].choices) <= set(commands)
    for name, (args, status) in commands.items():
        read, write = os.pipe()
        os.close(read)  # the reader has gone: every write to stdout fails with EPIPE
        proc = subprocess.run(
            [sys.executable, "-m", "attnsvm.cli", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=300,
        )
        os.close(write)
        assert proc.returncode == status, (name, proc.returncode, proc.stderr)
        assert proc.stderr == "", (name, proc.stderr)


def test_the_issues_pipe_through_head():
    proc = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m attnsvm.cli check-config config/paper.yaml | head -2"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_ctrl_c_ends_a_command_without_a_traceback(tmp_path):
    """SIGINT while a cell trains: one line on stderr, exit status 130 (128 + SIGINT)."""
    err = tmp_path / "stderr"
    cmd = [sys.executable, "-m", "attnsvm.cli", "run-cell", "--d", "10", "--iterations"]
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [*cmd, "10000000", "--json"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            # as in a terminal: a test run started in the background (bash '&' without job
            # control) ignores SIGINT, and a child inherits that
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            deadline = time.monotonic() + 120
            while "train W" not in err.read_text():  # its progress bar: training has started
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
        finally:  # a failed check must not leave a 10^7-step run behind
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == EXIT_SIGINT == 130
    text = err.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.rstrip().endswith("attnsvm: interrupted") and out == b""
