"""A fork server for the workflow's jobs on one machine: torch, xarray, zarr, the solvers and
matplotlib are imported once, and each job runs in a fork of that process (issue 44).

A job of the workflow is a fresh Python process; importing what a block job needs costs some
3 s of CPU (torch, cvxpy, xarray, zarr), more than many blocks compute. Instead, the first
job on a machine starts a server (``python -m attnsvm.sweep.forkserver``) that imports all of
it once; every job then sends its call (a function of attnsvm and its arguments, its working
folder, its environment and its stdout and stderr) over a Unix socket and waits: the server
forks a child that runs the call with the job's environment and files, and sends back its exit
status (negative: killed by that signal). A crash of the child is the job's, never the
server's; a job that is killed (Ctrl-C, Snakemake) takes its child with it; the server exits
after :data:`IDLE_SECONDS` without work.

The server is one per user, machine, Python, attnsvm code (its modules' sizes and times) and
the environment variables read when modules are imported (:data:`IMPORT_ENV`): a job whose
code or settings differ gets its own. It listens on an abstract Unix socket (no file; the
kernel frees it when the server dies) and serves only its own user (``SO_PEERCRED``). It is
not used in a SLURM job (each job is its own allocation there: a server would outlive it
outside its cgroup), with ``ATTNSVM_FORKSERVER=0``, or off Linux; then, and whenever no server
answers, the job runs the call itself (:func:`run`), with the same results.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import pickle
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from attnsvm.logs import configure

log = logging.getLogger(__name__)

#: seconds a server without work waits before it exits
IDLE_SECONDS = 30.0
#: seconds a job waits for a server to take its call (a server starting imports everything)
START_SECONDS = 120.0
#: what the server imports (once, before it forks the first child of a call) for a call of
#: each target: everything the call loads, so that no child imports it again
PRELOAD = {
    "attnsvm.sweep.worker:_main": (
        "numpy", "scipy.linalg", "torch", "xarray", "zarr", "attnsvm.config.grid",
        "attnsvm.tasks", "attnsvm.gd.train", "attnsvm.gd.fused", "attnsvm.sweep.store",
    ),
    "attnsvm.sweep.collect:collect_experiment": ("xarray", "zarr", "attnsvm.sweep.collect"),
    "attnsvm.report.derive:write_derived": ("attnsvm.report.derive",),
    "attnsvm.report.text:write_run_info": ("attnsvm.report.text",),
    "attnsvm.report.claims_page:write_claims_page": ("attnsvm.report.claims_page",),
}  # fmt: skip
#: environment variables read when modules are imported (and the fused loop's library
#: loaded): part of a server's identity; a child gets the job's whole environment
IMPORT_ENV = ("PATH", "HOME", "CC", "CXX", "NVCC", "CUDA_HOME", "CUDA_PATH", "XDG_CACHE_HOME",
              "MPLBACKEND", "MPLCONFIGDIR", "ATTNSVM_CACHE", "ATTNSVM_FUSED",
              "ATTNSVM_FUSED_LEVEL")  # fmt: skip
IMPORT_PREFIXES = ("PYTHON", "LD_", "OMP_", "MKL_", "OPENBLAS_", "GOTO", "KMP_", "TORCH",
                   "CUDA_VISIBLE", "NVIDIA_")  # fmt: skip
SWITCH = "ATTNSVM_FORKSERVER"
"""``0`` turns the fork server off (every job imports for itself)."""
_HEADER = struct.Struct("!q")


def code_fingerprint() -> str:
    """attnsvm's version and the size and modification time of each of its files (modules
    and the fused loops' sources): a changed checkout is other code."""
    from attnsvm.provenance import ATTNSVM_VERSION  # importlib.metadata: when a server is asked

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [ATTNSVM_VERSION, root]
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            if name.endswith((".py", ".c", ".cu")):
                st = os.stat(os.path.join(folder, name))
                parts.append(f"{folder[len(root) :]}/{name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def server_key(environ: Mapping[str, str] | None = None) -> str:
    """The identity of the server a job with ``environ`` may use (module docstring)."""
    environ = os.environ if environ is None else environ
    env = sorted((k, v) for k, v in environ.items()
                 if k in IMPORT_ENV or k.startswith(IMPORT_PREFIXES))  # fmt: skip
    body = [sys.executable, sys.version, os.getuid(), code_fingerprint(), env]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:24]


def address(key: str) -> str:
    """The abstract socket of the server ``key`` (Linux: no file, freed with the server)."""
    return f"\0attnsvm-forkserver-{os.getuid()}-{key}"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether jobs use a fork server here (module docstring)."""
    environ = os.environ if environ is None else environ
    return (
        sys.platform == "linux"
        and environ.get(SWITCH, "") != "0"
        and not environ.get("SLURM_JOB_ID")
        and hasattr(socket, "send_fds")
    )


def _target(name: str) -> Callable[..., Any]:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


# ---------------------------------------------------------------------------------- client


def _connect(addr: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(addr)
        return sock
    except OSError:
        sock.close()
        return None


def _start_server(key: str) -> subprocess.Popen | None:
    logfile = os.path.join(tempfile.gettempdir(), f"attnsvm-forkserver-{os.getuid()}-{key}.log")
    try:
        with open(logfile, "w") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "attnsvm.sweep.forkserver", key],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True, cwd="/", close_fds=True,
            )  # fmt: skip
    except OSError as err:
        log.info("no fork server: %s", err)
        return None


def _server(key: str) -> socket.socket | None:
    """A connection to the server ``key``, started if none runs; None if none answers."""
    addr = address(key)
    sock = _connect(addr)
    if sock is not None:
        return sock
    proc = _start_server(key)
    deadline = time.monotonic() + 10.0  # it listens before it imports anything
    while proc is not None and time.monotonic() < deadline:
        sock = _connect(addr)
        if sock is not None:
            return sock
        if proc.poll() is not None:  # lost the race to another server, or failed
            return _connect(addr)
        time.sleep(0.02)
    return None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("closed")
        data += part
    return data


def run(target: str, *args: Any, **kwargs: Any) -> int:
    """Run ``target`` (``"module:function"``) with ``args`` in a child of this machine's fork
    server; its exit status (0 when it returned, 1 when it raised: the traceback is on
    stderr, negative when killed by a signal). Without a server the call runs in a child
    process of this one (``python -m attnsvm.sweep.forkserver --call``), with the same
    exit statuses."""
    sys.stdout.flush()
    sys.stderr.flush()
    code = _via_server(target, args, kwargs) if enabled() else None
    if code is not None:
        return code
    with tempfile.NamedTemporaryFile("wb", suffix=".pickle", delete=False) as fh:
        pickle.dump((target, args, kwargs), fh)
    try:
        return subprocess.call(
            [sys.executable, "-m", "attnsvm.sweep.forkserver", "--call", fh.name],
            stdout=_fd(sys.stdout, 1), stderr=_fd(sys.stderr, 2),
        )  # fmt: skip
    finally:
        os.unlink(fh.name)


def call(target: str, *args: Any, **kwargs: Any) -> None:
    """:func:`run`, for a workflow script: a call that failed ends the job (exit status 1),
    naming it; its traceback is in the job's log."""
    code = run(target, *args, **kwargs)
    if code != 0:
        why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        sys.exit(f"attnsvm: {target} failed ({why}); see the job's log")


def _fd(stream: Any, default: int) -> int:
    try:
        fd = stream.fileno()
        return fd if fd >= 0 else default
    except (AttributeError, OSError, ValueError):
        return default  # e.g. pytest's capture: the process's own descriptor


def _via_server(target: str, args: tuple, kwargs: dict) -> int | None:
    key = server_key()
    sock = _server(key)
    if sock is None:
        return None
    with sock:
        payload = pickle.dumps({"target": target, "args": args, "kwargs": kwargs,
                                "cwd": os.getcwd(), "env": dict(os.environ)})  # fmt: skip
        try:
            socket.send_fds(sock, [_HEADER.pack(len(payload))],
                            [_fd(sys.stdout, 1), _fd(sys.stderr, 2)])  # fmt: skip
            sock.sendall(payload)
            sock.settimeout(START_SECONDS)
            (pid,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))  # the child started
            sock.settimeout(None)
            (code,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
        except (OSError, ConnectionError) as err:
            if "pid" in locals():  # the server died with the child: as a killed child
                log.warning("fork server of child %s gone: %s", locals()["pid"], err)
                return -signal.SIGKILL
            log.info("fork server %s did not take the call: %s", key, err)
            return None
    return int(code)


# ---------------------------------------------------------------------------------- server


def _child(request: dict, fds: list[int], listener: socket.socket, conns: list) -> None:
    """In the forked child: become the job (its files, folder, environment), run its call."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group: killed whole (collect's reader processes too)
        listener.close()
        for c in conns:
            c.close()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        configure()  # attnsvm's log records to stderr: the job's log
        result = _target(request["target"])(*request["args"], **request["kwargs"])
        code = result if isinstance(result, int) and not isinstance(result, bool) else 0
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(key: str) -> None:
    """The server's loop (``python -m attnsvm.sweep.forkserver KEY``): listen, then fork a
    child per call (after importing what the call loads, :data:`PRELOAD`, once) until
    :data:`IDLE_SECONDS` pass without work."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(address(key))
    except OSError:
        return  # another server of this key runs
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    children: dict[int, tuple[socket.socket, int]] = {}
    idle_since = time.monotonic()

    def finish(pid: int, code: int) -> None:
        conn, pidfd = children.pop(pid)
        for obj in (conn, pidfd):
            sel.unregister(obj)
        os.close(pidfd)
        with contextlib.suppress(OSError):
            conn.sendall(_HEADER.pack(code))
        conn.close()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            wait = None if children else IDLE_SECONDS - (time.monotonic() - idle_since)
            if wait is not None and wait <= 0:
                return
            events = sel.select(wait)
            for item, _ in events:
                what = item.data
                if what is None:
                    _accept(listener, sel, children)
                elif what[0] == "child":
                    _, status = os.waitpid(what[1], 0)
                    finish(what[1], os.waitstatus_to_exitcode(status))
                else:  # the job went away (killed): so does its child
                    conn = item.fileobj
                    if conn.recv(1) == b"":
                        with contextlib.suppress(OSError):
                            os.killpg(what[1], signal.SIGKILL)
                        _, status = os.waitpid(what[1], 0)
                        finish(what[1], os.waitstatus_to_exitcode(status))
            if events and not children:  # work ended (not a wait that timed out)
                idle_since = time.monotonic()
    finally:
        for pid in list(children):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def _accept(listener: socket.socket, sel: selectors.BaseSelector, children: dict) -> None:
    conn, _ = listener.accept()
    fds: list[int] = []
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            conn.close()  # only its own user's jobs
            return
        conn.settimeout(30)
        head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 2)
        (size,) = _HEADER.unpack(head)
        request = pickle.loads(_recv_exact(conn, size))
        conn.settimeout(None)
    except (OSError, ConnectionError, ValueError, pickle.PickleError, struct.error):
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    _preload(request["target"])
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(request, fds, listener, [c for c, _ in children.values()] + [conn])
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    children[pid] = (conn, pidfd)
    sel.register(pidfd, selectors.EVENT_READ, ("child", pid))
    sel.register(conn, selectors.EVENT_READ, ("conn", pid))
    with contextlib.suppress(OSError):
        conn.sendall(_HEADER.pack(pid))


_LOADED: set[str] = set()


def _preload(target: str) -> None:
    """Import what a call of ``target`` loads (:data:`PRELOAD`), once per server."""
    if target in _LOADED:
        return
    for name in (*PRELOAD.get(target, ()), target.partition(":")[0]):
        with contextlib.suppress(Exception):  # the child then imports it, and says why not
            importlib.import_module(name)
    if target == "attnsvm.sweep.worker:_main":
        with contextlib.suppress(Exception):
            from attnsvm.gd import fused  # torch: the worker's imports, once per server

            if fused.enabled():
                fused.library()  # built, checked and probed once: every child has it loaded
    _LOADED.add(target)


def _call_main(path: str) -> int:
    """``python -m attnsvm.sweep.forkserver --call FILE``: the call of :func:`run` where no
    server is used, in a process of its own."""
    with open(path, "rb") as fh:
        target, args, kwargs = pickle.load(fh)
    configure()
    result = _target(target)(*args, **kwargs)
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--call"]:
        code = _call_main(sys.argv[2])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no teardown of torch and zarr (~2 s measured under load)
    serve(sys.argv[1])
