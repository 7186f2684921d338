"""Sweep configuration -> experiments -> grid points -> blocks of cells.

An experiment has ``fixed`` cell settings, grid ``axes`` (any :class:`~attnsvm.cell.Cell`
field) and ``seeds`` (a count or a list). A *grid point* is one combination of axis values;
a *block* is up to ``block_size`` consecutive seeds of one grid point, so all its cells share
a shape and train as one batch. A block is the unit of a workflow job and of resume: its
name is built from its axis values and seed range only, so adding an axis value or more
seeds leaves every existing full block's name and cells unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from dataclasses import dataclass
from typing import Any

from attnsvm.cell import Cell, CellError

CELL_FIELDS = tuple(f.name for f in dataclasses.fields(Cell))
EXPERIMENT_KEYS = ("description", "figures", "fixed", "grid", "seeds", "block_size")
TOP_KEYS = ("results", "device", "threads", "mem_mb", "block_size", "max_cells", "experiments")
PAPER_FIGURES = ("e1", "e2", "e3", "e4", "e5", "e6")
"""Figures E1-E6 of the paper (SCIENCE.md section 6); the report shows them first."""
FIGURES = (*PAPER_FIGURES, "phase", "rank_gd", "rank_m", "attention", "regpath", "optimizer")
DEFAULT_BLOCK_SIZE = 64


class ConfigError(ValueError):
    """A sweep configuration problem; the message names the key, the value and what is allowed."""


@dataclass(frozen=True)
class Block:
    """A block of cells of one grid point: the unit of a job, a store and a resume."""

    experiment: str
    name: str
    point: tuple[tuple[str, Any], ...]  # axis values of the grid point
    cells: tuple[Cell, ...]

    @property
    def seeds(self) -> list[int]:
        return [c.seed for c in self.cells]


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: fixed settings, axes (ordered), seeds, figures, block size."""

    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]
    seeds: list[int]
    figures: list[str]
    block_size: int
    description: str = ""

    def points(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every grid point as ((axis, value), ...) in axis order (Cartesian product)."""
        names = list(self.axes)
        return [
            tuple(zip(names, vals, strict=True)) for vals in itertools.product(*self.axes.values())
        ]

    def cell(self, point: tuple[tuple[str, Any], ...], seed: int) -> Cell:
        return Cell(**{**self.fixed, **dict(point), "seed": seed})

    def blocks(self) -> list[Block]:
        """Blocks of up to ``block_size`` consecutive seeds per grid point."""
        out = []
        for point in self.points():
            for k in range(0, len(self.seeds), self.block_size):
                seeds = self.seeds[k : k + self.block_size]
                cells = tuple(self.cell(point, s) for s in seeds)
                out.append(Block(self.name, block_name(point, seeds), point, cells))
        return out

    @property
    def n_cells(self) -> int:
        total = len(self.seeds)
        for vals in self.axes.values():
            total *= len(vals)
        return total


_FLOAT_FIELDS = {f.name for f in dataclasses.fields(Cell) if f.type in ("float", float)}


def _coerce(key: str, value: Any) -> Any:
    """YAML 1.1 reads ``1e-3`` as a string: accept it for float fields."""
    if key in _FLOAT_FIELDS and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def block_name(point: tuple[tuple[str, Any], ...], seeds: list[int]) -> str:
    """``d=10_param=KQ_seeds=0-63``: readable, stable under insertion of other axis values."""
    parts = [f"{k}={_fmt_value(v)}" for k, v in point]
    parts.append(f"seeds={seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"seeds={seeds[0]}")
    return "_".join(parts)


def _hint(key: str, allowed: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _unknown(where: str, key: str, allowed: tuple[str, ...]) -> ConfigError:
    return ConfigError(
        f"{where}: unknown key '{key}'{_hint(key, allowed)} (allowed: {', '.join(allowed)})"
    )


def _check_int(where: str, key: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{where}: '{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def parse_seeds(where: str, seeds: Any) -> list[int]:
    """``seeds``: a count N (seeds 0..N-1) or a list of distinct non-negative integers."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ConfigError(f"{where}: 'seeds' as a count must be >= 1, got {seeds}")
        return list(range(seeds))
    if not isinstance(seeds, list) or not seeds:
        raise ConfigError(
            f"{where}: 'seeds' must be a positive count or a non-empty list, got {seeds!r}"
        )
    for s in seeds:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise ConfigError(f"{where}: seeds must be non-negative integers, got {s!r}")
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ConfigError(f"{where}: duplicate seeds {dup}")
    return sorted(seeds)


def parse_experiment(name: str, raw: Any, default_block_size: int) -> Experiment:
    """Validate one experiment entry and every cell it describes (errors name key and value)."""
    where = f"experiment '{name}'"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in EXPERIMENT_KEYS:
            raise _unknown(where, key, EXPERIMENT_KEYS)
    fixed = raw.get("fixed") or {}
    grid = raw.get("grid") or {}
    if isinstance(fixed, dict):
        fixed = {k: _coerce(k, v) for k, v in fixed.items()}
    for part, mapping in (("fixed", fixed), ("grid", grid)):
        if not isinstance(mapping, dict):
            raise ConfigError(f"{where}: '{part}' must be a mapping, got {mapping!r}")
        for key in mapping:
            if key == "seed":
                raise ConfigError(f"{where}: set seeds with 'seeds', not '{part}.seed'")
            if key not in CELL_FIELDS:
                raise _unknown(f"{where}.{part}", key, CELL_FIELDS)
    axes: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if key in fixed:
            raise ConfigError(f"{where}: '{key}' is both fixed and a grid axis")
        if not isinstance(values, list):
            values = [values]
        values = [_coerce(key, v) for v in values]
        if not values:
            raise ConfigError(f"{where}: grid axis '{key}' is empty")
        seen = [repr(v) for v in values]
        dup = sorted({s for s in seen if seen.count(s) > 1})
        if dup:
            raise ConfigError(f"{where}: grid axis '{key}' has duplicate values {', '.join(dup)}")
        axes[key] = values
    seeds = parse_seeds(where, raw.get("seeds", 1))
    figures = raw.get("figures") or []
    if not isinstance(figures, list):
        figures = [figures]
    for fig in figures:
        if fig not in FIGURES:
            raise ConfigError(
                f"{where}: unknown figure {fig!r}{_hint(str(fig), FIGURES)} "
                f"(allowed: {', '.join(FIGURES)})"
            )
    block_size = _check_int(where, "block_size", raw.get("block_size", default_block_size), 1)
    exp = Experiment(
        name, dict(fixed), axes, seeds, list(figures), block_size, str(raw.get("description", ""))
    )
    for point in exp.points():  # every cell must be valid before any job starts
        try:
            exp.cell(point, seeds[0])
        except CellError as err:
            at = ", ".join(f"{k}={v!r}" for k, v in point)
            raise ConfigError(f"{where}{' at ' + at if at else ''}: {err}") from None
        except TypeError as err:
            raise ConfigError(f"{where}: {err}") from None
    return exp


def parse_config(config: Any) -> dict[str, Experiment]:
    """Validate a whole sweep config (top-level keys, experiments, cells) into experiments."""
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a mapping, got {type(config).__name__}")
    for key in config:
        if key not in TOP_KEYS:
            raise _unknown("config", key, TOP_KEYS)
    block_size = _check_int("config", "block_size", config.get("block_size", DEFAULT_BLOCK_SIZE), 1)
    exps = config.get("experiments")
    if not isinstance(exps, dict) or not exps:
        raise ConfigError("config: 'experiments' must be a non-empty mapping of named experiments")
    device = config.get("device", "auto")
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"config: 'device' must be one of auto, cpu, cuda, got {device!r}")
    _check_int("config", "threads", config.get("threads", 1), 1)
    _check_int("config", "mem_mb", config.get("mem_mb", 4000), 100)
    out = {}
    for name, raw in exps.items():
        if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(
                f"config: experiment name {name!r} must use letters, digits, '_' and '-' only"
            )
        out[name] = parse_experiment(name, raw, block_size)
    if "max_cells" in config:
        limit = _check_int("config", "max_cells", config["max_cells"], 1)
        total = sum(e.n_cells for e in out.values())
        if total > limit:
            raise ConfigError(
                f"config: the grid has {total} cells, more than max_cells={limit}; "
                "raise max_cells if this is intended"
            )
    return out
