"""Atomic writes: a file (or directory) appears complete under its name, or not at all.

Every output of attnsvm (block and sweep stores, summaries, figures, captions, report text,
manifests) is written under a hidden temporary name that carries :data:`attnsvm.codes.PARTIAL_MARK`
and then renamed in one ``os.replace``; a killed writer leaves only a partial name, which
:func:`attnsvm.sweep.integrity.clean_stale_partials` removes later (docs/store.md, "Integrity").
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attnsvm.codes import OLD_MARK, PARTIAL_MARK


def partial_path(path: str | os.PathLike) -> Path:
    """A unique hidden temporary name next to ``path``: ``.<name>.partial-<host>-<pid>-<id>``."""
    path = Path(path)
    tag = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return path.with_name(f".{path.name}{PARTIAL_MARK}{tag}")


def leftovers(path: str | os.PathLike) -> list[Path]:
    """What killed writers of ``path`` left next to it: its partial and moved-aside names."""
    path = Path(path)
    return sorted(
        p for mark in (PARTIAL_MARK, OLD_MARK) for p in path.parent.glob(f".{path.name}{mark}*")
    )


def remove_leftovers(path: str | os.PathLike) -> None:
    """Remove :func:`leftovers` of ``path`` (files and directories)."""
    for p in leftovers(path):
        _remove(p)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` in one rename.

    The parent folder is created. An existing directory at ``path`` (a Zarr store) is moved
    aside first and removed only after the new one is in place; on an error the temporary is
    removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            old = path.with_name(f".{path.name}{OLD_MARK}{uuid.uuid4().hex[:8]}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        _remove(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


__all__ = ["atomic_path", "leftovers", "partial_path", "remove_leftovers", "write_text_atomic"]
