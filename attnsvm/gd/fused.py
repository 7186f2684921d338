"""The fused training loop: the whole GD run of a batch in one compiled call (docs/science.md
§3, "Fused step").

At the paper's sizes a step of :class:`attnsvm.gd.model.Objective` is some 45-60 torch
operations on a few kflop per seed, so it costs per-operation overhead, not arithmetic. For the
common case (linear head, normalized GD, W or K Q^T, float64 on the CPU, every token attended,
the stable form) the loop of :func:`attnsvm.gd.train.train_batch` runs instead in
``fused.c``: the same formulas in C, all steps in one call, vectorized across seeds (eight
seeds per vector, the seed innermost in memory, so every scalar operation of a seed is one
vector operation over eight; a seed's bits do not depend on its batch or on the vector
instructions used).

The library is built once per machine with its C compiler (``$CC``, else ``cc`` or ``gcc``)
into a cache directory (``$ATTNSVM_CACHE``, else ``~/.cache/attnsvm``), one build per
instruction-set level (:data:`LEVELS`: AVX-512, AVX2 + FMA, or generic C; chosen from the
CPU's flags by :func:`level`), named by the level and a hash of the source and the flags, so a
cache shared by different nodes never hands a node instructions it lacks. It is loaded with
ctypes (no torch headers; a build takes a few seconds). Every level gives the same bits.
Where no compiler works, :func:`library` is None and training takes the torch loop: the numbers
then differ in the last bits (other rounding order), never in what is computed.

The loop is the default wherever it applies (up to a step size :data:`MAX_STEP_SIZE`) and
builds; ``ATTNSVM_FUSED=0`` in the environment asks for the torch loop everywhere, and
``ATTNSVM_FUSED=1`` for the fused loop at every size (:func:`mode`). Its bits do not depend on
the CPU's instruction set (nor on the GPU, fused_cuda.cu), whereas the torch loop's depend on
the kernels torch picks for the CPU (``ATEN_CPU_CAPABILITY``) and on its version; some chaotic
E6 cells amplify last-bit differences of either kind (docs/science.md §4 "Stored values across
solver changes"). Each trained cell's ``device`` names the loop that computed it
(:func:`describe`), so a store mixing the two (a node without a compiler) says which cells came
from which.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnsvm.config.fields import DEFAULTS
from attnsvm.config.settings import stage_fields
from attnsvm.gd import fused_cuda, native

# the build's levels and the variables' values live without torch (attnsvm.sweep.environment
# checks them); cpu_flags is part of this module's interface too
from attnsvm.gd.build import LEVELS, MODES, cpu_flags, level  # noqa: F401

SOURCE = Path(__file__).with_name("fused.c")
#: IEEE arithmetic in program order: no fast-math, no contraction beyond the source's explicit
#: fma() calls (errno is never read: sqrt stays one instruction)
FLAGS = ("-O3", "-std=gnu11", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math",
         "-fno-math-errno", "-Wno-psabi")  # fmt: skip
#: why the library is missing, once :func:`library` has failed (for messages and benches)
UNAVAILABLE: list[str] = []


def mode() -> str:
    """How ``ATTNSVM_FUSED`` sets the loop: ``"default"`` (unset or empty: the fused loop up to
    :data:`MAX_STEP_SIZE`), ``"on"`` (``1``: at every size, e.g. for benchmarks) or ``"off"``
    (``0``: the torch loop everywhere).

    Raises ValueError naming the variable for any other value (a typo must not pick a loop
    silently)."""
    value = os.environ.get("ATTNSVM_FUSED", "").strip()
    if value not in MODES:
        raise ValueError(
            f"ATTNSVM_FUSED={value!r}: leave it unset (the default), or 1 (the fused loop at "
            "every size) or 0 (the torch loop)"
        )
    return MODES[value]


def enabled() -> bool:
    """Whether the fused loop may run at all: unless ``ATTNSVM_FUSED=0`` (:func:`mode`)."""
    return mode() != "off"


def describe(device: str) -> str:
    """The ``device`` a cell records when the fused loop trained it (``"cpu, fused loop"``)."""
    return f"{device}, fused loop"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc"):
        if name and shutil.which(name):
            return name
    return None


#: the probe call of a library before it is loaded (:func:`attnsvm.gd.native.probe`): its ISA
#: and vector width, and its vectorized exp over one vector and a tail (a library built for
#: another CPU level, or damaged, dies here in a child process, not in the worker)
PROBE = """
d = ctypes.c_double * 19
x, y = d(*[-0.5 * i for i in range(19)]), d()
lib.attnsvm_isa(); lib.attnsvm_lanes(); lib.attnsvm_exp(19, x, y)
assert all(0.0 < v <= 1.0 for v in y), list(y)
"""


@functools.cache
def library() -> ctypes.CDLL | None:
    """The compiled fused loop for this CPU's :func:`level`, built on first use (module
    docstring), or None."""
    cc = _compiler()
    if cc is None:
        UNAVAILABLE.append("no C compiler ($CC, cc or gcc) on PATH")
        return None
    name = level()
    flags = (*FLAGS, *dict((n, f) for n, f, _ in LEVELS)[name])
    lib = native.compiled(f"fused-{name}", (cc, *flags), SOURCE, UNAVAILABLE, libs=("-lm",),
                          calls=PROBE)  # fmt: skip
    if lib is None:
        return None
    fn = lib.attnsvm_train_linear
    dbl, i32 = ctypes.c_double, ctypes.c_int
    ptr = ctypes.c_void_p
    fn.argtypes = [i32] * 5 + [ptr] * 5 + [dbl] * 4 + [i32, ptr, i32, ptr, ptr, ptr, ptr, ptr]
    fn.restype = i32
    lib.attnsvm_exp.argtypes = [i32, ptr, ptr]
    lib.attnsvm_exp.restype = None
    lib.attnsvm_isa.argtypes = []
    lib.attnsvm_isa.restype = i32
    lib.attnsvm_lanes.argtypes = []
    lib.attnsvm_lanes.restype = i32
    return lib


def lanes() -> int:
    """Seeds per vector of this machine's build (fused.c's ``LANES``, :data:`LEVELS`): the
    loop trains blocks of that many seeds, a partial last block padded."""
    lib = library()
    if lib is None:
        raise RuntimeError(f"the fused loop is unavailable: {'; '.join(UNAVAILABLE)}")
    return int(lib.attnsvm_lanes())


def exp(x: np.ndarray) -> np.ndarray:
    """The fused loop's own exp (``vexp`` in fused.c; docs/science.md §3, "Fused step") of a
    float64 array, for tests."""
    lib = library()
    if lib is None:
        raise RuntimeError(f"the fused loop is unavailable: {'; '.join(UNAVAILABLE)}")
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    lib.attnsvm_exp(x.size, _ptr(x), _ptr(out))
    return out


#: largest ``n d (d + T)`` (a seed's step is some tens of times that many flops) at which the
#: loop applies: there a step is mostly per-operation overhead in the torch loop, and the fused
#: loop is faster even for one seed (it pays for a whole vector of :func:`lanes` seeds); above
#: it the torch loop's products are the faster route for a few seeds and on a GPU
#: (docs/science.md §3, "Fused step"; measured in BENCHMARKS.md). E2 is 1,080, E6 at most 6,840.
MAX_STEP_SIZE = 16384


def step_size(n: int, T: int, d: int) -> int:
    """``n d (d + T)``: the size of one seed's step that :data:`MAX_STEP_SIZE` bounds."""
    return n * d * (d + T)


def left_out(model: Any) -> tuple[str, ...]:
    """The train fields away from their defaults that ``model`` does not declare in its
    ``FUSED_FIELDS`` (:mod:`attnsvm.gd.model`): a cell with any trains in the torch loop,
    which reads every field, until the fused loop learns them (docs/extending.md)."""
    settings, allowed = model.settings, model.FUSED_FIELDS
    return tuple(
        name for name in stage_fields("train")
        if name not in allowed and settings[name] != DEFAULTS[name]
    )  # fmt: skip


def decide(model: Any, gradient: str = "analytic") -> tuple[bool, tuple[str, ...]]:
    """Whether the fused loop trains ``model`` (on the CPU fused.c, on a CUDA device
    fused_cuda.cu, :mod:`attnsvm.gd.fused_cuda`), and the fields that kept an otherwise
    fitting model out of it (:func:`left_out`; the block's log names them and the cell's
    ``device`` says so, :func:`describe_left_out`).

    The loop applies to a model that declares its fields (``FUSED_FIELDS``), with a linear
    head, normalized GD, W or K Q^T, float64, the stable form, every token attended and, by
    default, a step size up to :data:`MAX_STEP_SIZE` (``ATTNSVM_FUSED=1``: at every size,
    :func:`mode`). The answer depends on the cells' settings and shape, never on the batch,
    so a seed's bits never depend on its batch."""
    use, settings, batch = mode(), model.settings, model.batch
    shape = tuple(batch.X.shape[1:4])
    device = batch.X.device
    if not (
        model.FUSED_FIELDS
        and (use == "on" or (use == "default" and step_size(*shape) <= MAX_STEP_SIZE))
        and device.type in ("cpu", "cuda")
        and gradient == "analytic"
        and settings.head == "linear"
        and settings.optimizer == "normalized"
        and settings.param in ("W", "KQ")
        and settings.dtype == "float64"
        and model.stable
        and batch.mask is None
    ):
        return False, ()
    missing = left_out(model)
    if missing:
        return False, missing
    return (library() is not None if device.type == "cpu" else fused_cuda.available(device)), ()


def applies(model: Any, gradient: str = "analytic") -> bool:
    """Whether the fused loop trains ``model`` (:func:`decide`)."""
    return decide(model, gradient)[0]


def describe_left_out(device: str, fields: tuple[str, ...]) -> str:
    """The ``device`` a cell records when :func:`left_out` fields kept it in the torch loop."""
    return f"{device}, torch loop ({', '.join(fields)} not in the fused loop)"


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def train(
    model: Any, theta0: Tensor, ks: list[int], iterations: int, eps: float,
    progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Tensor], Tensor, Tensor]:  # fmt: skip
    """The run of :func:`attnsvm.gd.train.descend` (``freeze=False``) of a
    :class:`~attnsvm.gd.model.SingleHead` ``model`` in the fused loop, from ``theta0``
    (:func:`attnsvm.gd.model.pack`'s layout, float64).

    Returns ``({"W": (S,C,d,d), "softmax": (S,C,n,T), "loss": (S,C)}, alive (S,), bad_at
    (S,))`` as torch tensors; as with the torch loop, a seed that is not alive has meaningless
    values (:func:`attnsvm.gd.train.train` trains it again with the freeze). CUDA tensors run
    the GPU loop (:func:`attnsvm.gd.fused_cuda.train`), with the results on that device.

    The compiled call runs in a worker thread (ctypes releases the GIL) while this thread
    waits, so that Ctrl-C (KeyboardInterrupt) and other signal handlers run at once: the loop
    is then told to stop before its next step, and the exception goes on. ``progress(steps)``
    is called with the steps done since its last call, as the loop advances (at most every
    0.1 s, and once at the end: ``iterations`` in all).
    """
    b, settings, ridge = model.batch, model.settings, model.ridge
    data = (b.X, b.Y, b.Z, b.v, b.V)
    if theta0.device.type == "cuda":  # one kernel launch: progress when it returns
        W, s, loss, ok, bad_at = fused_cuda.train(data, theta0, settings, ks, iterations, eps,
                                                  ridge)  # fmt: skip
        if progress is not None and iterations:
            progress(iterations)
        return {"W": W, "softmax": s, "loss": loss}, ok, bad_at
    lib = library()
    if lib is None:
        raise RuntimeError(f"the fused loop is unavailable: {'; '.join(UNAVAILABLE)}")
    X, Y, Z, v = (np.ascontiguousarray(t.numpy(), dtype=np.float64) for t in data[:4])
    S, n, T, d = X.shape
    if settings.param == "KQ":  # (2, S, d, m) -> (S, 2, d, m)
        theta = np.ascontiguousarray(theta0.numpy().transpose(1, 0, 2, 3))
        m = theta.shape[-1]
    else:
        theta = np.array(theta0.numpy(), dtype=np.float64, order="C")
        m = 0
    C = len(ks)
    ks_arr = np.asarray(ks, dtype=np.int32)
    W = np.zeros((S, C, d, d))
    s = np.zeros((S, C, n, T))
    loss = np.zeros((S, C))
    alive = np.zeros(S, dtype=np.int32)
    tiny = float(np.finfo(np.float64).tiny)
    ctl = np.zeros(2, dtype=np.int64)  # [stop, steps begun] (fused.c)
    args = (
        S, n, T, d, m, _ptr(X), _ptr(Y), _ptr(Z), _ptr(v), _ptr(theta),
        float(settings.lr), float(eps), tiny, float(ridge), int(iterations),
        _ptr(ks_arr), C, _ptr(W), _ptr(s), _ptr(loss), _ptr(alive), _ptr(ctl),
    )  # fmt: skip
    blocks = -(-S // int(lib.attnsvm_lanes()))
    rc = _run_stoppable(lib.attnsvm_train_linear, args, ctl, iterations, blocks, progress)
    if rc != 0:
        raise MemoryError("the fused loop could not allocate its scratch space")
    ok = torch.from_numpy(alive.astype(bool))
    bad_at = torch.where(ok, -1, torch.zeros(S, dtype=torch.int64))
    out = {"W": torch.from_numpy(W), "softmax": torch.from_numpy(s), "loss": torch.from_numpy(loss)}
    return out, ok, bad_at


def _run_stoppable(
    fn: Callable[..., int],
    args: tuple,
    ctl: np.ndarray,
    iterations: int,
    blocks: int,
    progress: Callable[[int], None] | None,
) -> int:
    """``fn(*args)`` in a worker thread; this thread reports progress from ``ctl[1]`` (steps
    begun over ``blocks`` blocks of ``iterations + 1`` steps) and, on any exception here
    (Ctrl-C), sets ``ctl[0]`` so that the loop stops, waits for it and re-raises."""
    out: list[int] = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)), name="attnsvm-fused")
    total, reported = blocks * (iterations + 1), 0
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
            if progress is not None and iterations:
                done = min(iterations, int(ctl[1]) * iterations // total)
                if done > reported:
                    progress(done - reported)
                    reported = done
    except BaseException:
        ctl[0] = 1  # the loop returns before its next step
        worker.join()
        raise
    if progress is not None and iterations > reported:
        progress(iterations - reported)
    return out[0]
