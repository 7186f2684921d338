"""Who holds an experiment's lock or a block's claim, and whether that process still lives.

A lock (:mod:`attnsvm.sweep.lock`) or a claim (``.<block>.running``, :mod:`attnsvm.sweep.job`)
records its process: host, pid and the process's start time in clock ticks since boot (from
``/proc/<pid>/stat``). A process counts as alive only when that pid exists on this host, is
no zombie (a killed job whose parent did not reap it, common in containers) and started at the
recorded tick (a pid reused by another process is not the owner).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

ALIVE, DEAD, ELSEWHERE = "alive", "dead", "elsewhere"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (None where unknown)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 of proc(5); state is field 3
    except (IndexError, ValueError):
        return None


def identity() -> dict[str, Any]:
    """This process as a lock or claim records it."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "ticks": start_ticks(pid),
            "started": time.time()}  # fmt: skip


def state(info: Any) -> str:
    """:data:`ALIVE`, :data:`DEAD` (also for a record that names no process: empty,
    unreadable, no pid) or :data:`ELSEWHERE` (another host: it cannot be checked from here)."""
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or info["pid"] <= 0:
        return DEAD
    if info.get("host") != socket.gethostname():
        return ELSEWHERE
    pid = info["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return DEAD
    except PermissionError:
        return ALIVE  # another user's process
    except OverflowError:
        return DEAD
    fields = _stat_fields(pid)
    if fields is None:
        return ALIVE  # no /proc: the signal test is all there is
    if fields and fields[0] in ("Z", "X"):
        return DEAD  # a zombie: killed, not reaped
    ticks = info.get("ticks")
    if isinstance(ticks, int) and start_ticks(pid) not in (None, ticks):
        return DEAD  # the pid was reused by another process
    return ALIVE
