"""Provenance recorded with every block store: versions, git commit, host, device, times."""

from __future__ import annotations

import datetime as _dt
import platform
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

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


def git_commit() -> str:
    """Commit (with ``-dirty`` when modified) of the attnsvm source tree, or '' if unknown."""
    src = Path(__file__).resolve().parent
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
