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


def _module_rank(marks: set[str]) -> int:
    """0: a module with a SLURM test (a cluster, minutes); 1: with a slow test (whole
    workflows in subprocesses); 2: the rest."""
    return 0 if "slurm" in marks else 1 if "slow" in marks else 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest modules first, otherwise in collection order. Under pytest-xdist (pyproject's
    ``-n auto --dist loadfile --no-loadscope-reorder``) a module runs whole on one worker and
    modules are handed out in this order, so a run does not end with one long module left
    running alone while the other workers idle."""
    marks: dict[str, set[str]] = {}
    for item in items:
        marks.setdefault(item.module.__name__, set()).update(m.name for m in item.iter_markers())
    order = {name: i for i, name in enumerate(marks)}
    items.sort(key=lambda it: (_module_rank(marks[it.module.__name__]), order[it.module.__name__]))
