"""One workflow at a time per experiment directory: a lock file under ``<results>/<experiment>``.

Snakemake locks outputs only within one working directory (``.snakemake/locks``); two
workflows started from different directories, or with different configs naming the same
``results`` and experiment, would otherwise overwrite each other's sweep and summary and fail
on each other's half-written files. The workflow takes these locks when it parses the config,
before its repair step moves or removes anything (not for a dry run, which changes nothing),
and releases them when it ends; a second workflow on the same experiment
is refused with one message naming the other run. A stale lock is taken over with a line
saying so: one left by a killed run on this host (its process is gone, or a zombie, or its pid
now another process's: :mod:`attnsvm.sweep.owner`), or one that names no process at all (empty
or unreadable: a run killed while writing it, a full disk). A lock from another host cannot be
checked from here: the refusal names the file to delete.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

from attnsvm.atomic import partial_path, write_text_atomic
from attnsvm.sweep import owner

LOCK_NAME = ".attnsvm-workflow.lock"


class ResultsInUseError(RuntimeError):
    """Another live workflow holds an experiment directory; the message names it."""


def _read(path: Path) -> dict | None:
    """The lock's record; None when there is no lock, {} when it names no process (empty,
    unreadable, garbage: a run killed while writing it, or a full disk)."""
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
    try:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
    except (TypeError, ValueError, OverflowError):
        when = "?"
    return ResultsInUseError(
        f"{path.parent} is in use by another attnsvm workflow (pid {info.get('pid', '?')} on "
        f"host {info.get('host', '?')}, started {when}, from {info.get('cwd', '?')}); wait for "
        f"it to finish or use another 'results' directory. If that run is gone, delete {path}"
    )


def _stale(path: Path, info: dict) -> str | None:
    """Why the lock ``info`` at ``path`` is stale (None: it is held by a live run, or by a run
    on another host, which cannot be checked from here)."""
    if not info:
        return "names no process (empty or unreadable)"
    if _mine(info):
        return None
    alive = owner.state(info)
    if alive == owner.DEAD:
        return f"names pid {info.get('pid')} on this host, which is no longer running"
    return None


def _payload() -> str:
    return json.dumps({**owner.identity(), "cwd": os.getcwd()})


def _create(path: Path) -> bool:
    """Create the lock with its record in one step (a hard link of a complete temporary
    file): never an empty lock, even on a full disk. False when a lock exists."""
    tmp = partial_path(path)
    try:
        tmp.write_text(_payload())
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _take(path: Path, notes: list[str]) -> bool:
    """Create or take over ``path``; True if this process now holds it."""
    if _create(path):
        return True
    info = _read(path)
    if info is None:  # released meanwhile: try again
        return _take(path, notes)
    if _mine(info):
        return True
    why = _stale(path, info)
    if why is None:
        raise _refusal(path, info) from None
    # a stale lock: taken over through a rename (never a file half written), then checked
    # that no other run took it over at the same moment
    write_text_atomic(path, _payload())
    if not _mine(_read(path)):
        raise _refusal(path, _read(path) or {}) from None
    notes.append(f"the lock {path} {why}: stale, taken over")
    return True


def _check_free(path: Path) -> None:
    """Raise the refusal if a live workflow (or one on another host) holds ``path``."""
    info = _read(path)
    if info is None or _mine(info):
        return
    if _stale(path, info) is None:
        raise _refusal(path, info)


def lock_experiments(
    results: str | os.PathLike, experiments: Iterable[str], notes: list[str] | None = None
) -> list[Path]:
    """Take the lock of every experiment directory under ``results`` (all or none).

    Raises :class:`ResultsInUseError` if another live workflow holds one of them; a refused
    call leaves the file system as it found it: every lock is checked before any folder is
    created, and what was created before a lost race is removed again. A stale lock (empty,
    unreadable, or naming a process of this host that no longer runs) is taken over, with
    one line saying so appended to ``notes``.
    """
    notes = [] if notes is None else notes
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
            if _take(path, notes):
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
