"""Records of failed block jobs: ``<experiment>/failures/<block>.json`` (docs/resume.md,
"Failed blocks").

A block job whose worker failed (:mod:`attnsvm.sweep.job`) writes one record: the failure's
kind (:data:`attnsvm.codes.FAILURE_KINDS`), its reason, host and time. An *environmental*
failure stores no block (the next run recomputes it); a *reproducible* one stores the block
with every cell failed. The records are how ``attnsvm status`` and the end of a workflow run
know about failures without reading any store: a run ends non-zero while one is current
(:func:`current_failures`). A job that finishes its block removes the block's record.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attnsvm.atomic import write_text_atomic
from attnsvm.sweep import onefile, owner

log = logging.getLogger(__name__)

FOLDER = "failures"
"""Folder (next to ``blocks/``) of the records."""


def failure_path(store: str | os.PathLike) -> Path:
    """The record of the block whose store is ``store`` (``<experiment>/blocks/<block>...``)."""
    store = Path(store)
    return store.parent.parent / FOLDER / f"{onefile.block_of(store)}.json"


def record_failure(store: Path, experiment: str, block: str, kind: str, reason: str,
                   code: int) -> None:  # fmt: skip
    """Write the record of a failed job of the block whose store is ``store``."""
    record = {"experiment": experiment, "block": block, "kind": kind, "reason": reason,
              "exit": code, **owner.identity()}  # fmt: skip
    try:
        path = failure_path(store)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(record, indent=1))
    except OSError as err:  # e.g. the full disk that failed the block: the job's log says it
        log.error("could not record the failure of block %s: %s", block, err)


def clear_failure(store: str | os.PathLike) -> None:
    """The block of ``store`` is finished: its record (if any) goes."""
    failure_path(store).unlink(missing_ok=True)


def read_failure(path: Path) -> dict[str, Any] | None:
    """A record (None when it is missing or unreadable)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def current_failures(
    blocks_dir: str | os.PathLike, planned: Iterable[str] | None = None
) -> list[dict]:
    """The records of the ``planned`` blocks of ``blocks_dir`` whose failure still stands: an
    environmental one whose block has no store yet, a reproducible one whose failed store is
    still there (one listing of the records' folder, one ``stat`` per record); every block's
    when ``planned`` is None."""
    blocks = Path(blocks_dir)
    folder = blocks.parent / FOLDER
    try:
        names = [e.name for e in os.scandir(folder) if e.name.endswith(".json")]
    except OSError:
        return []
    wanted = None if planned is None else set(planned)
    out = []
    for name in sorted(names):
        block = name.removesuffix(".json")
        if wanted is not None and block not in wanted:
            continue
        record = read_failure(folder / name)
        if record is None:
            continue
        stored = (blocks / f"{block}{onefile.SUFFIX}").exists()
        if stored == (record.get("kind") == "reproducible"):
            out.append({**record, "block": block, "record": str(folder / name)})
    return out
