"""What ``attnsvm status`` remembers between calls, so that polling a large sweep is cheap.

Planning a config of 10^4 blocks (validation, cells, digests, predicted costs) takes seconds,
and so does reading 10^4 manifests. Neither changes while a sweep runs: the plan changes with
the config file or the code, a finished block store with its files. Both are kept in
``<results>/.attnsvm-status-cache.json``:

- the plan's view that status needs (:class:`StatusPlan`), under a key made of the config
  file's bytes, the packs the workflow recorded (:mod:`attnsvm.sweep.packs`), the attnsvm
  version and the size and modification time of every module of the package (an edited
  checkout plans again);
- per finished block store, the outcome of the quick check and its ``zarr.json`` facts, under
  the inode, size, modification and status-change times of its manifest and ``zarr.json``
  (:func:`store_key`; rewriting either file, or replacing the store, changes the key).

The cache only saves work: a missing, unreadable or foreign cache is rebuilt, nothing is
read from it that its key does not vouch for, and a results directory that cannot be
written simply gets no cache. Contents of stores are never trusted from it: ``attnsvm
status --verify`` checks every file and bypasses it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnsvm.atomic import write_text_atomic
from attnsvm.codes import CELL_STATUS
from attnsvm.config.files import load_config_file
from attnsvm.provenance import ATTNSVM_VERSION
from attnsvm.sweep.integrity import MANIFEST
from attnsvm.sweep.onefile import SUFFIX as ONEFILE
from attnsvm.sweep.packs import NAME as PACKS

CACHE_NAME = ".attnsvm-status-cache.json"
CACHE_FORMAT = "attnsvm-status-cache/6"
TORCH_LOOP = "torch loop"
"""The count of a store's cells that trained in the torch loop, outside the fused loop
(its ``cells_torch_loop`` attribute, :mod:`attnsvm.gd.fused`), kept beside the statuses."""
COUNTED = (*CELL_STATUS, TORCH_LOOP)
"""The counts a store's cache entry keeps, in this order."""


@dataclass
class StatusPlan:
    """What ``attnsvm status`` needs from a plan (:class:`attnsvm.plan.Plan`).

    ``blocks``: ``{experiment: {"names": [...], "cells": [...], "digests": [...],
    "seconds": [...]}}`` in config order, one column per fact of its blocks (10^5 blocks
    parse in a fraction of a second): their names, cells, the first 16 hex digits of their
    cells digests (:func:`short`) and predicted job seconds; ``result_jobs``: ``{experiment:
    [[log, output], ...]}`` of its collect and derive jobs
    (:meth:`attnsvm.sweep.paths.Paths.result_jobs`).
    """

    results: str
    blocks: dict[str, dict[str, list]]  # columns
    result_jobs: dict[str, list[list[str]]]

    @classmethod
    def from_plan(cls, plan) -> StatusPlan:
        """The status view of a validated :class:`~attnsvm.plan.Plan`."""
        blocks = {}
        for exp in plan.experiments:
            digests, seconds = plan.block_digests(exp), plan.block_seconds(exp)
            names = list(plan.blocks(exp))
            blocks[exp] = {
                "names": names,
                "cells": [len(plan.blocks(exp)[n].cells) for n in names],
                "digests": [short(digests[n]) for n in names],
                "seconds": [seconds[n] for n in names],
            }
        jobs = {exp: [list(j) for j in plan.paths.result_jobs(exp)] for exp in plan.experiments}
        return cls(str(plan.results), blocks, jobs)

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values (``dataclasses.asdict`` deep-copies: 10x slower)."""
        return {"results": self.results, "blocks": self.blocks, "result_jobs": self.result_jobs}

    @property
    def experiments(self) -> list[str]:
        return list(self.blocks)

    def _column(self, exp: str, fact: str) -> dict[str, Any]:
        columns = self.blocks[exp]
        return dict(zip(columns["names"], columns[fact], strict=True))

    def planned(self, exp: str) -> dict[str, int]:
        """``{block: number of cells}`` of ``exp``."""
        return self._column(exp, "cells")

    def digests(self, exp: str) -> dict[str, str]:
        """``{block: the start of the digest of its cells}`` of ``exp`` (:func:`short`)."""
        return self._column(exp, "digests")

    def block_seconds(self, exp: str) -> dict[str, float]:
        """``{block: predicted job seconds}`` of ``exp`` (start-up included)."""
        return self._column(exp, "seconds")


def code_fingerprint() -> str:
    """attnsvm's version and the size and modification time of each of its modules."""
    root = Path(__file__).parent
    parts = [ATTNSVM_VERSION]
    for p in sorted(root.rglob("*.py")):
        st = p.stat()
        parts.append(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _read(path: Path) -> dict[str, Any] | None:
    """The cache at ``path`` when it is readable and of this format."""
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(cache, dict) and cache.get("format") == CACHE_FORMAT
    return cache if ok and isinstance(cache.get("stores"), dict) else None


def load(configfile: str | os.PathLike) -> tuple[StatusPlan, dict[str, Any], Path]:
    """The status plan of ``configfile``, the cache it comes with, and the cache's path.

    Plans (and validates, raising :class:`~attnsvm.config.grid.ConfigError`) only when the
    cache does not hold this config file for this code. The stores' entries are kept across
    plans of the same attnsvm version (each is checked against the planned digest on use).
    """
    raw = Path(configfile).read_bytes()
    config = load_config_file(configfile)
    results = str(config.get("results", "results")) if isinstance(config, dict) else "results"
    # the packs recorded by the workflow (attnsvm.sweep.packs) are part of the plan
    kept = b"".join(p.read_bytes() for p in sorted(Path(results).glob(f"*/{PACKS}")))
    key = hashlib.sha256(raw + code_fingerprint().encode() + kept).hexdigest()
    path = Path(results) / CACHE_NAME
    cache = _read(path)
    if cache is not None and cache.get("key") == key:
        try:
            return StatusPlan(**cache["plan"]), cache, path
        except (TypeError, KeyError):
            pass
    # the plan (pydantic, the config models, the registries) only when the cache misses
    from attnsvm.plan import Plan

    plan = StatusPlan.from_plan(Plan.from_config(config))
    same_code = cache is not None and cache.get("version") == ATTNSVM_VERSION
    fresh = {
        "format": CACHE_FORMAT,
        "key": key,
        "version": ATTNSVM_VERSION,
        "plan": plan.to_dict(),
        "stores": cache["stores"] if same_code else {},
        "fresh": True,  # not yet written (popped before it is)
    }
    return plan, fresh, path


def save(cache: dict[str, Any], path: Path) -> None:
    """Write the cache (atomically) when its results directory exists; errors are ignored:
    the cache only saves time."""
    if not path.parent.is_dir():
        return
    try:
        write_text_atomic(path, json.dumps(cache, separators=(",", ":")))
    except OSError:
        pass


def short(digest: str | None) -> str | None:
    """The first 16 hex digits of a cells digest: what ``attnsvm status`` keeps to tell the
    cells of a plan apart (10^5 of them in its cache; the workflow checks the whole)."""
    return None if digest is None else digest[:16]


def store_key(store: str | os.PathLike) -> int | None:
    """What any change to a block store (its file; of a folder store: its manifest or
    ``zarr.json``) or its replacement changes: the hash of the inode, size, modification and
    status-change times (ns; a tuple of integers hashes the same in every process);
    ``None`` when a file is missing."""
    base = os.fspath(store)
    try:
        if base.endswith(ONEFILE):  # a one-file store: one stat (attnsvm.sweep.onefile)
            st = os.stat(base)
            rows = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        else:
            rows = (os.stat(base).st_ino,)
            for name in (MANIFEST, "zarr.json"):
                st = os.stat(os.path.join(base, name))
                rows += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        return None
    return hash(rows)


class StoreChecks:
    """The remembered quick checks of one experiment's block stores (``{block: entry}``,
    part of the cache), and whether this call changed them. An entry is one flat list (10^5
    of them parse in a fraction of a second): the store's key, the start of the planned
    digest it was checked against, its state, compute seconds, its counts (:data:`COUNTED`:
    cells per status, then those of the torch loop), crashed (0/1) and its job's start and end."""

    def __init__(self, entries: dict[str, Any]):
        self.entries = entries
        self.changed = False

    def get(self, block: str, key: int | None, digest: str | None) -> tuple | None:
        """(state, store info) remembered for ``block`` under ``key`` and ``digest``."""
        hit = self.entries.get(block) if key is not None else None
        try:
            if hit is None or hit[0] != key or hit[1] != digest:
                return None
            counts = dict(zip(COUNTED, hit[4 : 4 + len(COUNTED)], strict=True))
            start, end = hit[-2:]
            job = None if start is None else (start, end)
            return hit[2], (hit[3], counts, bool(hit[-3]), job)
        except (KeyError, TypeError, ValueError, IndexError):
            return None

    def put(self, block: str, key: int, digest: str | None, state: str, info) -> None:
        seconds, counts, crashed, job = info
        start, end = (None, None) if job is None else job
        self.entries[block] = [key, digest, state, seconds,
                               *(counts.get(s, 0) for s in COUNTED), int(crashed), start,
                               end]  # fmt: skip
        self.changed = True

    def keep_only(self, blocks: set[str]) -> None:
        """Forget the blocks not in ``blocks`` (stores that are gone)."""
        for gone in set(self.entries) - blocks:
            del self.entries[gone]
            self.changed = True
