"""Integrity of stores: a manifest per store, its verification, and what a resume repairs.

Every store written by :func:`attnsvm.sweep.store.write_atomic` (block and sweep stores)
carries ``attnsvm-manifest.json``, written last, just before the store is renamed into place:
its identity (kind, experiment, block, digest of the block's cells, attnsvm version, whether
and why the block failed) and the size and SHA-256 of every file of the store, summed up in
one ``content_sha256``. Every chunk also carries zarr's ``crc32c`` checksum (checked by zarr
on every read). See ``docs/store.md``, "Integrity".

A block store is **finished** only when its manifest verifies, names this block and
experiment, and holds the cells' digest of the plan. Anything else under ``blocks/`` is
damaged (it does not verify: a flipped byte, a missing or truncated file), stale (another
plan's cells or another attnsvm version), foreign (a copy of another block) or stray (not a
block of the plan): the workflow moves damaged and stale stores aside before it plans its
jobs (:func:`repair_blocks`), so that they are recomputed, and ignores stray entries with a
warning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import time
import warnings
from array import array
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnsvm.atomic import atomic_path, remove_leftovers, write_text_atomic
from attnsvm.provenance import ATTNSVM_VERSION
from attnsvm.sweep import onefile

MANIFEST = "attnsvm-manifest.json"
MANIFEST_FORMAT = "attnsvm-manifest-1"
QUARANTINE = "quarantine"
"""Folder (next to ``blocks/``) that damaged and stale block stores are moved into."""
_IDENTITY = ("kind", "experiment", "block", "cells_digest", "failure_kind")
#: the manifest entries the verification cache keeps per store (:class:`VerifyCache`; a
#: sweep store's inputs_sha256 too)
_FACTS = (*_IDENTITY, "attnsvm", "content_sha256", "inputs_sha256")


class StoreError(Exception):
    """A store that cannot be trusted; the message names its path and the reason."""

    def __init__(self, path: str | os.PathLike, reason: str, state: str = "damaged"):
        self.path, self.reason, self.state = Path(path), reason, state
        super().__init__(f"{state} store {self.path}: {reason}")

    def __reduce__(self):  # raised in collect's worker processes, re-raised in the parent
        return type(self), (self.path, self.reason, self.state)


def attnsvm_version() -> str:
    """The running attnsvm version (recorded in manifests; a change makes blocks stale)."""
    return ATTNSVM_VERSION


def _ignored(rel: str) -> bool:
    """Files that are not part of a store's content: the manifest, hidden files.

    Snakemake writes ``.snakemake_timestamp`` into directory outputs after the job.
    """
    return rel == MANIFEST or any(part.startswith(".") for part in rel.split("/"))


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of the file at ``path``, read in 1 MiB pieces."""
    return _file_sha256(Path(path))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _content_stats(root: Path) -> dict[str, os.stat_result]:
    """``{relative path: stat}`` of the store's content files (one ``scandir`` per folder)."""
    out: dict[str, os.stat_result] = {}
    stack = [("", str(root))]
    while stack:
        rel_dir, path = stack.pop()
        with os.scandir(path) as it:
            for e in it:
                rel = rel_dir + e.name
                if e.is_dir(follow_symlinks=False):
                    stack.append((rel + "/", e.path))
                elif not _ignored(rel):
                    out[rel] = e.stat()
    return out


def _unchanged_key(st: os.stat_result) -> list[int]:
    """What any write to a file changes: inode, modification and status-change times (ns).

    The status-change time cannot be set back by a program, so a file whose key equals the
    one recorded when its hash was taken has not been written since (a copy of the store gets
    new inodes and times, and is hashed again)."""
    return [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _content_sha256(files: Mapping[str, Any]) -> str:
    text = json.dumps(files, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_manifest(
    store: str | os.PathLike, attrs: Mapping[str, Any], extra: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Write the manifest of the (complete, not yet renamed) store at ``store``.

    ``attrs``: the store's attributes; ``format`` decides the kind (``block`` / ``sweep``),
    ``experiment``, ``block``, ``cells_digest`` and ``failure_kind`` are copied when present.
    ``extra``: more identity entries (a sweep's ``inputs_sha256``, the digest of the block
    manifests it was collected from: :func:`attnsvm.sweep.derived.blocks_digest`).
    """
    root = Path(store)
    stats = _content_stats(root)
    files = {rel: [st.st_size, _file_sha256(root / rel)] for rel, st in stats.items()}
    manifest = _manifest(files, attrs, extra, MANIFEST_FORMAT)
    # a hint for quick checks (verify_store's trust_unchanged), not part of the checksum: a
    # wrong entry only makes a file be hashed again
    manifest["unchanged"] = {rel: _unchanged_key(st) for rel, st in stats.items()}
    write_text_atomic(root / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def _manifest(
    files: dict[str, list], attrs: Mapping[str, Any], extra: Mapping[str, str] | None, fmt: str
) -> dict[str, Any]:
    kind = "sweep" if "sweep" in str(attrs.get("format", "")) else "block"
    return {
        "format": fmt,
        "kind": kind,
        "experiment": str(attrs.get("experiment", "")),
        "block": str(attrs.get("block", "")),
        "cells_digest": str(attrs.get("cells_digest", "")),
        "failure_kind": str(attrs.get("failure_kind", "")),
        "attnsvm": attnsvm_version(),
        "files": files,
        "content_sha256": _content_sha256(files),
        **(extra or {}),
    }


def onefile_manifest(
    members: Mapping[str, bytes], attrs: Mapping[str, Any], extra: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The manifest of a one-file store of ``members`` (:mod:`attnsvm.sweep.onefile`): the
    same entries as a directory store's (the same ``content_sha256`` for the same files),
    sealed with the SHA-256 of its own body."""
    files = {
        rel: [len(data), hashlib.sha256(data).hexdigest()]
        for rel, data in members.items()
        if not _ignored(rel)
    }
    return onefile.sealed(_manifest(files, attrs, extra, onefile.FORMAT))


def verify_store(
    path: str | os.PathLike,
    full: bool = True,
    trust_unchanged: bool = False,
    contents: bool = True,
) -> dict[str, Any]:
    """The manifest of the store at ``path`` once its content verifies against it.

    ``full``: hash every file (otherwise only names and sizes are compared).
    ``trust_unchanged``: skip the hash of a file not written since the manifest recorded its
    hash (same inode, modification and status-change time; :func:`_unchanged_key`): the
    check of ``attnsvm status --verify``. Collect and the workflow's repair hash every file.
    ``contents`` false: only the manifest is read (it must parse and be of this format); no
    file of the store is looked at (the quick check of ``attnsvm status``).
    Raises :class:`StoreError` (state ``damaged``) naming the store and the first problem:
    not a directory, no or unreadable manifest, a file missing, added, resized or changed.

    A one-file store (:mod:`attnsvm.sweep.onefile`) is checked from one read of its file
    (``trust_unchanged`` does not apply: its members have no times of their own).
    """
    root = Path(path)
    if onefile.is_onefile(root):
        try:
            if not contents:
                return onefile.read_manifest(root)
            return onefile.read(root, full=full)[0]
        except onefile.OneFileError as err:
            raise StoreError(root, str(err)) from None
    if not root.is_dir():
        raise StoreError(root, "not a directory")
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        files = manifest["files"]
        if manifest.get("format") != MANIFEST_FORMAT or not isinstance(files, dict):
            raise ValueError("unknown manifest format")
    except FileNotFoundError:
        raise StoreError(root, f"no {MANIFEST} (written last: the store is incomplete)") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StoreError(root, f"unreadable {MANIFEST}: {err}") from None
    if not contents:
        return manifest
    if manifest.get("content_sha256") != _content_sha256(files):
        raise StoreError(root, f"{MANIFEST} does not match its own checksum")
    try:
        stats = _content_stats(root)
    except OSError as err:  # e.g. replaced or removed while being read
        raise StoreError(root, f"cannot be listed: {err}") from None
    present = {rel: st.st_size for rel, st in stats.items()}
    unchanged = manifest.get("unchanged") if trust_unchanged else None
    if not isinstance(unchanged, dict):
        unchanged = {}
    missing = sorted(set(files) - set(present))
    if missing:
        raise StoreError(root, f"file missing: {missing[0]}" + _more(missing))
    extra = sorted(set(present) - set(files))
    if extra:
        raise StoreError(root, f"file not in the manifest: {extra[0]}" + _more(extra))
    for rel, actual in present.items():
        try:
            size, sha = files[rel]
        except (TypeError, ValueError):
            raise StoreError(root, f"unreadable {MANIFEST} entry for {rel}") from None
        if actual != size:
            raise StoreError(root, f"file {rel} has {actual} bytes, manifest {size}")
        if unchanged.get(rel) == _unchanged_key(stats[rel]):
            continue
        if full and _file_sha256(root / rel) != sha:
            raise StoreError(root, f"file {rel} does not match its checksum")
    return manifest


def open_store(path: str | os.PathLike):
    """Open a store with xarray (lazy), not consolidated, without verifying it.

    Snakemake leaves a ``.snakemake_timestamp`` file in directory outputs and every store
    holds its manifest; zarr warns about these unknown objects, which is harmless and
    silenced here.
    """
    import xarray as xr  # the repair step and ``attnsvm status`` read manifests only

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp.*")
        warnings.filterwarnings("ignore", message=f".*{MANIFEST}.*")
        if onefile.is_onefile(path):
            return onefile.open_lazy(path)
        return xr.open_zarr(path, consolidated=False)


def load_verified(path: str | os.PathLike, lazy: bool = False):
    """A store read into memory after its manifest verified, every chunk checksum checked.

    ``lazy``: the verified store opened without reading its arrays; each variable is read
    (and kept in memory) when first used. Every file was already hashed against the manifest
    (SHA-256), so a consumer that uses a few variables (the summary, the claims) reads only
    those: most of a sweep's bytes are data tokens and SVM matrices that neither reads (most
    of the time of E3's summary and claims went to decompressing them). The values are
    the same bytes either way.

    Raises :class:`StoreError` naming the store on any failure (a file missing or changed,
    a chunk whose CRC-32C does not match, metadata zarr cannot read; with ``lazy``, a chunk's
    CRC-32C is checked when its variable is read).

    A one-file store is read once: verified and decoded from that one read, in memory.
    """
    if onefile.is_onefile(path):
        try:
            _, members = onefile.read(path)
        except onefile.OneFileError as err:
            raise StoreError(path, str(err)) from None
        try:
            ds = onefile.dataset(members)
            return ds if lazy else ds.load()
        except Exception as err:
            raise StoreError(path, f"cannot be read: {type(err).__name__}: {err}") from err
    verify_store(path)
    try:
        ds = open_store(path)
        return ds if lazy else ds.load()
    except Exception as err:
        raise StoreError(path, f"cannot be read: {type(err).__name__}: {err}") from err


def _more(items: list[str]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


@dataclass(frozen=True)
class BlockCheck:
    """What a block store on disk is worth (:func:`check_block`)."""

    path: Path
    state: str
    """finished, failed (a reproducible crash, kept until forced), retry (an environmental
    crash, recomputed by a plain resume), damaged, stale or foreign."""
    reason: str = ""
    manifest: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """Counts as done (``failed`` blocks are done: their cells are recorded as failed)."""
        return self.state in ("finished", "failed")


def check_block(
    path: str | os.PathLike,
    experiment: str,
    block: str,
    digest: str | None = None,
    full: bool = True,
    check_version: bool = True,
    trust_unchanged: bool = False,
    contents: bool = True,
) -> BlockCheck:
    """Check the block store at ``path`` against the plan (``digest``: the cells' digest).

    ``full``, ``trust_unchanged`` and ``contents``: as for :func:`verify_store`.

    ``check_version``: a store written by another attnsvm version is stale (the workflow's
    rule: the version stands in for the library code).
    """
    path = Path(path)
    try:
        m = verify_store(path, full=full, trust_unchanged=trust_unchanged, contents=contents)
    except StoreError as err:
        return BlockCheck(path, "damaged", err.reason)
    return _against_plan(path, m, experiment, block, digest, check_version)


def _against_plan(
    path: Path,
    m: dict[str, Any],
    experiment: str,
    block: str,
    digest: str | None,
    check_version: bool = True,
) -> BlockCheck:
    """What a block store whose manifest ``m`` verified is worth to the plan."""
    if m.get("kind") != "block" or m.get("experiment") != experiment or m.get("block") != block:
        where = f"{m.get('kind')} {m.get('experiment')!r}/{m.get('block')!r}"
        return BlockCheck(path, "foreign", f"its manifest describes {where}", m)
    if digest is not None and m.get("cells_digest") != digest:
        return BlockCheck(path, "stale", "its cells differ from the plan's (cells_digest)", m)
    if check_version and m.get("attnsvm") != attnsvm_version():
        why = f"written by attnsvm {m.get('attnsvm')}, this is {attnsvm_version()}"
        return BlockCheck(path, "stale", why, m)
    kind = m.get("failure_kind", "")
    if kind == "environment":
        return BlockCheck(path, "retry", "its worker failed for an environmental reason", m)
    return BlockCheck(path, "failed" if kind else "finished", "", m)


def is_hidden_work_file(name: str) -> bool:
    """Entries of ``blocks/`` that belong to a running or killed job (claims, partial stores)."""
    return name.startswith(".")


def stray_entries(blocks_dir: str | os.PathLike, planned: Mapping[str, Any]) -> list[Path]:
    """Visible entries of ``blocks_dir`` that are no store of a planned block."""
    d = Path(blocks_dir)
    if not d.is_dir():
        return []
    return sorted(
        p
        for p in d.iterdir()
        if not is_hidden_work_file(p.name)
        and not (p.name.endswith(onefile.SUFFIX) and p.name.removesuffix(onefile.SUFFIX) in planned)
    )


def quarantine(path: Path) -> Path:
    """Move ``path`` into ``<experiment>/quarantine/`` under a time-stamped name."""
    dest_dir = path.parent.parent / QUARANTINE
    dest_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = dest_dir / f"{path.name}.{stamp}-{os.getpid()}"
    os.replace(path, dest)
    return dest


VERIFY_CACHE = ".attnsvm-verify-cache.json"
"""File (in the experiment folder) that remembers which stores verified, under their files'
metadata (:class:`VerifyCache`)."""
VERIFY_CACHE_FORMAT = "attnsvm-verify-cache/3"
#: opening the store's folder once and stat'ing its files relative to it (``fstatat``) spares
#: the kernel the walk down the full path of every file (bench/bench_repair.py)
_DIR_FD = os.stat in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
MISSING = "missing"
"""What :meth:`VerifyCache.vouched` answers for a store path that does not exist."""


def _stat_row(st: os.stat_result) -> list[int]:
    """What any write to a file changes: size, inode, modification and status-change times.

    The status-change time cannot be set back by a program, and a copy gets new inodes."""
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def _files_key(vals: list[int]) -> str:
    """SHA-256 of the stat rows of a store's files (packed as 64-bit integers)."""
    try:
        packed = array("q", vals).tobytes()
    except OverflowError:  # an inode number beyond 2^63: the slower exact text
        packed = repr(vals).encode()
    return hashlib.sha256(packed).hexdigest()


def _stat_store(path: str, rels: tuple[str, ...] | None) -> tuple[list[int], str | None] | str:
    """``(stat row of the manifest, key of the files rels)`` of the store at ``path``, key
    ``None`` when ``rels`` is None or a file is missing; :data:`MISSING` when ``path`` does
    not exist; raises OSError when it cannot be read (not a directory...). A one-file store
    is one stat: its file's (:mod:`attnsvm.sweep.onefile`)."""
    if onefile.is_onefile(path):
        try:
            row = _stat_row(os.stat(path))
        except FileNotFoundError:
            return MISSING
        return row, (None if rels is None else _files_key([]))
    if _DIR_FD:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return MISSING
        try:
            stat = functools.partial(os.stat, dir_fd=fd)
            return _stat_files(stat, "", rels)
        finally:
            os.close(fd)
    if not os.path.exists(path):
        return MISSING
    return _stat_files(os.stat, path + os.sep, rels)


def _stat_files(
    stat: Callable[[str], os.stat_result], prefix: str, rels: tuple[str, ...] | None
) -> tuple[list[int], str | None]:
    manifest = _stat_row(stat(prefix + MANIFEST))
    if rels is None:
        return manifest, None
    vals: list[int] = []
    extend = vals.extend
    try:
        for rel in rels:
            st = stat(prefix + rel)
            extend((st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
    except (FileNotFoundError, NotADirectoryError):
        return manifest, None
    return manifest, _files_key(vals)


def store_snapshot(path: str | os.PathLike) -> tuple[list[int], tuple[str, ...], str] | None:
    """``(manifest's stat row, files its manifest lists, key of their stat rows)`` of the
    store at ``path``, taken before it is hashed (:meth:`VerifyCache.record`); ``None`` when
    the manifest or a file it lists cannot be read."""
    path = os.fspath(path)
    try:
        first = _stat_store(path, None)
        files = (
            {}
            if onefile.is_onefile(path)
            else json.loads(Path(path, MANIFEST).read_text())["files"]
        )
        rels = tuple(sorted(files))
        now = _stat_store(path, rels)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if first == MISSING or now == MISSING or now[1] is None or now[0] != first[0]:
        return None
    return now[0], rels, now[1]


class VerifyCache:
    """Which stores of an experiment verified (every file hashed), kept in
    ``<experiment>/.attnsvm-verify-cache.json``: per store, the stat row (size, inode,
    modification and status-change time) of its manifest, the files it lists, the SHA-256 of
    their stat rows, and the manifest's scalar entries (identity, cells, version, checksums).

    The repair step at each start stats every store's manifest and listed files; a store whose
    stat rows all equal those recorded when it last verified is not hashed, and its manifest is
    not read: its recorded entries are checked against the plan (bench/bench_repair.py). A
    missing, unreadable or foreign cache is rebuilt; it only saves work. ``attnsvm status
    --verify`` and collect never use it: they hash every file.
    """

    def __init__(self, experiment_dir: str | os.PathLike):
        self.path = Path(experiment_dir) / VERIFY_CACHE
        self.changed = False
        self.stores: dict[str, tuple[list[int], tuple[str, ...], str, dict[str, Any]]] = {}
        try:
            body = json.loads(self.path.read_text())
            if body.get("format") != VERIFY_CACHE_FORMAT or body.get("attnsvm") != (
                attnsvm_version()
            ):
                return
            lists = [tuple(str(rel) for rel in rels) for rels in body["lists"]]
            stores = {}
            for name, (mrow, key, index, facts) in body["stores"].items():
                if not (isinstance(mrow, list) and isinstance(key, str)):
                    raise TypeError("bad entry")
                stores[str(name)] = (mrow, lists[index], key, dict(facts))
            self.stores = stores
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            self.stores = {}

    def vouched(self, name: str, path: str | os.PathLike) -> dict[str, Any] | str | None:
        """The recorded manifest entries of store ``name`` at ``path`` when its manifest and
        every file it lists are unchanged since it verified; :data:`MISSING` when ``path``
        does not exist; otherwise ``None`` (hash it: :func:`check_block`). Thread-safe."""
        entry = self.stores.get(name)
        try:
            now = _stat_store(os.fspath(path), entry[1] if entry else None)
        except OSError:
            return None
        if now == MISSING:
            return MISSING
        if entry is None or now[0] != entry[0] or now[1] != entry[2]:
            return None
        return entry[3]

    def record(
        self,
        name: str,
        path: str | os.PathLike,
        manifest: Mapping[str, Any],
        before: tuple[list[int], tuple[str, ...], str] | None,
    ) -> None:
        """Remember that store ``name`` verified with ``manifest``: ``before`` is its
        :func:`store_snapshot` taken before it was hashed; nothing is remembered unless the
        store is still exactly as it was then (a write during the hashing is hashed again at
        the next start) and the manifest lists the files of the snapshot."""
        if before is None or store_snapshot(path) != before:
            return self.drop(name)
        listed = () if onefile.is_onefile(path) else tuple(sorted(manifest.get("files") or ()))
        if listed != before[1]:
            return self.drop(name)
        # what the plan checks (identity, cells, version) and blocks_digest reads: ~300 bytes
        # per store, 10^5 of them in one file
        facts = {k: manifest[k] for k in _FACTS if isinstance(manifest.get(k), str)}
        self.stores[name] = (before[0], before[1], before[2], facts)
        self.changed = True

    def drop(self, name: str) -> None:
        if self.stores.pop(name, None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write the cache if it changed (a folder that cannot be written gets none); the
        file lists shared by stores are written once."""
        if not self.changed:
            return
        index: dict[tuple[str, ...], int] = {}
        stores = {
            name: [mrow, key, index.setdefault(rels, len(index)), facts]
            for name, (mrow, rels, key, facts) in self.stores.items()
        }
        body = {"format": VERIFY_CACHE_FORMAT, "attnsvm": attnsvm_version(),
                "lists": [list(rels) for rels in index], "stores": stores}  # fmt: skip
        try:
            write_text_atomic(self.path, json.dumps(body, separators=(",", ":")))
        except OSError:
            pass
        self.changed = False


def forget_verified(store: str | os.PathLike) -> None:
    """Drop the block store ``store`` (``<experiment>/blocks/<block>.zarr.zip``) from its
    experiment's :class:`VerifyCache`: a reader refused it (collect), so the next run's repair
    step hashes it again, finds it damaged and recomputes it, instead of trusting the cache."""
    store = Path(store)
    cache = VerifyCache(store.parent.parent)
    cache.drop(onefile.block_of(store))
    cache.save()


#: threads that stat the files of the block stores at start (the stat calls release the GIL
#: and wait on the file system; bench/bench_repair.py)
STAT_THREADS = 8
#: stores read ahead by those threads
STAT_CHUNK = 256


def _read_ahead(cache: VerifyCache, items: list[tuple[str, Path]]):
    """:meth:`VerifyCache.vouched` of every ``(name, path)``, in order, computed
    ``STAT_THREADS`` at a time, ``STAT_CHUNK`` stores ahead."""

    def one(item: tuple[str, Path]) -> dict[str, Any] | str | None:
        return cache.vouched(*item)

    if STAT_THREADS <= 1:
        yield from map(one, items)
        return
    with ThreadPoolExecutor(STAT_THREADS) as pool:
        for start in range(0, len(items), STAT_CHUNK):
            yield from pool.map(one, items[start : start + STAT_CHUNK])


def check_block_cached(
    path: str | os.PathLike,
    experiment: str,
    block: str,
    digest: str | None,
    cache: VerifyCache | None,
    vouched: dict[str, Any] | str | None = None,
) -> BlockCheck:
    """:func:`check_block` with every file hashed, unless ``cache`` vouches for the store's
    files (:meth:`VerifyCache.vouched`): then its recorded manifest entries are checked
    against the plan (identity, cells, version). ``vouched``: the cache's answer when the
    caller already has it."""
    if cache is None:
        return check_block(path, experiment, block, digest)
    path = Path(path)
    if vouched is None:
        vouched = cache.vouched(block, path)
    if isinstance(vouched, dict):
        return _against_plan(path, vouched, experiment, block, digest)
    before = store_snapshot(path)
    chk = check_block(path, experiment, block, digest)
    if chk.state == "damaged" or chk.manifest is None:
        cache.drop(block)
    else:  # its files verified (whatever the plan thinks of it)
        cache.record(block, path, chk.manifest, before)
    return chk


def repair_blocks(
    blocks_dir: str | os.PathLike,
    experiment: str,
    planned: Mapping[str, str],
    dry_run: bool = False,
    finished: dict[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Make every unfinished block store of ``planned`` (``{block: cells digest}``) missing.

    Damaged, stale and foreign stores are moved into ``quarantine/`` (never deleted), stores
    of blocks that failed for an environmental reason are removed (they hold no results), so
    that the workflow sees those blocks as missing and recomputes them. Stray entries are
    left alone; stores whose files did not change since they last verified are not hashed
    again (:class:`VerifyCache`). Returns one warning per finding, naming the path, and the
    paths of the stores to recompute; ``dry_run`` changes nothing. ``finished``: filled with
    ``{block: content_sha256 of its manifest}`` of the finished stores (what
    :func:`attnsvm.sweep.derived.blocks_digest` reads, without reading the manifests again).
    """
    d = Path(blocks_dir)
    out: list[str] = []
    redo: list[str] = []
    if not d.is_dir():
        return out, redo
    out += convert_old_stores(d, experiment, planned, dry_run)
    cache = VerifyCache(d.parent)
    items = [(name, d / f"{name}{onefile.SUFFIX}") for name in planned]
    for (name, path), vouched in zip(items, _read_ahead(cache, items), strict=True):
        if vouched == MISSING:
            continue
        chk = check_block_cached(path, experiment, name, planned[name], cache, vouched)
        if chk.finished:
            if finished is not None and chk.manifest is not None:
                finished[name] = str(chk.manifest.get("content_sha256", ""))
            continue
        cache.drop(name)
        redo.append(str(path))
        if dry_run:
            out.append(f"{chk.state} block store {path} ({chk.reason}) will be recomputed")
        elif chk.state == "retry":
            _remove(path)
            out.append(f"block {path} failed for an environmental reason: retrying it")
        else:
            dest = quarantine(path)
            out.append(
                f"{chk.state} block store {path} ({chk.reason}): moved to {dest}, recomputing"
            )
    if not dry_run:
        cache.save()
    stray = stray_entries(d, planned)
    if stray:
        names = ", ".join(p.name for p in stray[:5]) + (" ..." if len(stray) > 5 else "")
        out.append(f"{len(stray)} entries of {d} are no block of the plan, ignored: {names}")
    return out, redo


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def convert_old_stores(
    blocks_dir: Path, experiment: str, planned: Mapping[str, str], dry_run: bool = False
) -> list[str]:
    """Convert the block stores of earlier attnsvm versions (a directory ``<block>.zarr`` per
    block) of ``planned`` blocks into one-file stores (:mod:`attnsvm.sweep.onefile`), once:
    a finished store (every file verified against its manifest, its cells the plan's) becomes
    ``<block>.zarr.zip`` with the same files and the same ``content_sha256`` (its modification
    time kept, so that nothing built from it is rebuilt) and its folder is removed; any other
    is quarantined. Returns the lines saying so (a dry run only says what it would do)."""
    try:
        with os.scandir(blocks_dir) as it:
            old = [e.name[:-5] for e in it if e.name.endswith(".zarr") and e.is_dir()]
    except OSError:
        return []
    old = [name for name in old if name in planned]
    if not old:
        return []
    if dry_run:
        return [f"{len(old)} block store(s) of an earlier attnsvm in {blocks_dir} will be "
                "converted to one file each"]  # fmt: skip
    out, converted = [], 0
    for name in sorted(old):
        src, dest = blocks_dir / f"{name}.zarr", blocks_dir / f"{name}{onefile.SUFFIX}"
        if dest.exists():
            continue
        chk = check_block(src, experiment, name, planned[name])
        if not chk.finished or chk.manifest is None:
            moved = quarantine(src)
            out.append(f"{chk.state} block store {src} ({chk.reason}): moved to {moved}")
            continue
        members = {rel: (src / rel).read_bytes() for rel in chk.manifest["files"]}
        manifest = onefile_manifest(members, chk.manifest)
        if manifest["content_sha256"] != chk.manifest.get("content_sha256"):
            raise StoreError(src, "changed while it was converted")
        mtime = (src / MANIFEST).stat().st_mtime_ns
        with atomic_path(dest) as tmp:
            tmp.write_bytes(onefile.zip_bytes(members, manifest))
            os.utime(tmp, ns=(mtime, mtime))
        shutil.rmtree(src)
        converted += 1
    if converted:
        out.append(f"converted {converted} block store(s) of an earlier attnsvm in {blocks_dir} "
                   f"to one file each (<block>{onefile.SUFFIX}, the same content)")  # fmt: skip
    return out


def clean_stale_partials(out: str | os.PathLike) -> None:
    """Remove what killed attempts at writing ``out`` left next to it.

    Temporary copies ``.<name>.partial-*`` and replaced stores ``.<name>.old-*``
    (:func:`attnsvm.atomic.leftovers`); every writer of an output calls this before writing
    it (Snakemake runs one job per output at a time).
    """
    remove_leftovers(out)
