"""What a claim may name in its experiment, checked before any work (docs/claims.md).

:func:`check_claims` is called by :func:`attnsvm.plan.parse_config`, the one validation of a
config, after the config models (:mod:`attnsvm.config.claims`) accepted the claims' shape: it
checks each claim against its experiment (the grid axes and their values, the figures, the
per-cell variables its cells store, the checkpoints a rate needs) and raises one
:class:`~attnsvm.config.errors.ConfigError` line naming the experiment, the claim, the key and
the value. The variables a cell stores are declared by its task
(:attr:`attnsvm.tasks.Task.scalars`), which a test checks against what cells store.

The selection of grid points (``where``) and the order of a trend's axis values are computed
here for the check and for the evaluation alike (:mod:`attnsvm.claims.evaluate`).
"""

from __future__ import annotations

import difflib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter

from attnsvm import codes
from attnsvm.config.claims import Claim, ClaimModel, baseline_claim, condition, holds
from attnsvm.config.errors import ConfigError
from attnsvm.config.grid import Experiment
from attnsvm.variables import value_range

#: categorical per-cell variables a share may count: name -> its codes (attnsvm.codes)
CATEGORICAL: Mapping[str, tuple[str, ...]] = {
    "convergence": codes.CONVERGENCE,
    "convergence_strict": codes.CONVERGENCE_STRICT,
}
#: what a cell must store for its convergence types to exist (docs/science.md §5)
_CONVERGENCE_NEEDS = "locally_optimal"

Point = tuple[tuple[str, Any], ...]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def select_points(axes: Mapping[str, Sequence[Any]], where: Mapping[str, Any]) -> list[Point]:
    """The grid points (Cartesian product of ``axes``, in axis order) that meet every
    condition of ``where`` (:func:`attnsvm.config.claims.condition`)."""
    names = list(axes)
    conds = {k: condition(v) for k, v in where.items()}
    out = []
    for values in itertools.product(*(axes[a] for a in names)):
        point = tuple(zip(names, values, strict=True))
        if all(holds(op, dict(point)[k], arg) for k, (op, arg) in conds.items()):
            out.append(point)
    return out


def trend_values(
    axes: Mapping[str, Sequence[Any]], points: Sequence[Point], along: str, order: Sequence | None
) -> list[Any]:
    """The values of axis ``along`` a trend runs over: ``order`` when given, else those of
    the selected points (sorted when they are numbers, in axis order otherwise)."""
    present = []
    for v in axes[along]:
        if any(holds("==", dict(p)[along], v) for p in points) and not any(
            holds("==", v, u) for u in present
        ):
            present.append(v)
    if order is not None:
        return [v for v in order if any(holds("==", u, v) for u in present)]
    return sorted(present) if all(_is_number(v) for v in present) else present


def minus_list(claim: ClaimModel) -> list[str]:
    """The variables a claim subtracts (none, one, or the largest of several)."""
    return [claim.minus] if isinstance(claim.minus, str) else list(claim.minus or [])


def claim_bounds(claim: ClaimModel) -> tuple[float, float] | None:
    """The finite range of a claim's per-cell quantity (:func:`attnsvm.variables.value_range`
    of its variable, less the largest of its ``minus``), or None where one has none."""
    own = value_range(claim.variable)
    others = [value_range(m) for m in minus_list(claim)]
    if own is None or any(o is None for o in others):
        return None
    if not others:
        return own
    return own[0] - max(o[1] for o in others), own[1] - max(o[0] for o in others)


def combined_bounds(bounds: tuple[float, float], weights) -> tuple[float, float]:
    """The range of ``sum_j w_j y_j`` for every ``y_j`` in ``bounds`` (a step, a slope)."""
    lo = sum(w * (bounds[0] if w > 0 else bounds[1]) for w in weights)
    hi = sum(w * (bounds[1] if w > 0 else bounds[0]) for w in weights)
    return float(lo), float(hi)


def claims_json(claims: Sequence[ClaimModel]) -> str:
    """The claims of an experiment as canonical JSON (the derive rule's params)."""
    return json.dumps([c.model_dump(mode="json") for c in claims])


def claims_from_json(text: str) -> list[ClaimModel]:
    """The claims of :func:`claims_json`, validated again by their models."""
    return TypeAdapter(list[Claim]).validate_python(json.loads(text))


# --------------------------------------------------------------------------- the check
def check_claims(exp: Experiment) -> None:
    """Raise one :class:`ConfigError` line for the first claim of ``exp`` that names an axis,
    a value, a figure or a variable its experiment does not have (module docstring)."""
    seen: set[str] = set()
    for claim in exp.claims:
        where = f"experiment '{exp.name}': claim '{claim.name}'"
        if claim.name in seen:
            raise ConfigError(f"{where}: the name is used twice in the experiment")
        seen.add(claim.name)
        try:
            _check(exp, claim)
        except _Bad as bad:
            raise ConfigError(f"{where}: {bad}") from None
        base = baseline_claim(claim)
        try:
            if base is not None:
                _check(exp, base)
        except _Bad as bad:
            raise ConfigError(f"{where}: baseline: {bad}") from None


class _Bad(ValueError):
    """A problem of one claim (the caller adds where it is)."""


def _hint(word: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(word), [str(a) for a in allowed], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check(exp: Experiment, claim: ClaimModel) -> None:
    if claim.figure is not None and claim.figure not in exp.figures:
        raise _Bad(
            f"figure {claim.figure!r} is not drawn by the experiment "
            f"(its figures: {', '.join(exp.figures) or 'none'})"
        )
    _check_where(exp, claim.where)
    points = select_points(exp.axes, claim.where)
    if not points:
        raise _Bad(f"where {json.dumps(claim.where)} selects no grid point")
    if claim.kind != "level":
        _check_trend(exp, claim, points)
    stored = _stored(exp, points)
    _check_variable(claim.variable, stored, "variable")
    minus = [claim.minus] if isinstance(claim.minus, str) else list(claim.minus or [])
    for name in minus:
        _check_variable(name, stored, "minus")
        if name in CATEGORICAL:
            raise _Bad(f"minus {name!r} is categorical: a difference needs numbers")
    if claim.variable in CATEGORICAL:
        if minus:
            raise _Bad(f"variable {claim.variable!r} is categorical: it takes no 'minus'")
        if claim.aggregate != "share":
            raise _Bad(
                f"variable {claim.variable!r} is categorical: use aggregate: share with "
                f"per_seed: one of {', '.join(CATEGORICAL[claim.variable])}"
            )
    if claim.aggregate == "mean" and claim.kind != "boundary" and claim_bounds(claim) is None:
        names = [n for n in (claim.variable, *minus) if value_range(n) is None]
        raise _Bad(
            f"a mean needs a variable with a finite range (its interval is valid for every "
            f"distribution on it, docs/science.md §13): {', '.join(map(repr, names))} has "
            "none in attnsvm.variables; state aggregate: median, quantile (with q) or share "
            "(with per_seed), or declare its range there"
        )
    if claim.per_seed is not None:
        _check_condition(claim.variable, claim.per_seed, "per_seed")
    for name, cond in claim.given.items():
        _check_variable(name, stored, "given")
        _check_condition(name, cond, f"given {name!r}")
    _check_rates(exp, claim, points, minus)


def _check_where(exp: Experiment, where: Mapping[str, Any]) -> None:
    for key, cond in where.items():
        if key not in exp.axes:
            raise _Bad(
                f"where {key!r} is not a grid axis of the experiment{_hint(key, list(exp.axes))} "
                f"(axes: {', '.join(exp.axes) or 'none'})"
            )
        op, operand = condition(cond)
        values = exp.axes[key]
        wanted = operand if op == "in" else [operand]
        if op in ("==", "!=", "in"):
            for w in wanted:
                if not any(holds("==", v, w) for v in values):
                    raise _Bad(
                        f"where {key}: {w!r} is not a value of the axis{_hint(w, values)} "
                        f"(values: {', '.join(map(str, values))})"
                    )
        elif not (_is_number(operand) and all(_is_number(v) for v in values)):
            raise _Bad(f"where {key}: '{op}' needs a number and an axis of numbers")


def _check_trend(exp: Experiment, claim: ClaimModel, points: list[Point]) -> None:
    along = claim.along
    if along not in exp.axes:
        raise _Bad(
            f"along {along!r} is not a grid axis of the experiment{_hint(along, list(exp.axes))} "
            f"(axes: {', '.join(exp.axes) or 'none'})"
        )
    if claim.order is not None:
        for v in claim.order:
            if not any(holds("==", u, v) for u in exp.axes[along]):
                raise _Bad(
                    f"order: {v!r} is not a value of axis {along!r}"
                    f"{_hint(v, exp.axes[along])} (values: {', '.join(map(str, exp.axes[along]))})"
                )
    values = trend_values(exp.axes, points, along, claim.order)
    if len(values) < 2:
        raise _Bad(f"a trend along {along!r} needs two or more of its values, got {values}")
    if claim.kind == "slope":
        if not all(_is_number(v) for v in values):
            raise _Bad(f"a slope along {along!r} needs an axis of numbers, got {values}")
        if claim.x == "log" and not all(v > 0 for v in values):
            raise _Bad(f"x: log needs positive values of {along!r}, got {values}")
    if claim.kind == "boundary":
        for axis in (along, claim.across):
            if axis not in exp.axes:
                raise _Bad(f"across {axis!r} is not a grid axis of the experiment")
            vals = trend_values(exp.axes, points, axis, None)
            if len(vals) < 2 or not all(_is_number(v) and v > 0 for v in vals):
                raise _Bad(f"a boundary needs two or more positive numbers on {axis!r}, got {vals}")


def _stored(exp: Experiment, points: list[Point]) -> list[tuple[Point, frozenset[str]]]:
    """The scalars one cell of every selected point stores (its task's declaration)."""
    from attnsvm.tasks import task_for  # deferred: the task registry imports the solvers

    out = []
    for point in points:
        cell = exp.cell(point, exp.seeds[0])
        names = set(task_for(cell).scalars(cell))
        if _CONVERGENCE_NEEDS in names:
            names |= set(CATEGORICAL)
        out.append((point, frozenset(names)))
    return out


def _check_variable(name: str, stored: list[tuple[Point, frozenset[str]]], key: str) -> None:
    for point, names in stored:
        if name not in names:
            at = ", ".join(f"{k}={v!r}" for k, v in point) or "its cells"
            raise _Bad(
                f"{key} {name!r} is not stored by the cells at {at}{_hint(name, sorted(names))} "
                "(docs/claims.md lists what each task stores)"
            )


def _check_condition(name: str, cond: Any, key: str) -> None:
    op, operand = condition(cond)
    if name in CATEGORICAL:
        table = CATEGORICAL[name]
        if op not in ("==", "!=", "in"):
            raise _Bad(f"{key}: {name!r} is categorical: use a value, a list or '==' / '!='")
        for v in operand if op == "in" else [operand]:
            if v not in table:
                raise _Bad(
                    f"{key}: {v!r} is not a value of {name}{_hint(v, table)} "
                    f"(values: {', '.join(table)})"
                )
        return
    for v in operand if op == "in" else [operand]:
        if not _is_number(v) and not isinstance(v, bool):
            raise _Bad(f"{key}: {name!r} holds numbers, got {v!r}")


def _check_rates(exp: Experiment, claim: ClaimModel, points: list[Point], minus: list[str]):
    """A rate needs MIN_FIT_POINTS checkpoints in the tail of every selected cell."""
    from attnsvm.tasks.metrics import MIN_FIT_POINTS, tail_points  # with the task registry

    names = [claim.variable, *minus, *claim.given]
    if not any(n.startswith("rate_") for n in names):
        return
    for point in points:
        cell = exp.cell(point, exp.seeds[0])
        have = tail_points(cell.checkpoints())
        if have < MIN_FIT_POINTS:
            at = ", ".join(f"{k}={v!r}" for k, v in point) or "its cells"
            raise _Bad(
                f"a rate needs {MIN_FIT_POINTS} checkpoints k >= sqrt(iterations), the cells at "
                f"{at} have {have}: raise checkpoint_count (docs/science.md §14)"
            )
