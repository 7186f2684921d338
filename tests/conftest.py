"""Shared pytest fixtures and markers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One torch thread per test process: deterministic timings, no oversubscription on 2 cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
