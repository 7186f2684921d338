"""The ``ATTNSVM_*`` environment variables: the one list of them, and their validation.

A variable with a typo in its value (``ATTNSVM_FUSED=yes``) or in its name (``ATTNSVM_FUSD``)
must not turn every trained cell of a sweep into a failure, nor silently pick another loop:
:func:`check_environment` refuses it with one line naming the variable, what it holds and
what it may hold. It runs once per run, before any block: in ``attnsvm check-config``,
``attnsvm run-cell``, when the workflow parses its config, and in each block's worker (a
cluster node's environment may differ from the submitting one: there the block stops as an
environmental failure, recomputed by the next run once the variable is fixed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from attnsvm.config.errors import ConfigError
from attnsvm.failures import EnvironmentFailure
from attnsvm.gd.build import LEVELS, MODES, cpu_flags

PREFIX = "ATTNSVM_"


class EnvironmentVariableError(ConfigError, EnvironmentFailure):
    """An ``ATTNSVM_*`` variable that attnsvm does not know or whose value is not allowed: a
    bad input where it is checked before any work, an environmental failure in a worker."""


@dataclass(frozen=True)
class Variable:
    """One ``ATTNSVM_*`` variable: what it does, and why a value is refused (None: any)."""

    name: str
    doc: str
    check: Callable[[str], str | None] | None = None


def _fused(value: str) -> str | None:
    if value.strip() in MODES:
        return None
    return "leave it unset (the default), or 1 (the fused loop at every size) or 0 (the torch loop)"


def _level(value: str) -> str | None:
    names = [name for name, _, _ in LEVELS]
    flags = cpu_flags()
    usable = [name for name, _, needs in LEVELS if all(f in flags for f in needs)]
    if value == "" or value in usable:
        return None
    if value in names:
        return f"this CPU runs only {', '.join(usable)} of the builds {', '.join(names)}"
    return f"one of the builds {', '.join(names)} that this CPU runs ({', '.join(usable)})"


def _folder(value: str) -> str | None:
    if value and os.path.exists(value) and not os.path.isdir(value):
        return "a folder (or a path to create one), not a file"
    return None


def _off(value: str) -> str | None:
    return None if value in ("", "0", "1") else "leave it unset (or 1), or 0 (off)"


#: the faults a test can inject into block jobs (attnsvm.sweep.worker.FAULT_ENV)
FAULTS = ("kill", "enospc", "raise", "segv")


def _fault(value: str) -> str | None:
    if value == "" or re.fullmatch(rf"({'|'.join(FAULTS)}):.+", value):
        return None
    return f"<fault>:<part of a block name>, <fault> one of {', '.join(FAULTS)} (tests only)"


#: every ``ATTNSVM_*`` variable attnsvm, its tests and its benchmarks read
VARIABLES = (
    Variable("ATTNSVM_FUSED", "the training loop: unset the default, 1 the fused loop at every "
             "size, 0 the torch loop (attnsvm.gd.fused)", _fused),
    Variable("ATTNSVM_FUSED_LEVEL", "the fused loop's instruction-set build, one this CPU runs "
             "(tests and comparisons; attnsvm.gd.build)", _level),
    Variable("ATTNSVM_CACHE", "the folder of the compiled loops (default ~/.cache/attnsvm)",
             _folder),
    Variable("ATTNSVM_FORKSERVER", "0: every workflow job imports for itself, no fork server "
             "(attnsvm.sweep.forkserver)", _off),
    Variable("ATTNSVM_FAULT_INJECT", "tests: a fault injected into block jobs", _fault),
    Variable("ATTNSVM_BENCH_COMMIT", "benchmarks: the commit a table names"),
    Variable("ATTNSVM_BENCH_TABLES", "benchmarks: the folder tables are written to"),
    Variable("ATTNSVM_BENCH_TMP", "benchmarks: the folder of their temporary files"),
    Variable("ATTNSVM_SLURM_STATE", "tests: the local SLURM cluster's folder"),
    Variable("ATTNSVM_SLURM_PORT", "tests: the local SLURM cluster's port"),
    Variable("ATTNSVM_SLURM_GPUS", "tests: GPUs of the local SLURM cluster's node"),
)  # fmt: skip
KNOWN = {v.name: v for v in VARIABLES}


def problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per ``ATTNSVM_*`` variable of ``environ`` (default: this process's) that is
    unknown or holds a value it may not hold, naming it, its value and what is allowed."""
    environ = os.environ if environ is None else environ
    out = []
    for name in sorted(k for k in environ if k.startswith(PREFIX)):
        value = environ[name]
        var = KNOWN.get(name)
        if var is None:
            out.append(f"{name}={value!r}: no such variable; attnsvm reads {', '.join(KNOWN)}")
            continue
        why = var.check(value) if var.check is not None else None
        if why:
            out.append(f"{name}={value!r}: {why}")
    return out


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`EnvironmentVariableError` naming the first bad ``ATTNSVM_*`` variable
    (:func:`problems`), before any work."""
    found = problems(environ)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise EnvironmentVariableError(found[0] + more)
