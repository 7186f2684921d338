"""The shape of a claim in a config: a theoretical prediction tested against a run (docs/claims.md).

An experiment may list ``claims``. A claim names the theory behind it, the per-cell variable it
is about, the cells (a subset of the grid, ``where``; optionally of the cells' outcomes,
``given``), how the seeds are aggregated, and what the theory predicts: a level
(``kind: level``, a comparator and a threshold), a monotone trend along an axis (``kind:
monotone``) or a fitted slope or exponent along an axis (``kind: slope``). Its semantics
(intervals, verdicts) are docs/science.md §13.

This module describes the shape only: the pydantic models that :mod:`attnsvm.config.schema`
puts into an experiment, and the words of a condition. Whether a claim's variable, axes and
values exist in its experiment is checked from above, by :func:`attnsvm.plan.parse_config`
(:mod:`attnsvm.claims.spec`), which knows what the experiment's cells store; the evaluation is
:mod:`attnsvm.claims`. A new kind of claim is one more model here (listed in
:data:`CLAIM_KINDS`) and its evaluation in :mod:`attnsvm.claims.evaluate` (docs/claims.md).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    model_validator,
)

_STRICT = ConfigDict(extra="forbid", strict=True)

#: comparators of a claim's threshold: the estimate's interval against it (docs/science.md §13)
COMPARATORS = (">=", ">", "<=", "<", "between")
#: comparators of a condition on a value (``where``, ``given``, ``per_seed``)
CONDITION_OPS = (">=", ">", "<=", "<", "==", "!=")
#: how the per-seed values of the selected cells become one number
AGGREGATES = ("mean", "median", "quantile", "share")
#: the claims' default confidence level
DEFAULT_CONFIDENCE = 0.95
MAX_NAME_LENGTH = 60


class _Problem(ValueError):
    """A validator's message, complete but for where it happened."""


def condition(value: Any) -> tuple[str, Any]:
    """``(op, operand)`` of a condition: a value (``==``), a list of values (``in``) or a
    mapping ``{op: value}`` with one comparator of :data:`CONDITION_OPS`."""
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in CONDITION_OPS:
            raise _Problem(
                f"a condition mapping must have one key among {', '.join(CONDITION_OPS)}, "
                f"got {sorted(map(str, value))}"
            )
        ((op, operand),) = value.items()
        if isinstance(operand, (dict, list)):
            raise _Problem(
                f"the operand of '{op}' must be one value, got a {type(operand).__name__}"
            )
        return op, operand
    if isinstance(value, list):
        if not value or any(isinstance(v, (dict, list)) for v in value):
            raise _Problem("a condition list must hold one or more values")
        return "in", value
    return "==", value


def holds(op: str, left: Any, right: Any) -> bool:
    """Whether ``left op right`` (a value against a condition of :func:`condition`)."""
    if op == "in":
        return any(_equal(left, r) for r in right)
    if op == "==":
        return _equal(left, right)
    if op == "!=":
        return not _equal(left, right)
    try:
        return {">=": left >= right, ">": left > right, "<=": left <= right, "<": left < right}[op]
    except TypeError:
        return False


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return str(a) == str(b)


def _conditions(value: Any) -> Any:
    if not isinstance(value, dict):
        raise _Problem(f"must be a mapping of a key to a condition, got {type(value).__name__}")
    for cond in value.values():
        condition(cond)
    return value


def _name(value: Any) -> Any:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_NAME_LENGTH
        or not value.replace("_", "").replace("-", "").isalnum()
        or not value.isascii()
    ):
        raise _Problem(
            f"a claim name must be 1..{MAX_NAME_LENGTH} letters, digits, '_' or '-', got {value!r}"
        )
    return value


def _variables(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    raise _Problem("'minus' must be a variable or a non-empty list of variables")


_CONDITIONS_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [
            {"type": ["string", "number", "boolean"]},
            {"type": "array", "minItems": 1},
            {"type": "object", "minProperties": 1, "maxProperties": 1},
        ]
    },
}
Conditions = Annotated[Any, AfterValidator(_conditions), WithJsonSchema(_CONDITIONS_SCHEMA)]
Condition = Annotated[
    Any,
    AfterValidator(lambda v: v if v is None else (condition(v), v)[1]),
    WithJsonSchema(_CONDITIONS_SCHEMA["additionalProperties"]),
]
Number = Annotated[float, Field(strict=False, allow_inf_nan=False)]


#: the null models a baseline may take instead of another variable or regime (docs/claims.md)
NULLS = ("shuffle", "sign")


class Baseline(BaseModel):
    """What must not satisfy a claim: the claim evaluated on another variable, regime or a
    null (docs/claims.md, "Baselines"); the ledger shows it as a control row beside the
    claim and flags a claim whose baseline passes."""

    model_config = _STRICT
    name: str = Field(description="the baseline in words, e.g. 'the nuclear SVM'")
    variable: str | None = Field(None, description="instead of the claim's variable")
    minus: Annotated[
        Any,
        AfterValidator(_variables),
        WithJsonSchema(
            {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        ),
    ] = Field(None, description="instead of the claim's minus")
    where: Conditions | None = Field(None, description="instead of the claim's where")
    given: Conditions | None = Field(None, description="instead of the claim's given")
    null_model: Literal[NULLS] | None = Field(
        None,
        description="shuffle: each seed's values permuted along a trend's axis (no trend); "
        "sign: each seed's deviation from a level's threshold given a random sign",
    )

    @model_validator(mode="after")
    def _changes_something(self) -> Baseline:
        keys = ("variable", "minus", "where", "given", "null_model")
        if all(getattr(self, k) is None for k in keys):
            raise _Problem(
                "a baseline names what it changes: variable, minus, where, given or null_model"
            )
        return self


#: what kind of statement a claim is (docs/claims.md): a theorem's conclusion, a paper's
#: empirical observation, or this project's conjecture
SOURCES = ("theorem", "observation", "conjecture")


class Source(BaseModel):
    """What a claim states: a theorem's conclusion (cite the theorem), a paper's empirical
    observation (cite the figure) or this project's conjecture (cite the section that
    argues it)."""

    model_config = _STRICT
    type: Literal[SOURCES] = Field(description="theorem, observation or conjecture")
    cite: str = Field(description="the theorem, the figure, or the section of docs/science.md")

    @model_validator(mode="after")
    def _cited(self) -> Source:
        if not self.cite.strip():
            raise _Problem("source: cite names the theorem, the figure or the section")
        return self


class WrittenAgainst(BaseModel):
    """The run a claim was written or last changed against: the hash of its text then
    (:func:`claim_hash`) and the seeds that run used, ``[first, last]``: the ledger decides
    the claim on other seeds only (docs/science.md §13)."""

    model_config = _STRICT
    hash: str = Field(description="claim_hash of the claim's text as it was written")
    seeds: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)] = Field(
        description="[first, last]: the seeds that run used"
    )


class _Claim(BaseModel):
    """What every claim says (docs/claims.md)."""

    model_config = _STRICT
    name: Annotated[
        Any,
        AfterValidator(_name),
        WithJsonSchema({"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}),
    ] = Field(description="unique within the experiment")
    statement: str = Field(description="the prediction in words")
    theory: str = Field(description="where it comes from: docs/science.md section and the paper")
    note: str = Field("", description="why this threshold and tolerance (theory, stated margin)")
    figure: str | None = Field(None, description="the experiment's figure that shows it")
    variable: str = Field(description="a per-cell variable the experiment stores")
    minus: Annotated[
        Any,
        AfterValidator(_variables),
        WithJsonSchema(
            {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
        ),
    ] = Field(
        None,
        description="subtract this variable (or the largest of these) per cell: a difference",
    )
    where: Conditions = Field(
        default_factory=dict, description="grid axis -> value, list of values or {op: value}"
    )
    given: Conditions = Field(
        default_factory=dict,
        description="per-cell variable -> condition: only the cells meeting it (others counted)",
    )
    aggregate: Literal[AGGREGATES] = Field(
        "mean", description="over the seeds of the selected cells"
    )
    q: Annotated[float, Field(gt=0, lt=1, strict=False)] | None = Field(
        None, description="the quantile of aggregate: quantile"
    )
    per_seed: Condition = Field(
        None, description="aggregate share: the share of cells whose value meets this"
    )
    confidence: Annotated[float, Field(ge=0.5, lt=1, strict=False)] = Field(
        DEFAULT_CONFIDENCE, description="confidence level of the intervals"
    )
    baseline: Baseline | None = Field(
        None, description="what must not satisfy the claim: its control row (docs/claims.md)"
    )
    source: Source = Field(description="a theorem's conclusion, an observation or a conjecture")
    margin: Annotated[float, Field(gt=0, strict=False, allow_inf_nan=False)] = Field(
        description="the smallest effect the claim is about: how far past its threshold "
        "(or against its trend) it counts as false (docs/science.md §13, power)"
    )
    written_against: WrittenAgainst | None = Field(
        None, description="the run it was written or last changed against (hash, seeds)"
    )

    @model_validator(mode="after")
    def _aggregate_needs(self) -> _Claim:
        null = self.baseline.null_model if self.baseline is not None else None
        trend = getattr(self, "kind", "level") != "level"
        if null == "shuffle" and not trend:
            raise _Problem("baseline null_model 'shuffle' permutes a trend's axis: none in a level")
        if null == "sign" and (trend or self.aggregate == "share"):
            raise _Problem("baseline null_model 'sign' goes with a level claim on numbers")
        if (self.aggregate == "quantile") != (self.q is not None):
            raise _Problem("'q' goes with aggregate: quantile, and only with it")
        if (self.aggregate == "share") != (self.per_seed is not None):
            raise _Problem("'per_seed' goes with aggregate: share, and only with it")
        return self


def _threshold(op: str, threshold: Any) -> None:
    if op == "between":
        if (
            not isinstance(threshold, list)
            or len(threshold) != 2
            or not all(_finite(t) for t in threshold)
            or not threshold[0] < threshold[1]
        ):
            raise _Problem("op 'between' needs threshold: [low, high] with low < high")
    elif not _finite(threshold):
        raise _Problem(f"op '{op}' needs a finite number as threshold, got {threshold!r}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


_THRESHOLD_SCHEMA = {
    "oneOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}, "minItems": 2}]
}


class LevelClaim(_Claim):
    """The aggregate meets a threshold, pooled over the selected cells (``scope: pooled``) or
    at every grid point (``scope: every``)."""

    kind: Literal["level"] = "level"
    op: Literal[COMPARATORS]
    threshold: Annotated[Any, WithJsonSchema(_THRESHOLD_SCHEMA)]
    scope: Literal["pooled", "every"] = Field("pooled", description="which verdict counts")

    @model_validator(mode="after")
    def _check_threshold(self) -> LevelClaim:
        _threshold(self.op, self.threshold)
        return self


class _Trend(_Claim):
    along: str = Field(description="the grid axis of the trend")
    order: list[Any] | None = Field(
        None, description="axis values in the trend's order (default: the axis, sorted)"
    )


class MonotoneClaim(_Trend):
    """The aggregate moves in one direction along an axis, each step at most ``tolerance``
    against it."""

    kind: Literal["monotone"]
    direction: Literal["increasing", "decreasing"] = "increasing"
    tolerance: Annotated[float, Field(ge=0, strict=False, allow_inf_nan=False)] = Field(
        0.0, description="largest step against the direction that still counts as monotone"
    )


class SlopeClaim(_Trend):
    """The slope of the aggregate against the axis (``x``, ``y``: ``log`` for an exponent)
    meets a threshold."""

    kind: Literal["slope"]
    x: Literal["linear", "log"] = "linear"
    y: Literal["linear", "log"] = "linear"
    op: Literal[COMPARATORS]
    threshold: Annotated[Any, WithJsonSchema(_THRESHOLD_SCHEMA)]

    @model_validator(mode="after")
    def _check_threshold(self) -> SlopeClaim:
        _threshold(self.op, self.threshold)
        return self


class BoundaryClaim(_Trend):
    """Where the aggregate crosses ``level`` along the axis ``across`` (a boundary, e.g. the
    SNR where the excess test error falls below a level), per value of ``along``; the slope
    of log boundary against log ``along`` meets a threshold (docs/science.md §15, "The
    boundary estimator")."""

    kind: Literal["boundary"]
    across: str = Field(description="the grid axis (positive numbers) the boundary lies on")
    level: Number = Field(description="the value of the aggregate that locates the boundary")
    direction: Literal["increasing", "decreasing"] = Field(
        "decreasing", description="how the aggregate moves along across (through the level)"
    )
    op: Literal[COMPARATORS]
    threshold: Annotated[Any, WithJsonSchema(_THRESHOLD_SCHEMA)]

    @model_validator(mode="after")
    def _check_threshold(self) -> BoundaryClaim:
        _threshold(self.op, self.threshold)
        if self.across == self.along:
            raise _Problem("a boundary's across and along are two different grid axes")
        if self.aggregate != "mean":
            raise _Problem("a boundary locates the crossing of the mean over the seeds")
        return self


#: every kind of claim and its model (docs/claims.md, "A new kind of claim")
CLAIM_KINDS: dict[str, type[_Claim]] = {
    "level": LevelClaim,
    "monotone": MonotoneClaim,
    "slope": SlopeClaim,
    "boundary": BoundaryClaim,
}


def _kind(value: Any) -> str | None:
    """The tag of a claim: its ``kind`` (``level`` when left out)."""
    if isinstance(value, dict):
        kind = value.get("kind", "level")
        return kind if isinstance(kind, str) else repr(kind)
    return getattr(value, "kind", None)


Claim = Annotated[
    Annotated[LevelClaim, Tag("level")]
    | Annotated[MonotoneClaim, Tag("monotone")]
    | Annotated[SlopeClaim, Tag("slope")]
    | Annotated[BoundaryClaim, Tag("boundary")],
    Discriminator(_kind),
]
"""One claim of an experiment (a :data:`CLAIM_KINDS` model, chosen by its ``kind``)."""

ClaimModel = LevelClaim | MonotoneClaim | SlopeClaim | BoundaryClaim


def claim_hash(claim: ClaimModel | dict) -> str:
    """The hash of a claim's text (every key but ``written_against``, canonical JSON): what
    ``written_against.hash`` records (docs/claims.md)."""
    doc = claim if isinstance(claim, dict) else claim.model_dump(mode="json")
    doc = {k: v for k, v in doc.items() if k != "written_against"}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def baseline_claim(claim: ClaimModel) -> ClaimModel | None:
    """The claim as its baseline states it (its control row), or None without one; a null
    model is applied to the values by the evaluation (:mod:`attnsvm.claims.evaluate`)."""
    b = claim.baseline
    if b is None:
        return None
    update: dict[str, Any] = {"baseline": None}
    for key in ("variable", "minus", "where", "given"):
        if getattr(b, key) is not None:  # None: the claim's own
            update[key] = getattr(b, key)
    return claim.model_copy(update=update)
