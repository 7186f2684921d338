"""The sweep config as typed models (pydantic v2): the one description of what a config may say.

The models are generated from the field registry (:data:`attnsvm.config.fields.FIELDS`):
:data:`CellModel` (the values a cell accepts and the rules tying its fields together), and
for a config :func:`sweep_model`, the top-level keys, each experiment and the cell fields of
its ``fixed`` settings and ``grid`` axes. The figures an experiment may name come from the
figure registry, which the caller passes in (:func:`attnsvm.plan.parse_config` does): the
configuration knows nothing of the report. Every model forbids unknown keys.

:func:`validate_config` runs the models and turns the first problem into one
:class:`~attnsvm.config.errors.ConfigError` line naming the key, the value, what is allowed and
a did-you-mean hint. ``workflow/schemas/config.schema.yaml`` is generated from the models
(:func:`schema_yaml`; ``attnsvm generate``) for editors and readers.
"""

from __future__ import annotations

import collections
import difflib
import functools
import re
from collections.abc import Collection
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    model_validator,
)

from attnsvm.config.claims import CLAIM_KINDS, Claim
from attnsvm.config.errors import CellError, ConfigError
from attnsvm.config.fields import (
    AXES,
    BY_NAME,
    FIELDS,
    FLOAT_FIELDS,
    MAX_SEED,
    cross_field_problem,
)
from attnsvm.images import REAL_GENERATORS

_STRICT = ConfigDict(extra="forbid", strict=True)

#: Defaults and limits of the top-level settings (issue 17; config/README.md, "Limits").
DEFAULT_BLOCK_SIZE = 64
DEFAULT_MEM_MB = 4000
#: ``max_cells`` defaults to DEFAULT_MAX_CELLS (the paper's sweep has ~11,000 cells).
DEFAULT_MAX_CELLS = 100_000
#: ``max_blocks`` (jobs) defaults to DEFAULT_MAX_BLOCKS: Snakemake plans ~250 jobs per CPU
#: second (5000 blocks: 19 s CPU for ``snakemake -n``), the paper's sweep has 109 blocks, and
#: max_cells cells in full blocks of the default size make 1563
DEFAULT_MAX_BLOCKS = 2_000
MAX_BLOCK_SIZE = 10_000
#: ``block_seconds`` defaults to 0: one grid point per block (no packing)
DEFAULT_BLOCK_SECONDS = 0.0
#: largest ``block_seconds`` (a week of predicted CPU time)
MAX_BLOCK_SECONDS = 7 * 24 * 3600.0
MAX_THREADS = 4096
MAX_MEM_MB = 2**40
MAX_NAME_LENGTH = 100


def short(value: Any, limit: int = 80) -> str:
    """``repr`` of a (YAML) value for a message, cut to ``limit`` characters; a container is
    named by its type (never walked)."""
    if not isinstance(value, str | int | float | bool | type(None)):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def field_message(name: str, error: dict[str, Any], values: dict[str, Any] | None = None) -> str:
    """``d must be a positive integer, got 0``: one pydantic error of a cell field, in words.

    ``values``: the other fields given with it (the words of ``m`` name ``d``).
    """
    f = BY_NAME[name]
    words = f.above if f.above and error["type"] == "less_than_equal" else f.must_text
    d = (values or {}).get("d", "d")
    return f"{name} must be {words.format(d=d)}, got {short(error['input'])}"


def yaml_value(key: str, value: Any) -> Any:
    """A config value of cell field ``key``: YAML 1.1 reads ``1e-3`` as a string, accepted for
    float fields."""
    if key in FLOAT_FIELDS and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


class _Problem(ValueError):
    """A validator's message, complete but for where it happened (added by the translation)."""


def _hint(key: str, allowed: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def unknown_key(where: str, key: Any, allowed: tuple[str, ...]) -> str:
    """``config: unknown key 'x'; did you mean 'y'? (allowed: ...)``."""
    key = short(key, 40).strip("'")
    return f"{where}: unknown key '{key}'{_hint(key, allowed)} (allowed: {', '.join(allowed)})"


# ----------------------------------------------------------------------- value types
def cell_type(name: str) -> Any:
    """The pydantic type of cell field ``name``, from its registry entry."""
    f = BY_NAME[name]
    if f.kind == "choice":
        return Literal[f.choices]
    if f.kind == "bool":
        return Annotated[bool, Field(strict=True)]
    if f.kind == "real":
        return Annotated[float, Field(strict=True, allow_inf_nan=False, **f.bounds)]
    number = Annotated[int, Field(strict=True, **f.bounds)]
    return number | None if f.kind == "optional int" else number


class _CellRules(BaseModel):
    model_config = _STRICT

    @model_validator(mode="after")
    def _together(self) -> _CellRules:
        problem = cross_field_problem(self)
        if problem:
            raise ValueError(problem)
        return self


CellModel = create_model(
    "CellModel",
    __base__=_CellRules,
    __doc__="The values a :class:`~attnsvm.config.cell.Cell` accepts (docs/science.md sections "
    "1-5): the types and ranges of the field registry, and the rules that tie fields together "
    "(:func:`~attnsvm.config.fields.cross_field_problem`).",
    **{f.name: (cell_type(f.name), f.default) for f in FIELDS},
)


def check_cell_values(values: dict[str, Any]) -> None:
    """Raise :class:`CellError` naming the first invalid field of a cell's ``values``, its value
    and what is allowed (:data:`CellModel`)."""
    try:
        CellModel.model_validate(values)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        if first["loc"]:
            raise CellError(field_message(first["loc"][0], first, values)) from None
        raise CellError(str(first["ctx"]["error"])) from None


def _config_type(name: str) -> Any:
    """The type of cell field ``name`` in a config (float fields also take ``'1e-3'``)."""
    kind = cell_type(name)
    if name not in FLOAT_FIELDS:
        return kind
    return Annotated[kind, BeforeValidator(functools.partial(yaml_value, name))]


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def _distinct(values: list[Any]) -> list[Any]:
    seen = collections.Counter(repr(v) for v in values)
    dup = sorted(s for s, k in seen.items() if k > 1)
    if dup:
        raise _Problem(f"has duplicate values {', '.join(dup[:10])}")
    return values


def _axis_type(name: str) -> Any:
    """A grid axis: a list of at least one distinct value of field ``name`` (or one value)."""
    one = _config_type(name)
    return Annotated[
        list[one],
        BeforeValidator(_as_list, json_schema_input_type=one | list[one]),
        Field(min_length=1),
        AfterValidator(_distinct),
    ]


_CELL_KEYS = AXES
FixedModel = create_model(
    "FixedModel",
    __config__=_STRICT,
    __doc__="An experiment's fixed cell settings (any cell field but seed; docs/science.md 1-5).",
    **{name: (_config_type(name), None) for name in _CELL_KEYS},
)
GridModel = create_model(
    "GridModel",
    __config__=_STRICT,
    __doc__="An experiment's grid axes: cell field -> values, in axis order.",
    **{name: (_axis_type(name), None) for name in _CELL_KEYS},
)


def _seeds(value: Any) -> Any:
    """``seeds``: a count N (seeds 0..N-1), ``{from: S, count: N}`` (seeds S..S+N-1: a range
    that claims written against 0..N-1 were not, docs/science.md §13) or a list of distinct
    integers in [0, 2**63 - 1]."""
    if isinstance(value, dict):
        if set(value) != {"from", "count"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values()
        ):
            raise _Problem(f"'seeds' as a range is {{from: first, count: N}}, got {short(value)}")
        if value["from"] < 0 or value["count"] < 1 or value["from"] + value["count"] > MAX_SEED + 1:
            raise _Problem(f"'seeds' range must lie in [0, 2**63 - 1], got {short(value)}")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise _Problem(f"'seeds' as a count must be >= 1, got {value}")
        if value > MAX_SEED + 1:
            raise _Problem(f"'seeds' as a count must be at most 2**63, got {value}")
        return value
    if not isinstance(value, list) or not value:
        raise _Problem(f"'seeds' must be a positive count or a non-empty list, got {short(value)}")
    for s in value:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise _Problem(f"seeds must be non-negative integers, got {short(s)}")
        if s > MAX_SEED:
            raise _Problem(
                f"seed {s} is too large: seeds are stored as int64, at most 2**63 - 1 = {MAX_SEED}"
            )
    dup = sorted(s for s, k in collections.Counter(value).items() if k > 1)
    if dup:
        raise _Problem(f"duplicate seeds {dup[:10]}")
    return value


_SEEDS_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": MAX_SEED + 1},
        {
            "type": "object",
            "properties": {
                "from": {"type": "integer", "minimum": 0},
                "count": {"type": "integer", "minimum": 1},
            },
            "required": ["from", "count"],
            "additionalProperties": False,
        },
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
            "minItems": 1,
            "uniqueItems": True,
        },
    ],
    "description": "a count N (seeds 0..N-1), {from: S, count: N} or a list of distinct seeds",
}
Seeds = Annotated[Any, AfterValidator(_seeds), WithJsonSchema(_SEEDS_SCHEMA)]
Seconds = Annotated[float, Field(ge=0, le=MAX_BLOCK_SECONDS, strict=True, allow_inf_nan=False)]
#: the integer settings: key -> (minimum, maximum or None)
INT_RANGES = {
    "block_size": (1, MAX_BLOCK_SIZE),
    "threads": (1, MAX_THREADS),
    "mem_mb": (100, MAX_MEM_MB),
    "max_cells": (1, None),
    "max_blocks": (1, None),
}


def _int(key: str) -> Any:
    low, high = INT_RANGES[key]
    return Annotated[int, Field(ge=low, le=high, strict=True)]


def _or_empty(value: Any) -> Any:
    return value or {}  # ``fixed:`` left empty (null) is no setting


def _figure(value: str, info: ValidationInfo) -> str:
    """A figure name of the registry that :func:`validate_config` was given."""
    if value not in (info.context or {}).get("figures", ()):
        raise _Problem("unknown figure")
    return value


class ExperimentModel(BaseModel):
    """One experiment: fixed settings, grid axes, seeds, figures, block size (docs/science.md §6
    names the paper's)."""

    model_config = _STRICT
    description: str = Field("", description="one line for the report")
    figures: Annotated[
        list[Annotated[str, AfterValidator(_figure)]],
        BeforeValidator(lambda v: _as_list(v) if v is not None else []),
    ] = Field([], description="figures drawn from the experiment's summary")
    fixed: Annotated[FixedModel, BeforeValidator(_or_empty)] = Field(
        None, description="cell fields set for every cell"
    )
    grid: Annotated[GridModel, BeforeValidator(_or_empty)] = Field(
        None, description="grid axes: a cell field and its values (the Cartesian product)"
    )
    seeds: Seeds = 1
    block_size: _int("block_size") = Field(None, description="seeds per block job")
    block_seconds: Seconds = Field(
        None, description="pack grid points into one block job up to this many seconds"
    )
    claims: Annotated[list[Claim], BeforeValidator(lambda v: [] if v is None else v)] = Field(
        [], description="predictions of the theory tested against the run (docs/claims.md)"
    )

    @model_validator(mode="after")
    def _fixed_or_axis(self) -> ExperimentModel:
        fixed = self.fixed.model_fields_set if self.fixed is not None else set()
        axes = self.grid.model_fields_set if self.grid is not None else set()
        for key in [k for k in _CELL_KEYS if k in axes and k in fixed][:1]:
            raise _Problem(f"'{key}' is both fixed and a grid axis")
        gens = [self.fixed.generator] if "generator" in fixed else []
        gens += self.grid.generator if "generator" in axes else []
        real = [g for g in gens if g in REAL_GENERATORS]
        for key in [k for k in ("d", "T") if real and (k in fixed or k in axes)][:1]:
            raise _Problem(
                f"'{key}' is set, but generator '{real[0]}' derives d and T from 'patch' and "
                "'positional' (T = (8 / patch)^2, d = pixels of a patch (+ T)); remove it"
            )
        return self


_PERIODIC = re.compile(r"(.+?)\1{19,}$")


def _name(name: Any) -> Any:
    """An experiment name: a directory and a Snakemake wildcard value."""
    if (
        not isinstance(name, str)
        or not name
        or not name.replace("_", "").replace("-", "").isalnum()
        or not name.isascii()
    ):
        raise _Problem(f"experiment name {name!r} must use letters, digits, '_' and '-' only")
    if len(name) > MAX_NAME_LENGTH:
        raise _Problem(
            f"experiment name {name[:20]!r}... has {len(name)} characters, "
            f"at most {MAX_NAME_LENGTH}"
        )
    m = _PERIODIC.search(name)
    if m:
        raise _Problem(
            f"experiment name {name!r} ends in {m.group(1)!r} repeated "
            f"{len(m.group(0)) // len(m.group(1))} times, which Snakemake cannot match "
            "(PeriodicWildcardError); choose another name"
        )
    return name


_NAME_SCHEMA = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_-]+$",
    "maxLength": MAX_NAME_LENGTH,
}
Name = Annotated[Any, AfterValidator(_name), WithJsonSchema(_NAME_SCHEMA)]


def _results(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise _Problem(f"'results' must be a non-empty directory path, got {short(value)}")
    return value


class SweepConfig(BaseModel):
    """A whole sweep config (config/README.md documents every key)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )
    results: Annotated[
        Any, AfterValidator(_results), WithJsonSchema({"type": "string", "minLength": 1})
    ] = Field("results", description="output directory")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where block jobs train (auto = CUDA when present)"
    )
    threads: _int("threads") = Field(1, description="threads per block job (torch intra-op)")
    mem_mb: _int("mem_mb") = Field(
        DEFAULT_MEM_MB,
        description="memory request per block job (MB); a block predicted to need more is refused",
    )
    block_size: _int("block_size") = Field(
        DEFAULT_BLOCK_SIZE, description="default number of seeds per block job"
    )
    block_seconds: Seconds = Field(
        DEFAULT_BLOCK_SECONDS,
        description="pack consecutive grid points of an experiment into one block job while its "
        "predicted CPU seconds stay under this (and its memory under 1 GiB); 0 = one grid point "
        "per block",
    )
    max_cells: _int("max_cells") = Field(
        DEFAULT_MAX_CELLS, description="refuse to plan more cells than this in total"
    )
    max_blocks: _int("max_blocks") = Field(
        DEFAULT_MAX_BLOCKS, description="refuse to plan more blocks (jobs) than this"
    )
    experiments: Annotated[dict[Name, ExperimentModel], Field(min_length=1)] = Field(
        description="named experiments, run in this order"
    )


TOP_KEYS = tuple(SweepConfig.model_fields)
EXPERIMENT_KEYS = tuple(ExperimentModel.model_fields)


# ----------------------------------------------------------------------- validation
def validate_config(config: dict[str, Any], figures: Collection[str]) -> SweepConfig:
    """Check ``config`` against :class:`SweepConfig`; raise one :class:`ConfigError` line.

    ``figures``: the names an experiment may draw (the figure registry's, which the caller
    knows). Of several problems the one reported is the first in reading order: top-level
    keys, then each experiment's name, keys, ``fixed``, ``grid``, seeds, figures, block settings.
    """
    figures = tuple(figures)
    try:
        return SweepConfig.model_validate(config, context={"figures": figures})
    except ValidationError as err:
        exps = config.get("experiments")
        names = list(exps) if isinstance(exps, dict) else []
        first = min(err.errors(include_url=False), key=lambda e: _rank(e, names))
        raise ConfigError(_message(first, config, figures)) from None


_PARTS = (
    "fixed", "grid", "seeds", "figures", "block_size", "block_seconds", "description", "claims",
)  # fmt: skip


def _rank(error: dict[str, Any], names: list[Any]) -> tuple:
    loc, kind = error["loc"], error["type"]
    if len(loc) == 1 or loc[0] != "experiments":
        if kind == "extra_forbidden":
            return (0,)
        order = ("block_size", "experiments", *TOP_KEYS)
        return (1, order.index(loc[0]) if loc[0] in order else len(order))
    rest = loc[2:]
    index = names.index(loc[1]) if loc[1] in names else len(names)
    if not rest:  # the experiment itself: not a mapping, or fixed and grid overlap
        sub = 1 if kind != "value_error" else 6
    elif rest[0] == "[key]":
        sub = 0
    elif rest[0] not in _PARTS:
        sub = 2
    elif rest[0] in ("fixed", "grid") and len(rest) > 1:
        sub = 4 if kind == "extra_forbidden" else 5 if rest[0] == "fixed" else 7
    else:
        sub = 3 if rest[0] in ("fixed", "grid") else 8 + _PARTS.index(rest[0])
    return (2, index, sub, str(rest))


def _problem(error: dict[str, Any]) -> str:
    return str(error.get("ctx", {}).get("error", error["msg"]))


def _int_message(where: str, key: str, error: dict[str, Any]) -> str:
    low, high = INT_RANGES[key]
    if error["type"] == "less_than_equal":
        return f"{where}: '{key}' must be at most {high}, got {error['input']!r}"
    return f"{where}: '{key}' must be an integer >= {low}, got {short(error['input'])}"


def _seconds_message(where: str, error: dict[str, Any]) -> str:
    return (
        f"{where}: 'block_seconds' must be a number of seconds in "
        f"[0, {MAX_BLOCK_SECONDS:.0f}], got {short(error['input'])}"
    )


def _top_message(error: dict[str, Any]) -> str:
    key, value = error["loc"][0], error["input"]
    if error["type"] == "extra_forbidden":
        return unknown_key("config", key, TOP_KEYS)
    if key == "experiments":
        return "config: 'experiments' must be a non-empty mapping of named experiments"
    if key == "device":
        return f"config: 'device' must be one of auto, cpu, cuda, got {short(value)}"
    if key == "block_seconds":
        return _seconds_message("config", error)
    if key in INT_RANGES:
        return _int_message("config", key, error)
    return f"config: {_problem(error)}"


def _message(error: dict[str, Any], config: dict[str, Any], figures: tuple[str, ...]) -> str:
    """One line naming where, the key, the value and what is allowed."""
    loc, kind, value = error["loc"], error["type"], error["input"]
    if len(loc) == 1 or loc[0] != "experiments":
        return _top_message(error)
    where, rest = f"experiment '{loc[1]}'", loc[2:]
    if not rest:
        if kind == "value_error":
            return f"{where}: {_problem(error)}"
        return f"{where}: must be a mapping, got {type(value).__name__}"
    part = rest[0]
    if part == "[key]":
        return f"config: {_problem(error)}"
    if kind == "extra_forbidden" and len(rest) == 1:
        return unknown_key(where, part, EXPERIMENT_KEYS)
    if part in ("fixed", "grid"):
        return _cells_message(where, part, rest[1:], error, config["experiments"][loc[1]])
    if part == "figures":
        return (
            f"{where}: unknown figure {short(value)}{_hint(str(value), figures)} "
            f"(allowed: {', '.join(figures)})"
        )
    if part == "block_size":
        return _int_message(where, "block_size", error)
    if part == "block_seconds":
        return _seconds_message(where, error)
    if part == "description":
        return f"{where}: 'description' must be text, got {short(value)}"
    if part == "claims":
        return _claim_message(where, rest[1:], error, config["experiments"][loc[1]])
    return f"{where}: {_problem(error)}"  # seeds


def _cells_message(
    where: str, part: str, rest: tuple, error: dict[str, Any], raw: dict[str, Any]
) -> str:
    """A problem of ``fixed`` or ``grid`` (``rest``: the location within it)."""
    if not rest:
        return f"{where}: '{part}' must be a mapping, got {short(error['input'])}"
    key = rest[0]
    if error["type"] == "extra_forbidden":
        if key == "seed":
            return f"{where}: set seeds with 'seeds', not '{part}.seed'"
        return unknown_key(f"{where}.{part}", key, AXES)
    fixed = raw.get("fixed") if isinstance(raw.get("fixed"), dict) else {}
    if part == "fixed":
        return f"{where}: {field_message(key, error, fixed)}"
    if len(rest) == 1:  # the axis as a whole
        if error["type"] == "too_short":
            return f"{where}: grid axis '{key}' is empty"
        return f"{where}: grid axis '{key}' {_problem(error)}"
    at = f"{key}={short(error['input'])}"
    return f"{where} at {at}: {field_message(key, error, fixed)}"


def _claim_message(where: str, rest: tuple, error: dict[str, Any], raw: dict[str, Any]) -> str:
    """A problem of an experiment's ``claims`` (``rest``: the location within the list)."""
    kind, value = error["type"], error["input"]
    if not rest:
        return f"{where}: 'claims' must be a list of claims, got {short(value)}"
    claims = raw.get("claims") if isinstance(raw.get("claims"), list) else []
    entry = claims[rest[0]] if isinstance(rest[0], int) and rest[0] < len(claims) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    at = f"{where}: claim {short(name) if name is not None else '#' + str(rest[0] + 1)}"
    if kind == "union_tag_not_found":
        return f"{at}: must be a mapping, got {short(value)}"
    if kind == "union_tag_invalid":
        tag = error["ctx"]["tag"]
        return (
            f"{at}: unknown kind {tag!r}{_hint(str(tag), tuple(CLAIM_KINDS))} "
            f"(allowed: {', '.join(CLAIM_KINDS)})"
        )
    fields = tuple(CLAIM_KINDS[rest[1]].model_fields) if len(rest) > 1 else ()
    if len(rest) < 3:  # the claim as a whole: a rule tying its keys together
        return f"{at}: {_problem(error)}"
    key = rest[2]
    if kind == "extra_forbidden":
        return unknown_key(at, key, fields)
    if kind == "missing":
        return f"{at}: '{key}' is required"
    problem = _problem(error)
    if kind == "literal_error":
        problem = f"must be {error['ctx']['expected']}"
    problem = problem.replace("Input should be", "must be")
    return f"{at}: '{key}' {problem}, got {short(value)}"


# ----------------------------------------------------------------------- the JSON schema
def _drop_null_defaults(node: Any) -> Any:
    """Optional experiment keys default to the config's top-level values, not to null."""
    if isinstance(node, dict):
        return {k: _drop_null_defaults(v) for k, v in node.items() if (k, v) != ("default", None)}
    if isinstance(node, list):
        return [_drop_null_defaults(v) for v in node]
    return node


def schema_yaml(figures: Collection[str]) -> str:
    """``workflow/schemas/config.schema.yaml``: the JSON schema of :class:`SweepConfig`, with
    the figure names of the registry (``figures``) as the allowed values of ``figures``."""
    schema = _drop_null_defaults(SweepConfig.model_json_schema())
    prop = schema["$defs"]["ExperimentModel"]["properties"]["figures"]
    prop["items"] = {"enum": list(figures), "type": "string"}
    head = (
        "# GENERATED from attnsvm.config.schema.SweepConfig: do not edit; regenerate with\n"
        "#   attnsvm generate\n"
        "# attnsvm validates configs with the models themselves (attnsvm.plan.parse_config);\n"
        "# this file describes them to editors and readers.\n"
    )
    return head + yaml.safe_dump(schema, sort_keys=False, width=100)
