"""How the fused loop is chosen and built, without torch: the values of ``ATTNSVM_FUSED`` and
the instruction-set levels of the CPU build (docs/science.md §3, "Fused step").

:mod:`attnsvm.gd.fused` builds and runs the loop; this module holds what the environment check
(:mod:`attnsvm.sweep.environment`, run by ``attnsvm check-config`` and at the workflow's start)
needs to validate ``ATTNSVM_FUSED`` and ``ATTNSVM_FUSED_LEVEL`` without importing torch.
"""

from __future__ import annotations

import os
from pathlib import Path

#: the values of ``ATTNSVM_FUSED``: the default (the fused loop up to
#: :data:`attnsvm.gd.fused.MAX_STEP_SIZE`), on at every size, off
MODES = {"": "default", "1": "on", "0": "off"}


#: (name, extra flags, CPU flags it needs) of the builds, best first: an x86-64 CPU takes the
#: first whose flags /proc/cpuinfo lists; every other machine the generic build. A build's
#: vector (fused.c's ``LANES`` seeds, one register wide: 8 in AVX-512's 32 registers, 4 in
#: AVX2's 16) and its register tiles (``TILE_MAX``) are sized so that a product's
#: accumulators stay in registers: at x86-64-v3, 8 seeds in two registers per value and
#: 4 x 4 tiles spilled to memory (measured in commit 6288e3c's message; the loop against its
#: floor: BENCHMARKS.md, "Training step against its arithmetic floor"). Neither changes a
#: bit: a seed's operations are the same in any lane and any tiling (fused.c).
LEVELS = (
    ("x86-64-v4", ("-march=x86-64-v4", "-mtune=generic", "-DLANES=8", "-DTILE_MAX=4"),
     ("avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd", "avx2", "fma", "bmi1", "bmi2",
      "f16c", "movbe", "abm", "xsave")),
    ("x86-64-v3", ("-march=x86-64-v3", "-mtune=generic", "-DLANES=4", "-DTILE_MAX=2"),
     ("avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm", "xsave", "avx")),
    ("generic", ("-DLANES=8", "-DTILE_MAX=4"), ()),
)  # fmt: skip


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def level(flags: set[str] | None = None) -> str:
    """The build a CPU with these feature flags (default: this one's) runs, the first of
    :data:`LEVELS` it has every flag of; ``ATTNSVM_FUSED_LEVEL`` names another it can run
    (for tests and comparisons). Every level gives the same bits (docs/science.md §3, "Fused
    step")."""
    flags = cpu_flags() if flags is None else flags
    usable = [name for name, _, needs in LEVELS if all(f in flags for f in needs)]
    forced = os.environ.get("ATTNSVM_FUSED_LEVEL")
    if forced:
        if forced not in usable:  # never run an instruction the CPU lacks
            names = [name for name, _, _ in LEVELS]
            raise ValueError(f"ATTNSVM_FUSED_LEVEL={forced!r}: this CPU runs {usable} of {names}")
        return forced
    return usable[0]
