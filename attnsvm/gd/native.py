"""Compiled training loops: built once per machine into a cache, checked, probed, loaded with
ctypes (docs/science.md §3, "Fused step").

Shared by the CPU loop (:mod:`attnsvm.gd.fused`, fused.c) and the GPU loop
(:mod:`attnsvm.gd.fused_cuda`, fused_cuda.cu). A library is named by a hash of its source, the
whole compiler command, the compiler's version and the machine's architecture, so a changed
source, compiler, flag or target builds anew and a cache shared by different nodes never hands
one a library built for another.

A cache cannot sink a sweep (issue 44): every build records the library's SHA-256 next to it
(``<name>.json``), and a library is loaded only when its bytes match that record and a probe
call of it in a child process returns (so a truncated copy, a flipped bit or a library of
another CPU level kills the probe, never the worker). A mismatch, a load failure or a crashed
probe rebuilds the library once; builds take a lock on the cache folder and write under a
temporary name that the next build (or load) removes if a build was killed, so a killed build
leaves nothing that is ever loaded. Where it still fails, :attr:`Built.problem` says why (the
worker then stops the block as an environmental failure: :mod:`attnsvm.sweep.worker`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

#: marks a build in progress in the cache folder: ``.<library>.partial-<host>-<pid>-<id>``
PARTIAL = ".partial-"
#: seconds a probe call may take
PROBE_TIMEOUT = 60.0
#: what the probe child runs: load the library, then the caller's calls on ``lib``
_PROBE = "import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\n"


def cache_dir() -> Path:
    """Where libraries are built: ``$ATTNSVM_CACHE``, else ``~/.cache/attnsvm``."""
    root = os.environ.get("ATTNSVM_CACHE") or Path.home() / ".cache" / "attnsvm"
    return Path(root)


class BuildError(RuntimeError):
    """A library could not be built, checked or loaded; the message says why."""


def compiler_version(compiler: str, timeout: float = 60.0) -> str:
    """The output of ``compiler --version`` (part of a library's cache key); raises
    :class:`BuildError` when it cannot be run."""
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                             timeout=timeout, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as err:
        raise BuildError(f"{compiler} --version failed: {err}") from None
    return out.stdout.strip()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def probe(path: str | os.PathLike, calls: str, fds: tuple[int, ...] = ()) -> str | None:
    """Load the library at ``path`` and run ``calls`` (Python on ``lib``) in a child process:
    None when it returns, else why not (a signal, a load error). ``fds``: descriptors the
    child keeps (a ``/proc/self/fd/N`` path)."""
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE + calls, str(path)],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              pass_fds=fds)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as err:
        return f"its probe could not run: {err}"
    if proc.returncode == 0:
        return None
    tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    return f"its probe call {_describe(proc.returncode)}" + (f" ({tail[0]})" if tail else "")


class _Image:
    """The bytes of a library, checked and probed, ready to load: from a private in-memory
    copy (``memfd``) where the system has one, so that what is loaded is exactly what was
    hashed, and a later change to the cached file (a copy onto it, truncating it in place)
    cannot reach a process that loaded it."""

    def __init__(self, lib: Path, data: bytes):
        self.fd: int | None = None
        self.path = str(lib)
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            fd = os.memfd_create(lib.name, 0)  # inherited by the probe (pass_fds)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            self.fd, self.path = fd, f"/proc/self/fd/{fd}"

    def probe(self, calls: str) -> str | None:
        return probe(self.path, calls, () if self.fd is None else (self.fd,))

    def load(self) -> ctypes.CDLL:
        lib = ctypes.CDLL(self.path)
        _LOADED.append(self)  # the in-memory copy lives as long as the process
        return lib

    def close(self) -> None:
        if self.fd is not None and self not in _LOADED:
            os.close(self.fd)


_LOADED: list[_Image] = []


def _record_path(lib: Path) -> Path:
    return lib.with_suffix(".json")


def check(lib: Path, calls: str) -> str | _Image:
    """The library at ``lib``, ready to load (:class:`_Image`), when its SHA-256 is the one
    recorded at its build and its probe returns; else why not."""
    try:
        data = lib.read_bytes()
    except FileNotFoundError:
        return "not built yet"
    except OSError as err:
        return f"cannot be read: {err}"
    try:
        recorded = json.loads(_record_path(lib).read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable record of its SHA-256 ({_record_path(lib).name})"
    if hashlib.sha256(data).hexdigest() != recorded:
        return "its SHA-256 differs from the one recorded at its build (damaged or replaced)"
    image = _Image(lib, data)
    why = image.probe(calls)
    if why is not None:
        image.close()
        return why
    return image


@contextlib.contextmanager
def _locked(folder: Path, blocking: bool = True) -> Iterator[bool]:
    """An exclusive lock on the cache folder (``flock`` on the folder itself: no lock file)
    for the time of a build; yields False when ``blocking`` is off and another holds it."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def _remove_partials(folder: Path) -> None:
    """Remove what killed builds left (called with the lock held: no build is running)."""
    for p in folder.glob(f".*{PARTIAL}*"):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def clean_killed_builds(folder: Path) -> None:
    """Remove the leftovers of killed builds when no build runs (a cheap listing otherwise)."""
    try:
        if not any(folder.glob(f".*{PARTIAL}*")):
            return
        with _locked(folder, blocking=False) as held:
            if held:
                _remove_partials(folder)
    except OSError:
        pass


def build(lib: Path, command: Sequence[str], source: Path, libs: Sequence[str], calls: str,
          timeout: float, record: dict) -> _Image:  # fmt: skip
    """Build ``lib`` under the cache folder's lock: compile into a temporary folder, probe the
    result in a child process, then rename the library and its record (SHA-256, command,
    compiler version) into place; returns it, ready to load. Raises :class:`BuildError`."""
    folder = lib.parent
    with _locked(folder):
        done = check(lib, calls)
        if isinstance(done, _Image):  # built (again) by another process meanwhile
            return done
        _remove_partials(folder)
        tag = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = folder / f".{lib.name}{PARTIAL}{tag}"
        tmp.mkdir()
        try:
            out = tmp / lib.name
            cmd = [*command, str(source), "-o", str(out), *libs]
            try:
                subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
            except (OSError, subprocess.SubprocessError) as err:
                detail = (getattr(err, "stderr", "") or str(err)).strip()[:300]
                raise BuildError(
                    f"building {source.name} with {command[0]} failed: {detail}"
                ) from None
            why = probe(out, calls)
            if why is not None:
                raise BuildError(f"the library built from {source.name} is unusable: {why}")
            body = {**record, "sha256": file_sha256(out), "command": [*command, *libs]}
            (tmp / "record.json").write_text(json.dumps(body, indent=1))
            data = out.read_bytes()
            os.replace(out, lib)
            os.replace(tmp / "record.json", _record_path(lib))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return _Image(lib, data)


def compiled(
    name: str,
    command: Sequence[str],
    source: Path,
    unavailable: list[str],
    libs: Sequence[str] = (),
    key_extra: str = "",
    timeout: float = 300.0,
    calls: str = "",
) -> ctypes.CDLL | None:
    """``command source -o LIB libs`` built once into the cache, checked and loaded, or None.

    ``name`` starts the library's file name, followed by a hash of the source, the command,
    ``key_extra``, the compiler's version and the machine's architecture. ``calls``: Python
    code run on ``lib`` (the loaded library) in the probe child (module docstring). A library
    whose bytes differ from its record, that cannot be loaded or whose probe crashes is
    rebuilt once; on failure one line saying why is appended to ``unavailable`` (and to
    :data:`PROBLEMS` unless the compiler itself is missing) and None is returned.
    """
    if not source.is_file():
        unavailable.append(f"{source} is missing from the installed package")
        return None
    try:
        version = compiler_version(command[0])
    except BuildError as err:
        unavailable.append(str(err))
        return None
    text = "\0".join((*command, *libs, key_extra, version, platform.machine(), sys.platform))
    key = hashlib.sha256(source.read_bytes() + text.encode()).hexdigest()
    lib = cache_dir() / f"{name}-{key[:16]}.so"
    record = {"compiler_version": version, "machine": platform.machine(),
              "source_sha256": file_sha256(source)}  # fmt: skip
    try:
        lib.parent.mkdir(parents=True, exist_ok=True)
        clean_killed_builds(lib.parent)
        image = check(lib, calls)
        if isinstance(image, _Image):
            try:
                return image.load()
            except OSError as err:
                image.close()
                image = f"cannot be loaded: {err}"
        if image != "not built yet":
            log.warning("rebuilding %s: %s", lib, image)
        return build(lib, command, source, libs, calls, timeout, record).load()
    except (BuildError, OSError) as err:
        message = f"{lib.name}: {err}"
        unavailable.append(message)
        PROBLEMS.append(message)
        return None


#: why a library that a compiler exists for could not be built, checked or loaded (an
#: environmental failure: :func:`attnsvm.sweep.worker.write_block` stops the block)
PROBLEMS: list[str] = []
