"""The attnsvm command line: conventional options, help from the field docs, early failures."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

import attnsvm
from attnsvm.cli import build_parser, main
from attnsvm.config.cell import CHOICES, FIELD_DOCS, Cell


def _help(*args: str) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*args, "--help"])
    assert exc.value.code == 0


def test_every_cell_field_is_documented():
    assert set(FIELD_DOCS) == {f.name for f in dataclasses.fields(Cell)}


def test_help_is_conventional(capsys):
    _help()
    top = capsys.readouterr().out
    for command in ("run-cell", "check-config", "status"):
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
