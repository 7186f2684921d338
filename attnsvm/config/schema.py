"""The sweep config as typed models (pydantic v2): the one description of what a config may say.

:class:`SweepConfig` covers the top-level keys, each experiment (:class:`ExperimentModel`) and
the cell fields of its ``fixed`` settings and ``grid`` axes, with their types, ranges and
allowed values (the cell's own are :data:`attnsvm.config.cell.FIELD_RULES`; the rules that tie
fields together are checked on one cell per grid point by
:func:`attnsvm.config.gridmod.parse_config`). Every model forbids unknown keys.

:func:`validate_config` runs the models and turns the first problem into one
:class:`~attnsvm.config.gridmod.ConfigError` line naming the key, the value, what is allowed and a
did-you-mean hint. Snakemake (``workflow/rules/common.smk``), ``attnsvm check-config`` and
``attnsvm status`` all validate through :func:`attnsvm.config.gridmod.parse_config`, which calls it;
``workflow/schemas/config.schema.yaml`` is generated from :class:`SweepConfig`
(:func:`schema_yaml`, ``python -m attnsvm.config.schema``) for editors and readers.
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import functools
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    create_model,
    model_validator,
)

from attnsvm.config import grid as gridmod
from attnsvm.config.cell import (
    CHOICES,
    FIELD_RULES,
    MAX_SEED,
    REAL_GENERATORS,
    Cell,
    cross_field_problem,
    field_message,
    short,
)
from attnsvm.config.grid import ConfigError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
_STRICT = ConfigDict(extra="forbid", strict=True)
_FLOAT_FIELDS = tuple(
    k for k, rule in FIELD_RULES.items() if "finite" in rule[1] or "(0, 1)" in rule[1]
)


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
    """The type of cell field ``name``, from :data:`attnsvm.config.cell.FIELD_RULES`."""
    rule = FIELD_RULES[name]
    if rule.kind == "choice":
        return Literal[CHOICES[name]]
    if rule.kind == "bool":
        return Annotated[bool, Field(strict=True)]
    if rule.kind == "real":
        return Annotated[float, Field(strict=True, allow_inf_nan=False, **rule.bounds)]
    number = Annotated[int, Field(strict=True, **rule.bounds)]
    return number | None if rule.kind == "optional int" else number


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
    "1-5): the types and ranges of FIELD_RULES, and the rules that tie fields together "
    "(:func:`~attnsvm.config.cell.cross_field_problem`).",
    **{f.name: (cell_type(f.name), f.default) for f in dataclasses.fields(Cell)},
)


def _config_type(name: str) -> Any:
    """The type of cell field ``name`` in a config (float fields also take ``'1e-3'``)."""
    kind = cell_type(name)
    if name not in gridmod._FLOAT_FIELDS:
        return kind
    return Annotated[kind, BeforeValidator(functools.partial(gridmod.yaml_value, name))]


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


_CELL_KEYS = tuple(k for k in FIELD_RULES if k != "seed")
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
    """``seeds``: a count N (seeds 0..N-1) or a list of distinct integers in [0, 2**63 - 1]."""
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
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
            "minItems": 1,
            "uniqueItems": True,
        },
    ],
    "description": "a count N (seeds 0..N-1) or a list of distinct seeds",
}
Seeds = Annotated[Any, AfterValidator(_seeds), WithJsonSchema(_SEEDS_SCHEMA)]
Seconds = Annotated[
    float, Field(ge=0, le=gridmod.MAX_BLOCK_SECONDS, strict=True, allow_inf_nan=False)
]
#: the integer settings: key -> (minimum, maximum or None)
INT_RANGES = {
    "block_size": (1, gridmod.MAX_BLOCK_SIZE),
    "threads": (1, gridmod.MAX_THREADS),
    "mem_mb": (100, gridmod.MAX_MEM_MB),
    "max_cells": (1, None),
    "max_blocks": (1, None),
}


def _int(key: str) -> Any:
    low, high = INT_RANGES[key]
    return Annotated[int, Field(ge=low, le=high, strict=True)]


def _or_empty(value: Any) -> Any:
    return value or {}  # ``fixed:`` left empty (null) is no setting


class ExperimentModel(BaseModel):
    """One experiment: fixed settings, grid axes, seeds, figures, block size (docs/science.md §6
    names the paper's)."""

    model_config = _STRICT
    description: str = Field("", description="one line for the report")
    figures: Annotated[
        list[Literal[gridmod.FIGURES]],
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
    if len(name) > gridmod.MAX_NAME_LENGTH:
        raise _Problem(
            f"experiment name {name[:20]!r}... has {len(name)} characters, "
            f"at most {gridmod.MAX_NAME_LENGTH}"
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
    "maxLength": gridmod.MAX_NAME_LENGTH,
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
        gridmod.DEFAULT_MEM_MB,
        description="memory request per block job (MB); a block predicted to need more is refused",
    )
    block_size: _int("block_size") = Field(
        gridmod.DEFAULT_BLOCK_SIZE, description="default number of seeds per block job"
    )
    block_seconds: Seconds = Field(
        gridmod.DEFAULT_BLOCK_SECONDS,
        description="pack consecutive grid points of an experiment into one block job while its "
        "predicted CPU seconds stay under this (and its memory under 1 GiB); 0 = one grid point "
        "per block",
    )
    max_cells: _int("max_cells") = Field(
        gridmod.DEFAULT_MAX_CELLS, description="refuse to plan more cells than this in total"
    )
    max_blocks: _int("max_blocks") = Field(
        gridmod.DEFAULT_MAX_BLOCKS, description="refuse to plan more blocks (jobs) than this"
    )
    experiments: Annotated[dict[Name, ExperimentModel], Field(min_length=1)] = Field(
        description="named experiments, run in this order"
    )


TOP_KEYS = tuple(SweepConfig.model_fields)
EXPERIMENT_KEYS = tuple(ExperimentModel.model_fields)


# ----------------------------------------------------------------------- validation
def validate_config(config: dict[str, Any]) -> SweepConfig:
    """Check ``config`` against :class:`SweepConfig`; raise one :class:`ConfigError` line.

    Of several problems the one reported is the first in reading order: top-level keys,
    then each experiment's name, keys, ``fixed``, ``grid``, seeds, figures, block settings.
    """
    try:
        return SweepConfig.model_validate(config)
    except ValidationError as err:
        exps = config.get("experiments")
        names = list(exps) if isinstance(exps, dict) else []
        first = min(err.errors(include_url=False), key=lambda e: _rank(e, names))
        raise ConfigError(_message(first, config)) from None


_PARTS = ("fixed", "grid", "seeds", "figures", "block_size", "block_seconds", "description")


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
        f"[0, {gridmod.MAX_BLOCK_SECONDS:.0f}], got {short(error['input'])}"
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


def _message(error: dict[str, Any], config: dict[str, Any]) -> str:
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
            f"{where}: unknown figure {short(value)}{_hint(str(value), gridmod.FIGURES)} "
            f"(allowed: {', '.join(gridmod.FIGURES)})"
        )
    if part == "block_size":
        return _int_message(where, "block_size", error)
    if part == "block_seconds":
        return _seconds_message(where, error)
    if part == "description":
        return f"{where}: 'description' must be text, got {short(value)}"
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
        return unknown_key(f"{where}.{part}", key, gridmod.CELL_FIELDS)
    fixed = raw.get("fixed") if isinstance(raw.get("fixed"), dict) else {}
    if part == "fixed":
        return f"{where}: {field_message(key, error, fixed)}"
    if len(rest) == 1:  # the axis as a whole
        if error["type"] == "too_short":
            return f"{where}: grid axis '{key}' is empty"
        return f"{where}: grid axis '{key}' {_problem(error)}"
    at = f"{key}={short(error['input'])}"
    return f"{where} at {at}: {field_message(key, error, fixed)}"


# ----------------------------------------------------------------------- the JSON schema
def _drop_null_defaults(node: Any) -> Any:
    """Optional experiment keys default to the config's top-level values, not to null."""
    if isinstance(node, dict):
        return {k: _drop_null_defaults(v) for k, v in node.items() if (k, v) != ("default", None)}
    if isinstance(node, list):
        return [_drop_null_defaults(v) for v in node]
    return node


def schema_yaml() -> str:
    """``workflow/schemas/config.schema.yaml``: the JSON schema of :class:`SweepConfig`."""
    schema = _drop_null_defaults(SweepConfig.model_json_schema())
    head = (
        "# GENERATED from attnsvm.config.schema.SweepConfig: do not edit; regenerate with\n"
        "#   python -m attnsvm.config.schema\n"
        "# attnsvm validates configs with the models themselves (parse_config in\n"
        "# attnsvm.config.grid); this file describes them to editors and readers.\n"
    )
    return head + yaml.safe_dump(schema, sort_keys=False, width=100)


if __name__ == "__main__":
    SCHEMA_PATH.write_text(schema_yaml())
    print(f"wrote {SCHEMA_PATH}", file=sys.stderr)
