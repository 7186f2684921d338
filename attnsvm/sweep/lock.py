"""One workflow at a time per experiment directory: a lock file under ``<results>/<experiment>``.

Snakemake locks outputs only within one working directory (``.snakemake/locks``); two
workflows started from different directories, or with different configs naming the same
``results`` and experiment, would otherwise overwrite each other's sweep and summary and fail
on each other's half-written files. The workflow takes these locks when it parses the config,
before its repair step moves or removes anything (not for a dry run, which changes nothing),
and releases them when it ends; a second workflow on the same experiment
is refused with one message naming the other run. A lock left by a killed run on this host
(its process is gone) is taken over; one from another host names the file to delete.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

from attnsvm.atomic import write_text_atomic

LOCK_NAME = ".attnsvm-workflow.lock"


class ResultsInUseError(RuntimeError):
    """Another live workflow holds an experiment directory; the message names it."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _read(path: Path) -> dict | None:
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _mine(info: dict | None) -> bool:
    return (
        bool(info) and info.get("pid") == os.getpid() and info.get("host") == socket.gethostname()
    )


def _refusal(path: Path, info: dict) -> ResultsInUseError:
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)) if started else "?"
    return ResultsInUseError(
        f"{path.parent} is in use by another attnsvm workflow (pid {info.get('pid', '?')} on "
        f"host {info.get('host', '?')}, started {when}, from {info.get('cwd', '?')}); wait for "
        f"it to finish or use another 'results' directory. If that run is gone, delete {path}"
    )


def _take(path: Path) -> bool:
    """Try to create or take over ``path``; True if this process now holds it."""
    payload = json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "cwd": os.getcwd(),
        }
    )
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        info = _read(path)
        if info is None:  # released meanwhile: try again
            return _take(path)
        if _mine(info):
            return True
        if info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
            raise _refusal(path, info) from None
        if _alive(info["pid"]):
            raise _refusal(path, info) from None
        # a killed run's lock on this host: take it over through a rename (never a file half
        # written), then check that no other run took it over at the same moment
        write_text_atomic(path, payload)
        info = _read(path)
        if not _mine(info):
            raise _refusal(path, info or {}) from None
        return True
    with os.fdopen(fd, "w") as fh:
        fh.write(payload)
    return True


def _check_free(path: Path) -> None:
    """Raise the refusal if a live workflow (or one on another host) holds ``path``."""
    info = _read(path)
    if not info or _mine(info):
        return
    if info.get("host") != socket.gethostname() or not isinstance(info.get("pid"), int):
        raise _refusal(path, info)
    if _alive(info["pid"]):
        raise _refusal(path, info)


def lock_experiments(results: str | os.PathLike, experiments: Iterable[str]) -> list[Path]:
    """Take the lock of every experiment directory under ``results`` (all or none).

    Raises :class:`ResultsInUseError` if another live workflow holds one of them; a refused
    call leaves the file system as it found it: every lock is checked before any folder is
    created, and what was created before a lost race is removed again.
    """
    names = list(experiments)
    for exp in names:  # refuse before anything is created
        _check_free(Path(results) / exp / LOCK_NAME)
    taken: list[Path] = []
    created: list[Path] = []
    try:
        for exp in names:
            d = Path(results) / exp
            missing = [p for p in (d, *d.parents) if not p.exists()]
            d.mkdir(parents=True, exist_ok=True)
            created += reversed(missing)
            path = d / LOCK_NAME
            if _take(path):
                taken.append(path)
    except BaseException:
        unlock_experiments(results, [p.parent.name for p in taken])
        for d in reversed(created):  # deepest first; only folders still empty
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    return taken


def unlock_experiments(results: str | os.PathLike, experiments: Iterable[str]) -> None:
    """Release the locks this process holds (others' locks are left alone)."""
    for exp in experiments:
        path = Path(results) / exp / LOCK_NAME
        if _mine(_read(path)):
            path.unlink(missing_ok=True)
