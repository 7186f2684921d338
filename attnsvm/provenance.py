"""Provenance recorded with every block store: versions, git commit, host, device, times."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import subprocess
from collections import Counter
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

try:
    ATTNSVM_VERSION = version("attnsvm")
except PackageNotFoundError:  # running from a source tree without installation
    ATTNSVM_VERSION = "0.0.0+unknown"
"""The running attnsvm version (``attnsvm.__version__``; recorded in manifests and stores)."""

PACKAGES = (
    "attnsvm",
    "numpy",
    "scipy",
    "torch",
    "cvxpy",
    "clarabel",
    "scs",
    "osqp",
    "xarray",
    "zarr",
    "snakemake",
)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages whose code determines the numbers."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    out["python"] = platform.python_version()
    return out


def git_commit(tree: str | os.PathLike | None = None) -> str:
    """Commit (with ``-dirty`` when modified) of the attnsvm source tree, or '' if unknown.

    ``tree``: another directory of the checkout whose changes count (the benchmarks name the
    whole repository: their scripts are outside the package).
    """
    src = Path(__file__).resolve().parent if tree is None else Path(tree)
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--", str(src)],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("-dirty" if dirty else "")


def now() -> str:
    """UTC timestamp in ISO 8601."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def host() -> dict[str, str]:
    """Host name and platform."""
    return {"hostname": socket.gethostname(), "platform": platform.platform()}


def computed_by(blocks: Mapping[str, Mapping[str, Any]]) -> Counter[str]:
    """Blocks per ``"attnsvm <version>, git commit <commit>"`` that computed them.

    ``blocks``: the per-block provenance a sweep store records (its ``blocks`` attribute, as
    parsed JSON: ``versions``, ``git_commit``, ... of each block job; docs/store.md).
    """
    out: Counter[str] = Counter()
    for info in blocks.values():
        version = (info.get("versions") or {}).get("attnsvm", "unknown")
        out[f"attnsvm {version}, git commit {info.get('git_commit') or 'unknown'}"] += 1
    return out
