"""Compiled training loops: build once per machine into a cache, load with ctypes
(docs/science.md §3, "Fused step").

Shared by the CPU loop (:mod:`attnsvm.gd.fused`, fused.c) and the GPU loop
(:mod:`attnsvm.gd.fused_cuda`, fused_cuda.cu). A library is named by a hash of its source and of
the whole compiler command, so a changed source, compiler, flag or target builds anew and a
cache shared by different nodes never hands one a library built for another.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


def cache_dir() -> Path:
    """Where libraries are built: ``$ATTNSVM_CACHE``, else ``~/.cache/attnsvm``."""
    root = os.environ.get("ATTNSVM_CACHE") or Path.home() / ".cache" / "attnsvm"
    return Path(root)


def compiled(
    name: str,
    command: Sequence[str],
    source: Path,
    unavailable: list[str],
    libs: Sequence[str] = (),
    key_extra: str = "",
    timeout: float = 300.0,
) -> ctypes.CDLL | None:
    """``command source -o LIB libs`` built once into the cache and loaded, or None.

    ``name`` starts the library's file name (with a hash of the source, the command and
    ``key_extra``: e.g. the compiler's version). On failure one line saying why is appended
    to ``unavailable`` and None is returned. The build writes into a temporary name and
    renames it: concurrent jobs see a whole library or none.
    """
    if not source.is_file():
        unavailable.append(f"{source} is missing from the installed package")
        return None
    text = " ".join((*command, *libs)) + key_extra
    key = hashlib.sha256(source.read_bytes() + text.encode()).hexdigest()
    path = cache_dir() / f"{name}-{key[:16]}.so"
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
                out = Path(tmp) / path.name
                cmd = [*command, str(source), "-o", str(out), *libs]
                subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
                os.replace(out, path)
        return ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", "") or str(err)
        unavailable.append(
            f"building {source.name} with {command[0]} failed: {detail.strip()[:300]}"
        )
        return None
