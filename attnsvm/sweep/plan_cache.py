"""What a plan remembers between runs on the same results: the cells digest of every block
(``<experiment>/.attnsvm-digests.json``; issue 44).

Every start of the workflow checks each finished block store against the digest of the cells
its plan expects (:mod:`attnsvm.sweep.integrity`); building those cells and hashing them costs
~2 s per 10^4 blocks, at every start, every ``--dry-run`` and every resume. The digests only
change with the experiment's settings, its packs or attnsvm's code, so they are kept under a
key made of exactly those (:func:`key`), written by the workflow's start and read by every
later plan whose key matches. A missing, unreadable or foreign file only means they are
computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from attnsvm.atomic import write_text_atomic

NAME = ".attnsvm-digests.json"
FORMAT = "attnsvm-digests-1"


def key(settings: str, packs: object, code: str) -> str:
    """The key of an experiment's digests: its settings (canonical JSON), its packs and the
    code's fingerprint (:func:`attnsvm.sweep.forkserver.code_fingerprint`)."""
    text = json.dumps([settings, packs, code], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def read(exp_dir: str | os.PathLike, wanted: str) -> dict[str, str] | None:
    """The digests kept in ``exp_dir`` under the key ``wanted`` (None when there are none)."""
    try:
        body = json.loads(Path(exp_dir, NAME).read_text())
        if body.get("format") != FORMAT or body.get("key") != wanted:
            return None
        digests = body["digests"]
        return digests if isinstance(digests, dict) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write(exp_dir: str | os.PathLike, wanted: str, digests: dict[str, str]) -> None:
    """Keep ``digests`` in ``exp_dir`` under the key ``wanted`` (a folder that cannot be
    written keeps none: they only save time)."""
    path = Path(exp_dir, NAME)
    body = {"format": FORMAT, "key": wanted, "digests": digests}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(body, separators=(",", ":")))
    except OSError:
        pass
