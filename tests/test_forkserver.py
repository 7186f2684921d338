"""The fork server of the workflow's jobs (attnsvm.sweep.forkserver): a server without work
exits after IDLE_SECONDS, so that no server outlives the runs it served."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from attnsvm.sweep import forkserver

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="abstract Unix sockets: Linux")

SERVE = "import attnsvm.sweep.forkserver as f; f.IDLE_SECONDS = {idle}; f.serve({key!r})"


def test_a_server_without_work_exits_after_its_idle_time():
    key = f"test-idle-{os.getpid()}-{time.time_ns()}"
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", SERVE.format(idle=0.5, key=key)])
    try:
        assert proc.wait(timeout=60) == 0  # a wait that timed out is no work
    finally:
        proc.kill()
    assert time.monotonic() - start < 30


def test_a_server_exits_after_its_idle_time_once_a_call_is_done(monkeypatch, capfd):
    """A call through the server (its exit status back to the job), then the server exits."""
    key = f"test-call-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen([sys.executable, "-c", SERVE.format(idle=3.0, key=key)])
    try:
        monkeypatch.setattr(forkserver, "server_key", lambda environ=None: key)
        monkeypatch.setattr(forkserver, "enabled", lambda environ=None: True)

        def no_fallback(*args, **kwargs):
            raise AssertionError("the call ran outside the server")

        monkeypatch.setattr(forkserver.subprocess, "call", no_fallback)
        deadline = time.monotonic() + 60
        while forkserver._connect(forkserver.address(key)) is None:  # the server is up
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert forkserver.run("attnsvm.config.cost:format_cpu_time", 245.0) == 0
        assert forkserver.run("attnsvm.config.cost:format_cpu_time", "x") == 1  # it raised
        assert proc.poll() is None  # the server served both calls
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
