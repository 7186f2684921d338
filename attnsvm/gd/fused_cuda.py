"""The fused training loop on a CUDA GPU (docs/science.md §3, "Fused step").

``fused_cuda.cu`` is fused.c's arithmetic with one GPU thread per seed instead of one vector
lane: the same operations in the same order (explicit fma, nothing else contracted, the loop's
own exp), so a seed's W(k) and softmax have the same bits as the CPU's fused loop, whatever the
GPU or the batch; the checkpoint loss calls the GPU's log1p (within an ulp of libm's). The
whole run of a batch is one kernel launch: no per-step launches, no host synchronization.

It is built once per machine and GPU architecture with nvcc (``$NVCC``, else ``nvcc`` on PATH,
else ``$CUDA_HOME/bin/nvcc`` or ``/usr/local/cuda/bin/nvcc``) into the cache of
:mod:`attnsvm.gd.native`, named by the architecture (``sm_90``) and a hash of the source, the
flags and the compiler's version, and launched with ctypes on torch's current stream. Where no
nvcc works, :func:`library` is None and CUDA training takes the torch loop. It runs, like the
CPU's loop, by default where it applies (:func:`attnsvm.gd.fused.applies`; not with
``ATTNSVM_FUSED=0``).

The same source builds for the host with a C++ compiler (:func:`host_library`): the tests run
the GPU's arithmetic on the CPU against fused.c, bit for bit, on machines without a GPU.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.gd import native

SOURCE = Path(__file__).with_name("fused_cuda.cu")
#: IEEE double arithmetic in program order: no multiply-add contraction beyond the source's
#: explicit fma() calls (division and square root of doubles are IEEE in CUDA by default)
NVCC_FLAGS = ("-O3", "-std=c++17", "--fmad=false", "-shared", "-Xcompiler", "-fPIC")
HOST_FLAGS = ("-O2", "-x", "c++", "-std=c++17", "-ffp-contract=off", "-fno-fast-math",
              "-fno-math-errno", "-fPIC", "-shared")  # fmt: skip
#: threads per block of the kernel (one seed per thread)
THREADS = 128
#: why a library is missing, once a build has failed (for messages and benches)
UNAVAILABLE: list[str] = []

_I32, _DBL, _PTR = ctypes.c_int, ctypes.c_double, ctypes.c_void_p
#: ctypes types of the kernel's arguments (fused_cuda.cu, TRAIN_ARGS)
_TRAIN_ARGS = [_I32] * 5 + [_PTR] * 5 + [_DBL] * 4 + [_I32, _PTR, _I32] + [_PTR] * 5


def nvcc() -> str | None:
    """The CUDA compiler: ``$NVCC``, ``nvcc`` on PATH, ``$CUDA_HOME/bin/nvcc`` or
    ``/usr/local/cuda/bin/nvcc``; None where there is none."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    for name in (os.environ.get("NVCC"), "nvcc", str(Path(home) / "bin" / "nvcc")):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cxx() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++"):
        if name and shutil.which(name):
            return name
    return None


#: the probe call of a library before it is loaded (:func:`attnsvm.gd.native.probe`): no GPU
#: work, only the host code's size of a seed's scratch space
PROBE = "assert lib.attnsvm_seed_work(2, 3, 4, 0) > 0\n"


def _seed_work(lib: ctypes.CDLL) -> None:
    lib.attnsvm_seed_work.argtypes = [_I32] * 4
    lib.attnsvm_seed_work.restype = ctypes.c_size_t


@functools.cache
def library(arch: str) -> ctypes.CDLL | None:
    """The GPU loop built for ``arch`` (e.g. ``"sm_90"``, :func:`arch_of`), or None."""
    compiler = nvcc()
    if compiler is None:
        UNAVAILABLE.append("no CUDA compiler ($NVCC, nvcc, $CUDA_HOME/bin/nvcc) found")
        return None
    command = (compiler, *NVCC_FLAGS, f"-arch={arch}")  # its version: in the key (native)
    lib = native.compiled(f"fusedcuda-{arch}", command, SOURCE, UNAVAILABLE, calls=PROBE)
    if lib is None:
        return None
    lib.attnsvm_train_linear_cuda.argtypes = [_I32, _PTR, _I32, *_TRAIN_ARGS]
    lib.attnsvm_train_linear_cuda.restype = _I32
    _seed_work(lib)
    return lib


@functools.cache
def host_library() -> ctypes.CDLL | None:
    """The same source built for this CPU with its C++ compiler (tests), or None."""
    compiler = _cxx()
    if compiler is None:
        UNAVAILABLE.append("no C++ compiler ($CXX, c++ or g++) on PATH")
        return None
    lib = native.compiled("fusedcuda-host", (compiler, *HOST_FLAGS), SOURCE, UNAVAILABLE,
                          libs=("-lm",), calls=PROBE)  # fmt: skip
    if lib is None:
        return None
    lib.attnsvm_train_linear_host.argtypes = _TRAIN_ARGS
    lib.attnsvm_train_linear_host.restype = _I32
    _seed_work(lib)
    return lib


def arch_of(device: torch.device) -> str:
    """The nvcc architecture of a CUDA device, e.g. ``"sm_90"`` for an H100."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def available(device: torch.device) -> bool:
    """Whether the GPU loop is built (or can be) for this CUDA device."""
    return device.type == "cuda" and library(arch_of(device)) is not None


def _seed_inner(t: Tensor, S: int) -> Tensor:
    """``t`` (S, ...) as a contiguous (prod(...), S) float64 tensor: the seed innermost."""
    return t.reshape(S, -1).t().to(torch.float64).contiguous()


def train(
    data: tuple, theta0: Tensor, settings: Any, ks: list[int], iterations: int, eps: float,
    ridge: float, host: bool = False,
) -> list[Tensor]:  # fmt: skip
    """The run of :func:`attnsvm.gd.train._descend` (``freeze=False``) as one kernel launch.

    ``data`` (X, Y, Z, v, V) and ``theta0`` (:func:`attnsvm.gd.model.pack`'s layout) float64
    tensors on a CUDA device (``host=True``: CPU tensors, run by :func:`host_library`).
    Returns ``[W (S,C,d,d), softmax (S,C,n,T), loss (S,C), alive (S,), bad_at (S,)]`` on the
    same device, as :func:`attnsvm.gd.fused.train` does; a seed that is not alive has
    meaningless values (train_batch trains it again with the freeze).
    """
    dev = theta0.device
    lib = host_library() if host else library(arch_of(dev))
    if lib is None:
        raise RuntimeError(f"the GPU fused loop is unavailable: {'; '.join(UNAVAILABLE)}")
    X, Y, Z, v = data[:4]
    S, n, T, d = X.shape
    if settings.param == "KQ":  # (2, S, d, m) -> (S, 2, d, m)
        m = theta0.shape[-1]
        theta = _seed_inner(theta0.permute(1, 0, 2, 3), S)
    else:
        m = 0
        theta = _seed_inner(theta0, S)
    C = len(ks)
    f64 = {"dtype": torch.float64, "device": dev}
    Wout = torch.empty((C * d * d, S), **f64)
    sout = torch.empty((C * n * T, S), **f64)
    lout = torch.empty((C, S), **f64)
    probe = torch.empty((S,), **f64)
    work = torch.empty((lib.attnsvm_seed_work(n, T, d, m), S), **f64)
    ks_t = torch.as_tensor(np.asarray(ks, dtype=np.int32)).to(dev)
    inputs = [_seed_inner(t, S) for t in (X, Y, Z, v)]
    args = [S, n, T, d, m, *(t.data_ptr() for t in (*inputs, theta)),
            float(settings.lr), float(eps), float(np.finfo(np.float64).tiny), float(ridge),
            int(iterations), ks_t.data_ptr(), C,
            *(t.data_ptr() for t in (Wout, sout, lout, probe, work))]  # fmt: skip
    if host:
        rc = lib.attnsvm_train_linear_host(*args)
    else:
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        stream = torch.cuda.current_stream(dev).cuda_stream
        rc = lib.attnsvm_train_linear_cuda(index, stream, THREADS, *args)
    if rc != 0:
        raise RuntimeError(f"the GPU fused loop failed to launch on {dev}: CUDA error {rc}")
    ok = probe == 0.0
    bad_at = torch.where(ok, -1, torch.zeros(S, dtype=torch.int64, device=dev))
    W = Wout.t().reshape(S, C, d, d)
    s = sout.t().reshape(S, C, n, T)
    return [W, s, lout.t().contiguous(), ok, bad_at]
