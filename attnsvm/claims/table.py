"""Where each interval method of the claims is calibrated: the stored calibration table.

The ledger says PASS or FAIL only from an interval whose coverage is at least the nominal
level minus :data:`TOLERANCE` (docs/science.md §13). The mean's betting interval, the
order-statistic and the exact binomial intervals are valid by construction (their smallest
sizes, where there are any, are computed, not looked up). The slope of a boundary
(:mod:`attnsvm.claims.boundary`, a percentile bootstrap over seeds) is measured by
simulation and stored in ``calibration.json`` next to this module, written by ``attnsvm
claims --calibrate --write`` (:mod:`attnsvm.claims.calibration`); this module only reads it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from scipy import stats

#: the stored table (docs/science.md §13)
TABLE_PATH = Path(__file__).with_name("calibration.json")
#: the largest shortfall of measured coverage below the nominal level that still counts
TOLERANCE = 0.01
#: the sizes searched for an exact method's smallest size
_MAX_EXACT_N = 100_000


@functools.cache
def load(path: str | None = None) -> dict[str, Any]:
    """The calibration table (``calibration.json``, or ``path``)."""
    return json.loads(Path(path or TABLE_PATH).read_text(encoding="utf-8"))


def _level_row(levels: list[float], confidence: float) -> int | None:
    """Index of the smallest tabled level at or above ``confidence`` (None: above all)."""
    above = [i for i, lv in enumerate(levels) if lv >= confidence - 1e-12]
    return min(above, key=lambda i: levels[i]) if above else None


def boundary_n_min(confidence: float) -> int | None:
    """The fewest seeds at which a boundary slope's interval is calibrated at ``confidence``
    (on the table's design, docs/science.md §13); None where no size is, and at a level the
    table does not have: its smallest sizes need not grow with the level, so a level between
    two of its levels is not vouched for by either."""
    entry = load()["methods"]["boundary"]
    exact = [i for i, lv in enumerate(entry["levels"]) if abs(lv - confidence) < 1e-9]
    return entry["n_min"][exact[0]] if exact else None


@functools.cache
def quantile_n_min(q: float, confidence: float) -> int | None:
    """The smallest n with an order-statistic interval of the q-quantile at ``confidence``:
    ``q^n <= a`` and ``(1 - q)^n <= a``, ``a = (1 - confidence) / 2`` (the extreme order
    statistics cover with ``1 - q^n - (1 - q)^n``)."""
    a = (1.0 - confidence) / 2.0
    for n in range(1, _MAX_EXACT_N):
        if q**n <= a + 1e-15 and (1 - q) ** n <= a + 1e-15:
            return n
    return None


def share_bound(n: int, confidence: float) -> float:
    """The exact binomial lower bound of n successes in n trials, ``(a)^(1/n)``, ``a = (1 -
    confidence) / 2``: the most a share of n values can show (1 minus it: the least)."""
    return float(stats.beta.ppf((1.0 - confidence) / 2.0, n, 1)) if n else 0.0
