"""Evaluate claims on an experiment's sweep store: estimates, intervals, verdicts, evidence.

For every claim (:mod:`attnsvm.config.claims`) the cells it is about (``where``) are read from
the sweep (``docs/store.md``), one :class:`Sample` per grid point: the per-seed values of the
ok cells that meet ``given`` and have a value (with the seed of each), and the cells left out,
by reason (failed, nonfinite, missing, not meeting ``given``, no value, with the status of the
SVM behind a missing value). Nothing is dropped silently: every cell of the selected points is
in exactly one count. The kinds of claims (:data:`EVALUATORS`) then compute their rows
(pooled, per point, per group and step of a trend, the fit of a slope) and the verdict
(docs/science.md §13): the seed is the unit, so values of one seed at several points are
resampled together (clusters) or paired, and a pooled interval is never narrower than the
spread of the points it pools. Beside each claim the ledger evaluates its baseline (a control
row that must not PASS).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.claims import boundary as B
from attnsvm.claims import stats as S
from attnsvm.claims import table
from attnsvm.claims.spec import (
    CATEGORICAL,
    Point,
    claim_bounds,
    combined_bounds,
    select_points,
    trend_values,
)
from attnsvm.config.claims import ClaimModel, baseline_claim, claim_hash, condition, holds
from attnsvm.sweep.summary import cell_values

#: why a cell of a selected point gives no value, in the order they are checked
EXCLUDED = ("failed", "nonfinite", "missing", "seen", "not_given", "no_value")
#: prefixes of the per-cell variables that belong to one SVM (``corr_<svm>`` ...)
_SVM_PREFIXES = ("corr_", "rank_", "erank_", "objective_", "feasible_", "mratio_")


class MissingVariableError(KeyError, ValueError):
    """A claim reads a variable its sweep store lacks (results of an earlier attnsvm): one
    line for ``attnsvm claims``, which names the store (a ValueError), never a traceback."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass
class Sample:
    """The cells of one grid point: the values used (``seeds``: the index of each value's
    seed on the sweep's seed axis) and the cells left out, by reason."""

    point: Point
    values: np.ndarray
    cells: int
    excluded: dict[str, int]
    svm_status: dict[str, dict[str, int]] = field(default_factory=dict)
    seeds: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.seeds is None:
            self.seeds = np.arange(len(self.values))


@dataclass
class Row:
    """One line of a claim's evidence: pooled, a point, a group or step of a trend, a fit."""

    level: str
    label: str
    estimate: float
    lo: float
    hi: float
    confidence: float
    method: str
    n_values: int
    n_cells: int
    excluded: dict[str, int]
    verdict: str | None = None
    point: dict[str, Any] | None = None
    basis: tuple = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "label": self.label,
            "point": self.point,
            "verdict": self.verdict,
            "estimate": _num(self.estimate),
            "interval": [_num(self.lo), _num(self.hi)],
            "confidence": self.confidence,
            "method": self.method,
            "n_values": self.n_values,
            "n_cells": self.n_cells,
            "excluded": dict(self.excluded),
            "basis": [dict(b) for b in self.basis],
        }


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


# --------------------------------------------------------------------------- reading the sweep
def _axes(sweep: xr.Dataset) -> dict[str, list[Any]]:
    return {a: sweep[a].values.tolist() for a in sweep.attrs.get("axes", [])}


def _array(sweep: xr.Dataset, name: str) -> np.ndarray:
    """``name`` with dims (grid axes..., seed)."""
    axes = list(sweep.attrs.get("axes", []))
    return np.asarray(sweep[name].transpose(*axes, "seed").values)


def _svm_of(name: str, svms: Sequence[str]) -> str | None:
    for prefix in _SVM_PREFIXES:
        if name.startswith(prefix) and name[len(prefix) :] in svms:
            return name[len(prefix) :]
    return None


class _Reader:
    """Per-cell values of a sweep, as the claims need them."""

    def __init__(self, sweep: xr.Dataset):
        self.sweep = sweep
        self.axes = _axes(sweep)
        self.status = _array(sweep, "status")
        self.n_seeds = int(sweep.sizes["seed"])
        self.svms = sweep["svm"].values.tolist() if "svm" in sweep.coords else []
        self._cache: dict[str, np.ndarray] = {}

    def values(self, name: str) -> np.ndarray:
        """Floats of a numeric variable, or code names (object) of a categorical one."""
        if name not in self._cache:
            if name not in self.sweep:
                raise MissingVariableError(
                    f"has no variable {name!r}: it was computed by an attnsvm that did not "
                    "write it; recompute this experiment's blocks (docs/resume.md)"
                )
            if name in CATEGORICAL:
                raw = _array(self.sweep, name)
                table = CATEGORICAL[name]
                out = np.empty(raw.shape, dtype=object)
                for idx, code in np.ndenumerate(raw):
                    out[idx] = table[code] if 0 <= code < len(table) else None
            else:
                axes = list(self.sweep.attrs.get("axes", []))
                da = cell_values(self.sweep, name).transpose(*axes, "seed")
                out = np.asarray(da.values, dtype=float)
            self._cache[name] = out
        return self._cache[name]

    def svm_status(self, svm: str) -> np.ndarray:
        """Status codes of SVM ``svm`` (dims: grid axes..., seed)."""
        key = f"svm_status/{svm}"
        if key not in self._cache:
            axes = list(self.sweep.attrs.get("axes", []))
            da = self.sweep["svm_status"].sel(svm=svm).transpose(*axes, "seed")
            self._cache[key] = np.asarray(da.values)
        return self._cache[key]

    def index(self, point: Point) -> tuple[int, ...]:
        return tuple(
            next(i for i, v in enumerate(self.axes[k]) if holds("==", v, value))
            for k, value in point
        )


def _claim_values(reader: _Reader, claim: ClaimModel, idx: tuple[int, ...]) -> np.ndarray:
    """Per seed at one point: the claim's value (minus the others), an object array for a
    categorical variable; NaN / None where a cell has none."""
    x = reader.values(claim.variable)[idx]
    if claim.minus is None:
        return x
    others = [claim.minus] if isinstance(claim.minus, str) else list(claim.minus)
    stack = np.stack([reader.values(m)[idx] for m in others])
    return x - stack.max(axis=0)  # NaN anywhere: NaN (not solved, not a number)


def _meets(value: Any, cond: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    op, operand = condition(cond)
    return holds(op, value, operand)


def fresh_seeds(claim: ClaimModel) -> tuple[tuple[int, int] | None, str | None]:
    """The seeds a claim was written against (``written_against.seeds``, to be left out)
    and why it is exploratory (None: it is decided on the other seeds): no record of the run
    it was written against, or a text changed since (docs/science.md §13)."""
    w = claim.written_against
    if w is None:
        return None, "no written_against: the run it was written against is not recorded"
    if w.hash != claim_hash(claim):
        return None, f"its text changed since written_against ({w.hash} != {claim_hash(claim)})"
    return (w.seeds[0], w.seeds[1]), None


def read_samples(
    reader: _Reader, claim: ClaimModel, points: Sequence[Point],
    seen: tuple[int, int] | None = None,
) -> list[Sample]:  # fmt: skip
    """One :class:`Sample` per point (module docstring): the used values are the claim's
    values, or 0/1 whether they meet ``per_seed`` for a share; cells of a seed in ``seen``
    (first, last) are left out as ``seen``."""
    seed_values = np.asarray(reader.sweep["seed"].values) if "seed" in reader.sweep else None
    ok = codes.CELL_STATUS.index("ok")
    names = [claim.variable]
    names += [claim.minus] if isinstance(claim.minus, str) else list(claim.minus or [])
    svms = [s for s in (_svm_of(n, reader.svms) for n in names) if s]
    out = []
    for point in points:
        idx = reader.index(point)
        status = reader.status[idx]
        values = _claim_values(reader, claim, idx)
        given = {k: reader.values(k)[idx] for k in claim.given}
        excluded = dict.fromkeys(EXCLUDED, 0)
        svm_status: dict[str, dict[str, int]] = {s: {} for s in svms}
        used, seeds = [], []
        for s, code in enumerate(status):
            if code != ok:
                known = 0 <= code < len(codes.CELL_STATUS)
                excluded[codes.CELL_STATUS[code] if known else "missing"] += 1
                continue
            if (
                seen is not None
                and seed_values is not None
                and (seen[0] <= int(seed_values[s]) <= seen[1])
            ):
                excluded["seen"] += 1
                continue
            if not all(_meets(given[k][s], cond) for k, cond in claim.given.items()):
                excluded["not_given"] += 1
                continue
            v = values[s]
            if v is None or (isinstance(v, float) and not math.isfinite(v)):
                excluded["no_value"] += 1
                for svm in svms:
                    name = codes.SVM_STATUS[reader.svm_status(svm)[idx][s]]
                    svm_status[svm][name] = svm_status[svm].get(name, 0) + 1
                continue
            used.append(float(_meets(v, claim.per_seed)) if claim.aggregate == "share" else v)
            seeds.append(s)
        out.append(Sample(point, np.asarray(used, dtype=float), len(status), excluded,
                          svm_status, np.asarray(seeds, dtype=int)))  # fmt: skip
    return out


# --------------------------------------------------------------------------- intervals
def _label(point: Point) -> str:
    return ", ".join(f"{k}={v}" for k, v in point) or "all cells"


def _sum_excluded(samples: Sequence[Sample]) -> dict[str, int]:
    return {k: sum(s.excluded[k] for s in samples) for k in EXCLUDED}


def _agg(claim: ClaimModel) -> S.Aggregate:
    return S.aggregate_function(claim.aggregate, claim.q)


def _estimate(claim: ClaimModel, samples: Sequence[Sample]) -> float:
    """The aggregate of every used value of ``samples`` (a mean: of the seeds' averages)."""
    if claim.aggregate == "mean":
        u = _cluster_means(samples)[1]
        return float(u.mean()) if len(u) else math.nan
    values = np.concatenate([s.values for s in samples]) if samples else np.array([])
    return float(_agg(claim)(values, -1)) if len(values) else math.nan


def _cluster_means(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """The seeds with a value at one or more of ``samples`` and each one's average over
    them (the seed as the unit: its values at several points are one cluster)."""
    if not samples:
        return np.array([], dtype=int), np.array([])
    seeds = np.concatenate([s.seeds for s in samples])
    values = np.concatenate([s.values for s in samples])
    keys, inverse = np.unique(seeds, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=len(keys))
    return keys, sums / np.bincount(inverse, minlength=len(keys))


def _point_interval(claim, sample: Sample, level: float, seed: int) -> S.Interval:
    return S.aggregate_interval(claim.aggregate, sample.values, level, claim.q,
                                claim_bounds(claim))  # fmt: skip


def _spread(claim, samples: Sequence[Sample]) -> tuple[float, float] | None:
    estimates = [_estimate(claim, [s]) for s in samples if len(s.values)]
    return (min(estimates), max(estimates)) if len(estimates) > 1 else None


def pooled_interval(claim, samples: Sequence[Sample], level: float, seed: int) -> S.Interval:
    """The interval of the claim's aggregate pooled over several points at ``level``
    (docs/science.md §13): a mean over the seeds' averages across the points (seeds as
    clusters), widened to the spread of the points' estimates; a median, quantile or share
    as the union of the points' intervals at the Bonferroni level."""
    if len(samples) == 1:
        return _point_interval(claim, samples[0], level, seed)
    estimate = _estimate(claim, samples)
    if claim.aggregate == "mean":
        _, u = _cluster_means(samples)
        iv = S.mean_iv(u, level, claim_bounds(claim))
        if not iv.defined:
            return replace(iv, estimate=estimate)
        iv = replace(iv, method=f"{S.MEAN} over seed clusters")
        spread = _spread(claim, samples)
        return S.widen(iv, *spread, "widened to the points' spread") if spread else iv
    each = S.bonferroni(level, len(samples))
    parts = [_point_interval(claim, s, each, seed) for s in samples]
    return S.union(parts, estimate, level)


# --------------------------------------------------------------------------- rows
def _row(level, label, interval: S.Interval, samples, verdict=None, point=None) -> Row:
    return Row(
        level, label, interval.estimate, interval.lo, interval.hi, interval.confidence,
        interval.method, sum(len(s.values) for s in samples), sum(s.cells for s in samples),
        _sum_excluded(samples), verdict, point, interval.basis,
    )  # fmt: skip


@dataclass
class Outcome:
    """A claim's verdict, its headline row and every row of evidence."""

    verdict: str
    headline: Row
    rows: list[Row]


Seeder = Callable[[str], int]


def _level(claim, samples: list[Sample], seed: Seeder, axes) -> Outcome:
    """Level claim (docs/science.md §13): each grid point at the Bonferroni level over the
    points; ``scope: every`` needs every point, ``scope: pooled`` decides on the pooled
    interval (:func:`pooled_interval`), the points' verdicts showing which fail."""
    c = claim.confidence
    c_point = S.bonferroni(c, len(samples))
    points = []
    for s in samples:
        iv = _point_interval(claim, s, c_point, seed(_label(s.point)))
        v = S.verdict(iv.lo, iv.hi, claim.op, claim.threshold)
        points.append(_row("point", _label(s.point), iv, [s], v, dict(s.point)))
    if claim.scope == "every" or len(samples) == 1:
        head = _deciding(points, claim.op, claim.threshold)
        return Outcome(S.combine([r.verdict for r in points]), head, points)
    if claim.aggregate == "mean":
        pooled_iv = pooled_interval(claim, samples, c, seed("pooled"))
    else:  # the union of the points' intervals above
        ivs = [S.Interval(r.estimate, r.lo, r.hi, r.confidence, r.method, r.n_values, r.basis)
               for r in points]  # fmt: skip
        pooled_iv = S.union(ivs, _estimate(claim, samples), c)
    pooled = _row("pooled", "pooled", pooled_iv, samples,
                  S.verdict(pooled_iv.lo, pooled_iv.hi, claim.op, claim.threshold))  # fmt: skip
    return Outcome(pooled.verdict, pooled, [pooled, *points])


def _deciding(rows: Sequence[Row], op: str, threshold: Any) -> Row:
    """The row that decides a verdict that needs every row: the first failing one, else the
    first inconclusive one, else the one whose interval is closest to the threshold."""
    for wanted in ("FAIL", "INCONCLUSIVE"):
        for r in rows:
            if r.verdict == wanted:
                return r
    return min(rows, key=lambda r: _margin(r, op, threshold))


def _margin(row: Row, op: str, threshold: Any) -> float:
    """How far a passing interval lies inside the predicted side."""
    if op == "between":
        return min(row.lo - threshold[0], threshold[1] - row.hi)
    return row.lo - threshold if op in (">=", ">") else threshold - row.hi


def _groups(claim, axes, samples: list[Sample], points) -> list[tuple[Any, list]]:
    values = trend_values(axes, points, claim.along, claim.order)
    return [(v, [s for s in samples if holds("==", dict(s.point)[claim.along], v)]) for v in values]


def _group_rows(claim, groups, seed) -> list[Row]:
    rows = []
    for v, members in groups:
        iv = pooled_interval(claim, members, claim.confidence, seed(f"{claim.along}={v}"))
        rows.append(_row("group", f"{claim.along}={v}", iv, members, point={claim.along: v}))
    return rows


def _others(point: Point, along: str) -> Point:
    return tuple((k, v) for k, v in point if k != along)


def _per_seed(samples: Sequence[Sample]) -> dict[int, float]:
    keys, u = _cluster_means(samples)
    return dict(zip(keys.tolist(), u.tolist(), strict=True))


def _paired(groups_values: Sequence[dict[int, float]]) -> tuple[list[int], np.ndarray]:
    """The seeds with a value in every group and their values (seeds, groups)."""
    common = sorted(set.intersection(*(set(g) for g in groups_values)))
    return common, np.array([[g[s] for g in groups_values] for s in common]).reshape(
        len(common), len(groups_values)
    )


def _sub_estimates(claim, groups, weights) -> list[float]:
    """``sum_j w_j mean_j`` at each combination of the other axes present in every group:
    the steps or slopes that a pooled one averages (its interval covers their spread)."""
    by_other = [{_others(s.point, claim.along): s for s in g} for _, g in groups]
    shared = set.intersection(*(set(b) for b in by_other))
    out = []
    for key in shared:
        means = [_estimate(claim, [b[key]]) for b in by_other]
        if all(math.isfinite(m) for m in means):
            out.append(float(np.dot(weights, means)))
    return out if len(out) > 1 else []


def _paired_interval(claim, groups, weights, level, seed: int, what: str) -> S.Interval:
    """``sum_j w_j mean_j`` of a mean along a trend: per seed over the seeds with a value in
    every group (paired), widened to the spread of the same at each combination of the
    other axes."""
    seeds, u = _paired([_per_seed(g) for _, g in groups])
    per_seed = u @ np.asarray(weights) if len(seeds) else np.array([])
    bounds = claim_bounds(claim)
    bounds = combined_bounds(bounds, weights) if bounds is not None else None
    iv = S.mean_iv(per_seed, level, bounds)
    if not iv.defined:
        return iv
    iv = replace(iv, method=f"{S.MEAN} of {what} per seed")
    spread = _sub_estimates(claim, groups, weights)
    if spread:
        iv = S.widen(iv, min(spread), max(spread), "widened to the other axes' spread")
    return iv


def _monotone(claim, samples, seed, axes, points) -> Outcome:
    """Monotone trend: every step between consecutive axis values moves in ``direction``, up
    to ``tolerance`` against it, each step at the Bonferroni level over the steps
    (docs/science.md §13): a step of means on the paired seeds, any other as the difference
    of the two groups' intervals."""
    groups = _groups(claim, axes, samples, points)
    sign = 1.0 if claim.direction == "increasing" else -1.0
    c_step = S.bonferroni(claim.confidence, len(groups) - 1)
    steps = []
    for (a, ga), (b, gb) in zip(groups, groups[1:], strict=False):
        label = f"{claim.along}: {a} -> {b}"
        est = sign * (_estimate(claim, gb) - _estimate(claim, ga))
        if claim.aggregate == "mean":
            iv = _paired_interval(claim, [(a, ga), (b, gb)], [-sign, sign], c_step,
                                  seed(label), "steps")  # fmt: skip
            iv = replace(iv, estimate=est)
        else:
            each = S.bonferroni(c_step, 2)
            ia = pooled_interval(claim, ga, each, seed(f"{label}/a"))
            ib = pooled_interval(claim, gb, each, seed(f"{label}/b"))
            iv = S.difference(ia, ib, sign, c_step, est)
        v = S.verdict(iv.lo, iv.hi, ">=", -claim.tolerance)
        steps.append(_row("step", label, iv, [*ga, *gb], v))
    head = _deciding(steps, ">=", -claim.tolerance)
    rows = [*_group_rows(claim, groups, seed), *steps]
    return Outcome(S.combine([r.verdict for r in steps]), head, rows)


def _slope(claim, samples, seed, axes, points) -> Outcome:
    """Slope (an exponent with ``x: log, y: log``) of the aggregate against the axis: least
    squares over the axis values; its interval from the per-seed slopes for a mean on a
    linear y, else from the groups' intervals at the Bonferroni level (the extremes of the
    slope over their box; docs/science.md §13)."""
    groups = _groups(claim, axes, samples, points)
    x = np.array([float(v) for v, _ in groups])
    x = np.log(x) if claim.x == "log" else x
    w = S.ols_weights(x)
    everyone = [s for _, g in groups for s in g]
    label = f"slope along {claim.along} ({claim.x} x, {claim.y} y)"
    y = np.array([_estimate(claim, g) for _, g in groups])
    if claim.y == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), np.nan)
    est = float(np.dot(w, y))
    if claim.aggregate == "mean" and claim.y == "linear":
        iv = replace(_paired_interval(claim, groups, w, claim.confidence, seed("slope"),
                                      "slopes"), estimate=est)  # fmt: skip
    else:
        each = S.bonferroni(claim.confidence, len(groups))
        ivs = [pooled_interval(claim, g, each, seed(f"{claim.along}={v}/fit")) for v, g in groups]
        iv = S.combination(w, ivs, claim.confidence, est, log=claim.y == "log")
    fit = _row("fit", label, iv, everyone, S.verdict(iv.lo, iv.hi, claim.op, claim.threshold))
    return Outcome(fit.verdict, fit, [*_group_rows(claim, groups, seed), fit])


def _boundary(claim, samples, seed, axes, points) -> Outcome:
    """Boundary (docs/science.md §15, eq. (15.14); :mod:`attnsvm.claims.boundary`): per value
    of ``along`` the ``across`` value where the seeds' mean crosses ``level``, and the slope
    of log boundary against log ``along``; intervals from resampling the seeds that have a
    value at every grid point (other axes averaged per seed)."""
    along = trend_values(axes, points, claim.along, claim.order)
    across = trend_values(axes, points, claim.across, None)
    cells = {}
    for a in along:
        for c in across:
            members = [s for s in samples if holds("==", dict(s.point)[claim.along], a)
                       and holds("==", dict(s.point)[claim.across], c)]  # fmt: skip
            cells[(repr(a), repr(c))] = _per_seed(members)
    seeds, u = _paired(list(cells.values()))
    values = u.reshape(len(seeds), len(along), len(across))
    x_along, x_across = np.array(along, dtype=float), np.array(across, dtype=float)
    fit = B.boundary_fit(x_along, x_across, values, claim.level,
                         claim.direction == "decreasing", claim.confidence,
                         seed("boundary"))  # fmt: skip
    method = f"percentile bootstrap over {len(seeds)} seeds ({B.BOOTSTRAP} resamples)"
    rows = []
    for j, a in enumerate(along):
        members = [s for s in samples if holds("==", dict(s.point)[claim.along], a)]
        b = (float(fit[k][j]) for k in ("bounds", "bounds_lo", "bounds_hi"))
        iv = S.Interval(*b, claim.confidence, method, len(seeds))
        rows.append(_row("group", f"{claim.across}* at {claim.along}={a}", iv, members,
                         point={claim.along: a}))  # fmt: skip
    need = table.boundary_n_min(claim.confidence)
    lo, hi = fit["slope_lo"], fit["slope_hi"]
    if need is None or len(seeds) < max(need, B.MIN_SEEDS):
        lo = hi = math.nan
        why = f"{method}: no calibrated boundary interval at {claim.confidence:.4g}" + (
            "" if need is None else f" below {max(need, B.MIN_SEEDS)} seeds"
        )
    elif math.isnan(lo):
        why = f"{method}; the boundary lies outside the grid in {fit['undefined']:.0%} of them"
    else:
        why = method
    basis = ({"method": S.BOUNDARY, "n": len(seeds), "level": claim.confidence},)
    iv = S.Interval(fit["slope"], lo, hi, claim.confidence, why, len(seeds), basis)
    label = f"slope of log {claim.across}* against log {claim.along}"
    head = _row("fit", label, iv, samples, S.verdict(iv.lo, iv.hi, claim.op, claim.threshold))
    return Outcome(head.verdict, head, [*rows, head])


#: how each kind of claim is evaluated (docs/claims.md, "A new kind of claim"):
#: ``(claim, samples, seeder, axes, points) -> Outcome``
EVALUATORS: Mapping[str, Callable[..., Outcome]] = {
    "level": lambda claim, samples, seed, axes, points: _level(claim, samples, seed, axes),
    "monotone": _monotone,
    "slope": _slope,
    "boundary": _boundary,
}


def outcome(claim: ClaimModel, samples: list[Sample], axes, points, seeder: Seeder) -> Outcome:
    """The rows and verdict of ``claim`` on ``samples`` (one per point of ``points``; none:
    INCONCLUSIVE, e.g. a baseline at grid points a store does not have)."""
    if not samples:
        row = _row("pooled", "no grid point", S.Interval.none(claim.confidence, "no grid point"),
                   [])  # fmt: skip
        return Outcome("INCONCLUSIVE", row, [row])
    return EVALUATORS[claim.kind](claim, samples, seeder, axes, points)


# --------------------------------------------------------------------------- baselines
def apply_null(claim: ClaimModel, null: str | None, samples: list[Sample], rng) -> list[Sample]:
    """``samples`` under a baseline's null model (:data:`attnsvm.config.claims.NULLS`):
    ``shuffle`` deals the values of the points that differ only along the trend's axis out
    again at random (each point keeps its number of values and their seeds: no trend is left,
    whatever cells are missing), ``sign`` gives each seed's deviation from the threshold a
    random sign (the same at every point: no effect is left)."""
    if null is None:
        return samples
    out = [replace(s, values=s.values.copy()) for s in samples]
    if null == "sign":
        n_seeds = 1 + max((int(s.seeds.max()) for s in out if len(s.seeds)), default=0)
        t = float(np.mean(claim.threshold))
        flips = rng.choice([-1.0, 1.0], size=n_seeds)
        for s in out:
            s.values = t + flips[s.seeds] * (s.values - t)
        return out
    by_other: dict[Point, list[Sample]] = {}
    for s in out:
        by_other.setdefault(_others(s.point, claim.along), []).append(s)
    for members in by_other.values():
        pooled = rng.permutation(np.concatenate([m.values for m in members]))
        start = 0
        for m in members:
            m.values = pooled[start : start + len(m.values)]
            start += len(m.values)
    return out


def baseline_entry(reader: _Reader, claim: ClaimModel, seeder: Seeder,
                   seen: tuple[int, int] | None = None) -> dict | None:  # fmt: skip
    """The control row of a claim: its baseline evaluated like the claim, on the same seeds
    (None without)."""
    base = baseline_claim(claim)
    if base is None:
        return None
    points = select_points(reader.axes, base.where)
    samples = read_samples(reader, base, points, seen)
    rng = np.random.default_rng(seeder("baseline/null"))
    samples = apply_null(base, claim.baseline.null_model, samples, rng)
    res = outcome(base, samples, reader.axes, points, lambda label: seeder(f"baseline/{label}"))
    head = res.headline
    return {
        "name": claim.baseline.name,
        **{k: v for k, v in claim.baseline.model_dump(mode="json").items() if k != "name"},
        "verdict": res.verdict,
        "passes": res.verdict == "PASS",
        "estimate": _num(head.estimate),
        "interval": [_num(head.lo), _num(head.hi)],
        "interval_confidence": head.confidence,
        "method": head.method,
        "decided_by": head.label,
        "n_values": sum(len(s.values) for s in samples),
        "n_cells": sum(s.cells for s in samples),
        "excluded": _sum_excluded(samples),
        "basis": [dict(b) for b in head.basis],
    }


# --------------------------------------------------------------------------- the entry
def evaluate_claim(
    sweep: xr.Dataset | _Reader, claim: ClaimModel, experiment: str, confidence: float | None
    = None,
) -> dict:  # fmt: skip
    """The ledger entry of one claim (docs/claims.md, "The ledger"): the claim as written,
    its verdict, headline estimate and interval, the counts of cells used and left out,
    every row of evidence and its control row (:func:`baseline_entry`).
    ``confidence``: evaluate at this level instead of the claim's (the family-wise gate)."""
    reader = sweep if isinstance(sweep, _Reader) else _Reader(sweep)
    if confidence is not None:
        claim = claim.model_copy(update={"confidence": confidence})
    points = select_points(reader.axes, claim.where)
    seen, exploratory = fresh_seeds(claim)
    samples = read_samples(reader, claim, points, seen)
    if seen is not None and not any(len(s.values) for s in samples):
        exploratory = f"every cell's seed is one it was written against ({seen[0]}..{seen[1]})"
        seen = None
        samples = read_samples(reader, claim, points)

    def seed(label: str) -> int:
        return S.seed_of(experiment, claim.name, label)

    res = outcome(claim, samples, reader.axes, points, seed)
    head = res.headline
    svm_status: dict[str, dict[str, int]] = {}
    for s in samples:
        for svm, counts in s.svm_status.items():
            into = svm_status.setdefault(svm, {})
            for k, n in counts.items():
                into[k] = into.get(k, 0) + n
    entry = {
        "experiment": experiment,
        **claim.model_dump(mode="json"),
        "verdict": res.verdict,
        "exploratory": exploratory,
        "estimate": _num(head.estimate),
        "interval": [_num(head.lo), _num(head.hi)],
        "interval_confidence": head.confidence,
        "method": head.method,
        "decided_by": head.label,
        "n_points": len(samples),
        "n_cells": sum(s.cells for s in samples),
        "n_values": sum(len(s.values) for s in samples),
        "excluded": _sum_excluded(samples),
        "no_value_svm_status": svm_status,
        "rows": [r.as_dict() for r in res.rows],
    }
    if confidence is None:
        entry["control"] = baseline_entry(reader, claim, seed, seen)
    return entry


def evaluate_claims(sweep: xr.Dataset, claims: Sequence[ClaimModel], experiment: str) -> list:
    """Every claim of an experiment on its sweep (:func:`evaluate_claim`)."""
    reader = _Reader(sweep)
    return [evaluate_claim(reader, c, experiment) for c in claims]
