"""A block store in one file: the Zarr v3 store of a block zipped with its manifest
(``<block>.zarr.zip``; docs/store.md, "Block store", issue 44).

A directory store of a small block is some 100-170 files: at 10^4 blocks a million files,
past many clusters' inode quotas, and a metadata operation each on Lustre or GPFS. Here a
block is one file: a zip (``ZIP_STORED``: the chunks are zstd-compressed already) whose members
are the files the Zarr store would have (same names, same bytes: every chunk with its CRC-32C)
plus ``attnsvm-manifest.json`` (format ``attnsvm-manifest-2``), which lists every other member
with its size and SHA-256 and carries the SHA-256 of its own body, so that a changed byte
anywhere (a member, the manifest, the zip's own directory) is seen. The zip format adds a
CRC-32 of every member, checked as it is read.

It is written whole under a temporary name and renamed into place (:mod:`attnsvm.atomic`); it
is checked by reading the file once (:func:`read`), read into memory from that one read
(:func:`dataset`: a block store is a job's output, small next to its memory), or opened lazily
with zarr's ``ZipStore`` (:func:`open_lazy`). ``xr.open_zarr(zarr.storage.ZipStore(path))``
reads it without attnsvm.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SUFFIX = ".zarr.zip"
"""The file name suffix of a one-file block store."""
FORMAT = "attnsvm-manifest-2"
"""Format of the manifest member of a one-file store."""
MANIFEST = "attnsvm-manifest.json"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # every member's time: the same block, the same bytes


class OneFileError(Exception):
    """The file is no readable one-file store; the message says why."""


def is_onefile(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a one-file store (by its name; it need not exist)."""
    return os.fspath(path).endswith(SUFFIX)


def block_of(path: str | os.PathLike) -> str:
    """The block name of a store path (``<block>.zarr.zip``, or an earlier ``<block>.zarr``)."""
    name = Path(path).name
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name.removesuffix(".zarr")


def body_sha256(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON without its own ``manifest_sha256``."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def sealed(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with the SHA-256 of its own body (``manifest_sha256``)."""
    out = dict(manifest)
    out["manifest_sha256"] = body_sha256(out)
    return out


def zip_bytes(members: Mapping[str, bytes], manifest: Mapping[str, Any]) -> bytes:
    """The one-file store of ``members`` (sorted, fixed times: deterministic) and its manifest."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name in sorted(members):
            zf.writestr(zipfile.ZipInfo(name, _EPOCH), members[name])
        text = json.dumps(manifest, indent=1, sort_keys=True)
        zf.writestr(zipfile.ZipInfo(MANIFEST, _EPOCH), text)
    return buf.getvalue()


def read_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest member of the store at ``path``, checked against its own SHA-256 (its zip
    directory and that one member read). Raises :class:`OneFileError`."""
    try:
        with zipfile.ZipFile(path) as zf:
            return _manifest(zf)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as err:
        raise OneFileError(f"not a readable zip: {err}") from None


def _manifest(zf: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(zf.read(MANIFEST))
    except KeyError:
        raise OneFileError(f"no {MANIFEST} member (written last: incomplete)") from None
    except (ValueError, zipfile.BadZipFile) as err:
        raise OneFileError(f"unreadable {MANIFEST}: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise OneFileError(f"unreadable {MANIFEST}: unknown manifest format")
    if manifest.get("manifest_sha256") != body_sha256(manifest):
        raise OneFileError(f"{MANIFEST} does not match its own checksum")
    if not isinstance(manifest.get("files"), dict):
        raise OneFileError(f"unreadable {MANIFEST}: no files")
    return manifest


def read(path: str | os.PathLike, full: bool = True) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and members of the store at ``path``, from one read of the file, once
    every member is as its manifest lists it: none missing or added, the same size, and with
    ``full`` the same SHA-256 (and the zip's CRC-32; without ``full`` no member is read and
    none is returned). Raises :class:`OneFileError` naming the first problem."""
    try:
        data = Path(path).read_bytes() if full else None
        with zipfile.ZipFile(io.BytesIO(data) if full else path) as zf:
            manifest = _manifest(zf)
            infos = {i.filename: i for i in zf.infolist() if i.filename != MANIFEST}
            files = manifest["files"]
            missing = sorted(set(files) - set(infos))
            if missing:
                raise OneFileError(f"file missing: {missing[0]}" + _more(missing))
            extra = sorted(set(infos) - set(files))
            if extra:
                raise OneFileError(f"file not in the manifest: {extra[0]}" + _more(extra))
            members: dict[str, bytes] = {}
            for name, info in infos.items():
                try:
                    size, sha = files[name]
                except (TypeError, ValueError):
                    raise OneFileError(f"unreadable {MANIFEST} entry for {name}") from None
                if info.file_size != size:
                    raise OneFileError(f"file {name} has {info.file_size} bytes, manifest {size}")
                if full:
                    _check_header(data, info)
                    try:
                        blob = zf.read(name)  # checks the zip's CRC-32 of the member
                    except zipfile.BadZipFile as err:
                        raise OneFileError(
                            f"file {name} does not match its checksum ({err})"
                        ) from None
                    if hashlib.sha256(blob).hexdigest() != sha:
                        raise OneFileError(f"file {name} does not match its checksum")
                    members[name] = blob
            if len(zf.infolist()) != len(infos) + 1:
                raise OneFileError("a member is in the file more than once")
    except OneFileError:
        raise
    except FileNotFoundError:
        raise OneFileError("does not exist") from None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError, KeyError) as err:
        raise OneFileError(f"not a readable zip: {type(err).__name__}: {err}") from None
    return manifest, members


_LOCAL = struct.Struct("<4s5H3L2H")  # a member's local header (30 bytes)


def _check_header(data: bytes, info: zipfile.ZipInfo) -> None:
    """The member's local header agrees with the zip's directory (version, flags, method,
    time, CRC-32, sizes, name): a changed byte there is damage, even where no reader uses it."""
    start = info.header_offset
    try:
        sig, version, flags, method, time_, date, crc, csize, size, n, _ = _LOCAL.unpack_from(
            data, start
        )
    except struct.error:
        raise OneFileError(f"file {info.filename}: no local header") from None
    name = data[start + 30 : start + 30 + n].decode("utf-8", errors="replace")
    expect = (b"PK\x03\x04", info.extract_version, info.flag_bits, info.compress_type,
              info.CRC, info.compress_size, info.file_size, info.filename)  # fmt: skip
    d = info.date_time
    stamp = ((d[0] - 1980) << 9 | d[1] << 5 | d[2], d[3] << 11 | d[4] << 5 | d[5] // 2)
    if (sig, version, flags, method, crc, csize, size, name) != expect or (date, time_) != stamp:
        raise OneFileError(f"file {info.filename}: its local header differs from the directory")


def _more(items: list[str]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def member(path: str | os.PathLike, name: str) -> bytes:
    """One member (e.g. ``zarr.json``) of the store at ``path``, unverified."""
    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


def dataset(members: Mapping[str, bytes]):
    """The xarray Dataset of a store's members (read lazily from memory)."""
    import xarray as xr  # the repair step and ``attnsvm status`` read manifests only
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    buffer = default_buffer_prototype().buffer
    store = MemoryStore(store_dict={k: buffer.from_bytes(v) for k, v in members.items()})
    return xr.open_zarr(store, consolidated=False)


def open_lazy(path: str | os.PathLike):
    """The store at ``path`` opened lazily with zarr's ``ZipStore`` (not verified)."""
    import xarray as xr  # the repair step and ``attnsvm status`` read manifests only
    from zarr.storage import ZipStore

    return xr.open_zarr(ZipStore(path, mode="r"), consolidated=False)
