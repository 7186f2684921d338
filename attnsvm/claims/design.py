"""Whether a claim's configured seeds can decide it, and how many seeds would (§13).

A verdict needs a calibrated interval (:mod:`attnsvm.claims.table`) narrow enough to lie on
one side of the threshold. Before any run, the seeds of an experiment fix how narrow its
intervals can be: :func:`decidability` evaluates the claim (the same code as the ledger,
:mod:`attnsvm.claims.evaluate`) on *ideal* outcomes at the configured number of seeds per
grid point: values far on the predicted side (every seed meeting the per-seed condition for
a share; a trend's groups far apart in its direction), and the same on the other side. A
claim that cannot PASS on its ideal outcome, or cannot FAIL on the opposite one, is
INCONCLUSIVE by design at those seeds. The seeds that would decide it are the smallest
number at which the ideal outcomes give PASS and FAIL: for a mean or a quantile at least the
calibrated sizes of the intervals it is built from (and as many as a finite interval needs:
a bootstrap of 3 values has too few distinct resamples to bound a tail), for a share the
exact binomial bound of the ideal outcome (a share >= 0.99 needs 368 seeds all meeting the
condition at 0.95).
The analysis assumes every cell meets the claim's ``given``: cells that do not are counted
apart (``not_given``), so a claim with ``given`` is decidable only if at least
:func:`seeds_needed` cells per grid point meet it. :func:`design_text` says so before the run,
and :func:`given_shortfall` after it, when too few did.

``attnsvm check-config`` prints one line per claim (:func:`design_text`); the ledger stores
the analysis with each claim (``design``), and ``attnsvm claims`` and the report say which
INCONCLUSIVE verdicts are INCONCLUSIVE by design and how many seeds would decide each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attnsvm.claims import stats as S
from attnsvm.claims import table
from attnsvm.claims.evaluate import EXCLUDED, Sample, outcome
from attnsvm.claims.spec import Point, claim_bounds, select_points, trend_values
from attnsvm.config.claims import ClaimModel, holds

#: the most seeds per grid point searched for a share
MAX_SEEDS = 1_000_000
#: how far (in units of the values' spread) an ideal outcome lies from the threshold: so far
#: that only the method itself (no calibrated or no finite interval) keeps it undecided
_FAR = 1000.0
#: the same for the slope of a logarithm (whose values are exp of it): 10 slopes of 1% noise
_FAR_LOG = 10.0


def _noise(n: int, point: int) -> np.ndarray:
    """n spread values of one grid point, deterministic (a fixed generator per point and
    size), distinct at every point so that paired differences and averages stay spread."""
    return np.random.default_rng([point, n]).standard_normal(n)


def _level_target(claim, passing: bool) -> float:
    """The ideal value of a level claim (a share for ``share``)."""
    op, t = claim.op, claim.threshold
    if op == "between":
        a, b = t
        if claim.aggregate == "share":
            return (a + b) / 2 if passing else (0.0 if a > 0 else 1.0)
        return (a + b) / 2 if passing else b + _FAR * (b - a + 1)
    up = op in (">=", ">")
    if claim.aggregate == "share":
        return 1.0 if up == passing else 0.0
    return t + _FAR if up == passing else t - _FAR


def _targets(claim, groups: Sequence[Any], passing: bool) -> list[float]:
    """The ideal aggregate of each group of a trend, in its order."""
    J = len(groups)
    rank = np.arange(J) / (J - 1)
    if claim.kind == "monotone":
        rising = (claim.direction == "increasing") == passing
        if claim.aggregate == "share":
            return list(rank if rising else rank[::-1])
        return list(_FAR * J * (rank if rising else rank[::-1]))
    x = np.array([float(v) for v in groups])
    x = np.log(x) if claim.x == "log" else x
    far = _FAR_LOG if claim.y == "log" else _FAR
    if claim.op == "between":
        slope = sum(claim.threshold) / 2 if passing else claim.threshold[1] + far
    else:
        up = claim.op in (">", ">=")
        slope = claim.threshold + (far if up == passing else -far)
    if claim.aggregate == "share":
        floor = 0.05 if claim.y == "log" else 0.0
        span = (x - x.min()) / (x.max() - x.min())
        return list(floor + (1 - floor) * (span if slope > 0 else 1 - span))
    y = slope * (x - x.mean())
    return list(np.exp(y) if claim.y == "log" else y)


def _boundary_targets(claim, axes, points: Sequence[Point], passing: bool) -> dict:
    """The ideal values of a boundary claim: ``level exp(-+(log c - log c*(a)))`` through the
    level at ``c*(a)``, the geometric middle of the ``across`` grid times ``(a / a_mid)`` to
    the ideal slope (the middle of ``between``, else past the threshold)."""
    along = np.array(trend_values(axes, points, claim.along, claim.order), dtype=float)
    across = np.array(trend_values(axes, points, claim.across, None), dtype=float)
    if claim.op == "between":
        slope = sum(claim.threshold) / 2 if passing else claim.threshold[1] + 1.0
    else:
        up = claim.op in (">", ">=")
        slope = claim.threshold + (1.0 if up == passing else -1.0)
    sign = -1.0 if claim.direction == "decreasing" else 1.0
    mid_a, mid_c = np.exp(np.log(along).mean()), np.exp(np.log(across).mean())
    out = {}
    for p in points:
        a, c = float(dict(p)[claim.along]), float(dict(p)[claim.across])
        star = mid_c * (a / mid_a) ** slope
        out[p] = claim.level * float(np.exp(sign * 0.25 * np.log(c / star)))
    return out


def ideal_samples(
    claim: ClaimModel, axes: Mapping[str, Sequence[Any]], points: Sequence[Point], n: int,
    passing: bool,
) -> list[Sample]:  # fmt: skip
    """One sample of n seeds per point on the claim's ideal outcome (module docstring)."""
    if claim.kind == "level":
        target = {p: _level_target(claim, passing) for p in points}
    elif claim.kind == "boundary":
        target = _boundary_targets(claim, axes, points, passing)
    else:
        order = trend_values(axes, points, claim.along, claim.order)
        values = dict(zip(map(repr, order), _targets(claim, order, passing), strict=True))
        target = {}
        for p in points:
            v = dict(p)[claim.along]
            key = next((repr(u) for u in order if holds("==", v, u)), None)
            if key is not None:
                target[p] = values[key]
    bounds = claim_bounds(claim) if claim.aggregate == "mean" else None
    if bounds is not None and claim.kind in ("monotone", "slope") and target:
        # a bounded mean: the trend spread over the range (past it, the values are cut)
        t = np.array(list(target.values()))
        span = t.max() - t.min() or 1.0
        lo, hi = bounds
        target = {p: lo + (hi - lo) * (v - t.min()) / span for p, v in target.items()}
    out = []
    for i, p in enumerate(points):
        if p not in target:
            continue
        z = _noise(n, i)
        t = target[p]
        if claim.aggregate == "share":
            k = int(round(t * n))
            vals = np.r_[np.ones(k), np.zeros(n - k)]
        elif (claim.kind == "slope" and claim.y == "log") or claim.kind == "boundary":
            vals = t * np.exp(0.01 * z)
        else:
            scale = (
                (claim.threshold[1] - claim.threshold[0]) / 1000
                if (claim.kind == "level" and claim.op == "between" and passing)
                else 1.0
            )
            vals = t + scale * z
            if bounds is not None:  # the ideal of a bounded mean: at its range's ends
                vals = np.clip(t if claim.kind != "level" else vals, *bounds) * np.ones(n)
        out.append(Sample(p, vals, n, dict.fromkeys(EXCLUDED, 0),
                          seeds=np.arange(n)))  # fmt: skip
    return out


def _outcome(claim, axes, points, n: int, passing: bool):
    samples = ideal_samples(claim, axes, points, n, passing)
    kept = [s.point for s in samples]
    return outcome(claim, samples, axes, kept, lambda label: S.seed_of("design", label))


def _deciding_rows(claim, res) -> list:
    """The rows a verdict rests on: a pooled claim's pooled row, else every row with a
    verdict (the points of ``every``, the steps, the fit)."""
    if claim.kind == "level" and claim.scope == "pooled":
        return [res.headline]
    return [r for r in res.rows if r.verdict is not None]


def _verdict(claim, axes, points, n: int, passing: bool) -> tuple[str, tuple]:
    res = _outcome(claim, axes, points, n, passing)
    return res.verdict, tuple(b for r in _deciding_rows(claim, res) for b in r.basis)


def decided_bases(claim: ClaimModel, axes: Mapping[str, Sequence[Any]], seeds: int) -> list:
    """The calibrated intervals (method, number of values, level) of the rows that decide
    on the claim's ideal outcomes at ``seeds`` per grid point: what its ledger decides at
    (before a run; ``attnsvm claims --calibrate``)."""
    points = select_points(axes, claim.where)
    out = []
    for passing in (True, False):
        res = _outcome(claim, axes, points, seeds, passing)
        rows = _deciding_rows(claim, res)
        out += [b for r in rows if r.verdict in ("PASS", "FAIL") for b in r.basis]
    return out


def _n_needed(bases: Sequence[dict]) -> int | None:
    """The seeds at which every interval of ``bases`` is calibrated (None: never)."""
    need = 1
    for b in bases:
        if b["method"] == S.QUANTILE:
            m = table.quantile_n_min(b.get("q") or 0.5, b["level"])
        elif b["method"] == S.BOUNDARY:
            m = table.boundary_n_min(b["level"])
        else:
            continue
        if m is None:
            return None
        need = max(need, m)
    return need


def _search(claim, axes, points, passing: bool, have: int, now: bool) -> int | None:
    """The smallest seeds per point at which the ideal outcome gives the verdict (a share:
    exponential search, then bisection; the verdict is monotone in the seeds)."""
    want = "PASS" if passing else "FAIL"
    if now:
        lo, hi = 0, have
    else:
        lo, hi = have, max(2 * have, 2)
        while _verdict(claim, axes, points, hi, passing)[0] != want:
            lo, hi = hi, hi * 2
            if hi > MAX_SEEDS:
                return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _verdict(claim, axes, points, mid, passing)[0] == want:
            hi = mid
        else:
            lo = mid
    return hi


def decidability(claim: ClaimModel, axes: Mapping[str, Sequence[Any]], seeds: int) -> dict:
    """Whether ``seeds`` per grid point can decide ``claim`` (module docstring):
    ``{"seeds", "can_pass", "can_fail", "seeds_to_pass", "seeds_to_fail"}`` (None: no
    number of seeds does)."""
    points = select_points(axes, claim.where)
    out: dict[str, Any] = {"seeds": seeds}
    for key, passing in (("pass", True), ("fail", False)):
        verdict, bases = _verdict(claim, axes, points, seeds, passing)
        now = verdict == ("PASS" if passing else "FAIL")
        if claim.aggregate == "share":
            need = _search(claim, axes, points, passing, seeds, now)
        elif now:  # decided here: from the calibrated sizes on (a bootstrap is not searched)
            need = min(_n_needed(bases) or seeds, seeds)
        elif _n_needed(bases) is None:
            need = None  # a level no tabled size is calibrated at
        else:  # calibrated sizes, then as many as the ideal outcome needs to decide
            need = _search(claim, axes, points, passing, max(seeds, _n_needed(bases) - 1), now)
        out[f"can_{key}"] = now
        out[f"seeds_to_{key}"] = need
    return out


def seeds_needed(design: Mapping[str, Any]) -> int | None:
    """The seeds per grid point at which both PASS and FAIL are possible (None: never)."""
    a, b = design["seeds_to_pass"], design["seeds_to_fail"]
    return None if a is None or b is None else max(a, b)


def by_design(design: Mapping[str, Any] | None) -> bool:
    """Whether the configured seeds cannot decide the claim either way."""
    return design is not None and not (design["can_pass"] and design["can_fail"])


def given_text(given: Mapping[str, Any]) -> str:
    """A claim's ``given`` as a reader writes it: ``ambiguous == 0, n_relevant > 1``."""
    parts = []
    for key, cond in given.items():
        pairs = cond.items() if isinstance(cond, Mapping) else [("==", cond)]
        parts += [f"{key} {op} {value}" for op, value in pairs]
    return ", ".join(parts)


def design_text(
    name: str, design: Mapping[str, Any], cells: int | None = None,
    given: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    """One line for ``attnsvm check-config``: ``e2_local/w_direction: decidable with 8
    seeds per grid point`` or ``... cannot PASS with 6 seeds per grid point (24 cells); needs
    368``; with the claim's ``given``, the cells per grid point that must meet it."""
    n = design["seeds"]
    have = f"{n} seeds per grid point" + (f" ({cells} cells)" if cells else "")
    if design["can_pass"] and design["can_fail"]:
        if given:
            need = seeds_needed(design) or n
            meet = f"at least {need} cells per grid point meet its given ({given_text(given)})"
            return f"{name}: decidable with {have} if {meet}; the others are counted apart"
        return f"{name}: decidable with {have}"
    cannot = [v for v, ok in (("PASS", design["can_pass"]), ("FAIL", design["can_fail"]))
              if not ok]  # fmt: skip
    need = seeds_needed(design)
    needs = f"needs {need}" if need is not None else "no number of seeds decides it"
    return f"{name}: cannot {' or '.join(cannot)} with {have}; {needs}"


def given_shortfall(entry: Mapping[str, Any]) -> str | None:
    """After a run: ``INCONCLUSIVE: 9 of 16 cells do not meet its given; at least 6 per grid
    point meeting it would decide it`` for an INCONCLUSIVE claim its seeds could decide but
    whose cells met ``given`` too rarely (None otherwise)."""
    d = entry.get("design")
    dropped = (entry.get("excluded") or {}).get("not_given", 0)
    if entry.get("verdict") != "INCONCLUSIVE" or d is None or by_design(d) or not dropped:
        return None
    need = seeds_needed(d) or d["seeds"]
    per_point = [r["n_values"] for r in entry.get("rows") or [] if "n_values" in r]
    fewest = min(per_point) if per_point else entry["n_values"] // max(entry["n_points"], 1)
    if fewest >= need:
        return None
    return (
        f"INCONCLUSIVE: {dropped} of {entry['n_cells']} cells do not meet its given; at "
        f"least {need} per grid point meeting it would decide it"
    )
