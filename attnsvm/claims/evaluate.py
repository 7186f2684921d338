"""Evaluate claims on an experiment's sweep store: estimates, intervals, verdicts, evidence.

For every claim (:mod:`attnsvm.config.claims`) the cells it is about (``where``) are read from
the sweep (``docs/store.md``), one :class:`Sample` per grid point: the per-seed values of the
ok cells that meet ``given`` and have a value, and the cells left out, by reason (failed,
nonfinite, missing, not meeting ``given``, no value, with the status of the SVM behind a
missing value). Nothing is dropped silently: every cell of the selected points is in exactly
one count. The kinds of claims (:data:`EVALUATORS`) then compute their rows (pooled, per
point, per step of a trend, the fit of a slope) and the verdict (docs/science.md §13).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.claims import stats as S
from attnsvm.claims.spec import CATEGORICAL, Point, select_points, trend_values
from attnsvm.config.claims import ClaimModel, condition, holds
from attnsvm.sweep.summary import cell_values

#: why a cell of a selected point gives no value, in the order they are checked
EXCLUDED = ("failed", "nonfinite", "missing", "not_given", "no_value")
#: prefixes of the per-cell variables that belong to one SVM (``corr_<svm>`` ...)
_SVM_PREFIXES = ("corr_", "rank_", "erank_", "objective_", "feasible_", "mratio_")


@dataclass
class Sample:
    """The cells of one grid point: the values used and the cells left out, by reason."""

    point: Point
    values: np.ndarray
    cells: int
    excluded: dict[str, int]
    svm_status: dict[str, dict[str, int]] = field(default_factory=dict)


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
        self.svms = sweep["svm"].values.tolist() if "svm" in sweep.coords else []
        self._cache: dict[str, np.ndarray] = {}

    def values(self, name: str) -> np.ndarray:
        """Floats of a numeric variable, or code names (object) of a categorical one."""
        if name not in self._cache:
            if name not in self.sweep:
                raise KeyError(f"the sweep store has no variable {name!r}")
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


def read_samples(reader: _Reader, claim: ClaimModel, points: Sequence[Point]) -> list[Sample]:
    """One :class:`Sample` per point (module docstring): the used values are the claim's
    values, or 0/1 whether they meet ``per_seed`` for a share."""
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
        used = []
        for s, code in enumerate(status):
            if code != ok:
                known = 0 <= code < len(codes.CELL_STATUS)
                excluded[codes.CELL_STATUS[code] if known else "missing"] += 1
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
        out.append(Sample(point, np.asarray(used, dtype=float), len(status), excluded, svm_status))
    return out


# --------------------------------------------------------------------------- rows
def _label(point: Point) -> str:
    return ", ".join(f"{k}={v}" for k, v in point) or "all cells"


def _sum_excluded(samples: Sequence[Sample]) -> dict[str, int]:
    return {k: sum(s.excluded[k] for s in samples) for k in EXCLUDED}


def _strata(samples: Sequence[Sample]) -> list[np.ndarray]:
    """The bootstrap strata of a group of points: each point's values, except that points with
    a single value are resampled together (a stratum needs two values to be resampled), and
    a lone one joins the largest stratum."""
    strata = [s.values for s in samples if len(s.values) > 1]
    single = [s.values for s in samples if len(s.values) == 1]
    if len(single) > 1:
        strata.append(np.concatenate(single))
    elif single and strata:
        k = max(range(len(strata)), key=lambda i: len(strata[i]))
        strata[k] = np.concatenate([strata[k], single[0]])
    elif single:
        strata.append(single[0])
    return strata


def _interval(claim: ClaimModel, samples: Sequence[Sample], confidence: float, seed: int):
    """The claim's aggregate over ``samples`` and its interval (:mod:`attnsvm.claims.stats`)."""
    strata = _strata(samples)
    n = sum(len(v) for v in strata)
    if claim.aggregate == "share":
        return S.binomial_interval(int(sum(v.sum() for v in strata)), n, confidence)
    if n < S.MIN_VALUES:
        estimate = float(_agg(claim)(np.concatenate(strata), -1)) if n else math.nan
        return S.Interval.none(confidence, f"fewer than {S.MIN_VALUES} values", estimate)
    agg = _agg(claim)
    return S.bootstrap_interval(
        strata, lambda xs, axis: agg(np.concatenate(xs, axis=axis), axis), confidence, seed
    )


def _agg(claim: ClaimModel) -> S.Aggregate:
    return S.aggregate_function(claim.aggregate, claim.q)


def _row(level, label, interval, samples, verdict=None, point=None) -> Row:
    return Row(
        level, label, interval.estimate, interval.lo, interval.hi, interval.confidence,
        interval.method, sum(len(s.values) for s in samples), sum(s.cells for s in samples),
        _sum_excluded(samples), verdict, point,
    )  # fmt: skip


@dataclass
class Outcome:
    """A claim's verdict, its headline row and every row of evidence."""

    verdict: str
    headline: Row
    rows: list[Row]


def _level(claim, samples: list[Sample], seed: Callable[[str], int]) -> Outcome:
    """Level claim: pooled over the selected cells and per grid point (docs/science.md §13)."""
    c = claim.confidence
    pooled_iv = _interval(claim, samples, c, seed("pooled"))
    pooled = _row("pooled", "pooled", pooled_iv, samples,
                  S.verdict(pooled_iv.lo, pooled_iv.hi, claim.op, claim.threshold))  # fmt: skip
    c_point = S.bonferroni(c, len(samples)) if claim.scope == "every" else c
    points = []
    for s in samples:
        iv = _interval(claim, [s], c_point, seed(_label(s.point)))
        v = S.verdict(iv.lo, iv.hi, claim.op, claim.threshold)
        points.append(_row("point", _label(s.point), iv, [s], v, dict(s.point)))
    if claim.scope == "every":
        head = _deciding(points, claim.op, claim.threshold)
        return Outcome(S.combine([r.verdict for r in points]), head, [pooled, *points])
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


def _groups(claim, reader: _Reader, samples: list[Sample], points) -> list[tuple[Any, list]]:
    values = trend_values(reader.axes, points, claim.along, claim.order)
    return [(v, [s for s in samples if holds("==", dict(s.point)[claim.along], v)]) for v in values]


def _group_rows(claim, groups, seed) -> list[Row]:
    rows = []
    for v, members in groups:
        iv = _interval(claim, members, claim.confidence, seed(f"{claim.along}={v}"))
        rows.append(_row("group", f"{claim.along}={v}", iv, members, point={claim.along: v}))
    return rows


def _too_few(members: Sequence[Sample]) -> bool:
    return sum(len(s.values) for s in members) < S.MIN_VALUES


def _monotone(claim, samples, seed, reader, points) -> Outcome:
    """Monotone trend: every step between consecutive axis values moves in ``direction``, up
    to ``tolerance`` against it (Bonferroni over the steps; docs/science.md §13)."""
    groups = _groups(claim, reader, samples, points)
    sign = 1.0 if claim.direction == "increasing" else -1.0
    c_step = S.bonferroni(claim.confidence, len(groups) - 1)
    agg = _agg(claim)
    steps = []
    for (a, ga), (b, gb) in zip(groups, groups[1:], strict=False):
        sa, sb = _strata(ga), _strata(gb)
        label = f"{claim.along}: {a} -> {b}"
        if claim.aggregate == "share":
            iv = _share_step(ga, gb, sign, c_step)
        elif _too_few(ga) or _too_few(gb):
            iv = S.Interval.none(c_step, f"fewer than {S.MIN_VALUES} values in a group")
        else:
            k = len(sa)

            def stat(xs, axis, k=k):
                left = agg(np.concatenate(xs[:k], axis=axis), axis)
                right = agg(np.concatenate(xs[k:], axis=axis), axis)
                return sign * (right - left)

            iv = S.bootstrap_interval([*sa, *sb], stat, c_step, seed(label))
        v = S.verdict(iv.lo, iv.hi, ">=", -claim.tolerance)
        steps.append(_row("step", label, iv, [*ga, *gb], v))
    head = _deciding(steps, ">=", -claim.tolerance)
    rows = [*_group_rows(claim, groups, seed), *steps]
    return Outcome(S.combine([r.verdict for r in steps]), head, rows)


def _share_step(ga: list[Sample], gb: list[Sample], sign: float, confidence: float):
    """A step between two shares: the difference of their exact binomial intervals, each at
    ``1 - (1 - confidence) / 2`` (conservative; never the degenerate [0, 0] a bootstrap
    gives two groups whose seeds all agree)."""
    each = S.bonferroni(confidence, 2)
    a, b = (
        S.binomial_interval(int(sum(s.values.sum() for s in g)), sum(len(s.values) for s in g),
                            each)
        for g in (ga, gb)
    )  # fmt: skip
    if not (math.isfinite(a.estimate) and math.isfinite(b.estimate)):
        return S.Interval.none(confidence, "no values in a group")
    lo, hi = (b.lo - a.hi, b.hi - a.lo) if sign > 0 else (a.lo - b.hi, a.hi - b.lo)
    est = sign * (b.estimate - a.estimate)
    return S.Interval(est, lo, hi, confidence, "exact binomial, difference of intervals")


def _slope(claim, samples, seed, reader, points) -> Outcome:
    """Slope (an exponent with ``x: log, y: log``) of the aggregate against the axis: least
    squares over the axis values, its interval from the stratified bootstrap."""
    groups = _groups(claim, reader, samples, points)
    x = np.array([float(v) for v, _ in groups])
    x = np.log(x) if claim.x == "log" else x
    agg = _agg(claim)
    members = [_strata(g) for _, g in groups]
    sizes = [len(m) for m in members]
    everyone = [s for _, g in groups for s in g]
    label = f"slope along {claim.along}" + (f" ({claim.x} x, {claim.y} y)")
    if any(_too_few(g) for _, g in groups):
        iv = S.Interval.none(claim.confidence, f"fewer than {S.MIN_VALUES} values in a group")
    else:

        def stat(xs, axis):
            ys, start = [], 0
            for k in sizes:
                ys.append(agg(np.concatenate(xs[start : start + k], axis=axis), axis))
                start += k
            y = np.stack(ys, axis=-1)
            if claim.y == "log":
                with np.errstate(divide="ignore", invalid="ignore"):
                    y = np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), np.nan)
            return S.ols_slope(x, y)

        iv = S.bootstrap_interval([m for g in members for m in g], stat, claim.confidence,
                                  seed("slope"))  # fmt: skip
    fit = _row("fit", label, iv, everyone, S.verdict(iv.lo, iv.hi, claim.op, claim.threshold))
    return Outcome(fit.verdict, fit, [*_group_rows(claim, groups, seed), fit])


#: how each kind of claim is evaluated (docs/claims.md, "A new kind of claim")
EVALUATORS: Mapping[str, Callable[..., Outcome]] = {
    "level": lambda claim, samples, seed, reader, points: _level(claim, samples, seed),
    "monotone": _monotone,
    "slope": _slope,
}


def evaluate_claim(sweep: xr.Dataset | _Reader, claim: ClaimModel, experiment: str) -> dict:
    """The ledger entry of one claim (docs/claims.md, "The ledger"): the claim as written,
    its verdict, headline estimate and interval, the counts of cells used and left out, and
    every row of evidence."""
    reader = sweep if isinstance(sweep, _Reader) else _Reader(sweep)
    points = select_points(reader.axes, claim.where)
    samples = read_samples(reader, claim, points)

    def seed(label: str) -> int:
        return S.seed_of(experiment, claim.name, label)

    outcome = EVALUATORS[claim.kind](claim, samples, seed, reader, points)
    head = outcome.headline
    svm_status: dict[str, dict[str, int]] = {}
    for s in samples:
        for svm, counts in s.svm_status.items():
            into = svm_status.setdefault(svm, {})
            for k, n in counts.items():
                into[k] = into.get(k, 0) + n
    return {
        "experiment": experiment,
        **claim.model_dump(mode="json"),
        "verdict": outcome.verdict,
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
        "rows": [r.as_dict() for r in outcome.rows],
    }


def evaluate_claims(sweep: xr.Dataset, claims: Sequence[ClaimModel], experiment: str) -> list:
    """Every claim of an experiment on its sweep (:func:`evaluate_claim`)."""
    reader = _Reader(sweep)
    return [evaluate_claim(reader, c, experiment) for c in claims]
