"""Sweep configuration -> experiments -> grid points -> blocks of cells.

An experiment has ``fixed`` cell settings, grid ``axes`` (any :class:`~attnsvm.config.cell.Cell`
field) and ``seeds`` (a count or a list). A *grid point* is one combination of axis values;
a *block* is up to ``block_size`` consecutive seeds of one grid point, so all its cells share
a shape and train as one batch. A block is the unit of a workflow job and of resume: its
name is built from its axis values and seed range only, so adding an axis value or more
seeds leaves every existing full block's name and cells unchanged.

With ``block_seconds`` > 0, consecutive grid points whose seeds fit in one block are packed
into one block (one job) while its predicted CPU seconds stay under ``block_seconds`` and its
predicted memory under ``PACK_MAX_BYTES``: cheap grid points then pay one worker start-up (~3-5 s of
imports and interpreter) together instead of one each (issue 19; BENCHMARKS.md, per-job
start-up). Points are packed only with points whose cells store alike (same head, generator,
training and checkpoints); a packed block's name spans its first and last point. The packs of
an earlier plan of the same results are kept (:attr:`Experiment.kept_packs`,
:mod:`attnsvm.sweep.packs`), so that extending a grid packs only its new points.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from attnsvm.config.cell import Cell
from attnsvm.config.claims import ClaimModel
from attnsvm.config.cost import format_bytes, format_cpu_time, predicted_bytes, predicted_seconds
from attnsvm.config.errors import CellError, ConfigError
from attnsvm.config.schema import (
    DEFAULT_BLOCK_SECONDS,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MAX_CELLS,
    DEFAULT_MEM_MB,
    SweepConfig,
    validate_config,
    yaml_value,
)

#: predicted memory (:func:`attnsvm.config.cost.predicted_bytes`, summed over the grid points) up
#: to which points are packed into one block; a quarter of the default ``mem_mb``
PACK_MAX_BYTES = 2**30
#: YAML values (scalars, lists and mappings, every alias counted again) in a whole config
MAX_CONFIG_NODES = 200_000
#: longest block name kept readable; longer ones are shortened with a digest (file names
#: may have at most 255 bytes)
MAX_BLOCK_NAME = 200

Point = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Block:
    """A block of cells: the unit of a job, a store and a resume.

    Its cells are the ``seeds`` of one grid point, or (packed, ``block_seconds`` > 0) of
    several consecutive grid points (``points``). They are built only when asked for, so a
    job builds its own block's cells and no other (:meth:`Experiment.block`).
    """

    experiment: str
    name: str
    points: tuple[Point, ...]  # axis values of its grid points (one unless packed)
    seed_values: tuple[int, ...]  # the seeds of each point
    make: Callable[[Point, int], Cell] = dataclasses.field(compare=False, repr=False)

    @property
    def point(self) -> Point:
        """The (first) grid point."""
        return self.points[0]

    @functools.cached_property
    def cells(self) -> tuple[Cell, ...]:
        """Its cells: every seed of its first point, then of the next (built once)."""
        return tuple(self.make(p, s) for p in self.points for s in self.seed_values)

    @property
    def seeds(self) -> list[int]:
        """The seed of every cell, in cell order."""
        return [s for _ in self.points for s in self.seed_values]

    def points_of_cells(self) -> tuple[Point, ...]:
        """The grid point of every cell, in cell order."""
        return tuple(p for p in self.points for _ in self.seed_values)

    def predicted_seconds(self) -> float:
        """Predicted CPU seconds of its cells (:func:`attnsvm.config.cost.predicted_seconds`;
        each grid point's seeds train as one batch); one cell per point is built."""
        k = len(self.seed_values)
        return sum(predicted_seconds(self.make(p, self.seed_values[0]), k) * k for p in self.points)


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: fixed settings, axes (ordered), seeds, figures, block size."""

    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]
    seeds: Sequence[int]  # sorted; a range for ``seeds: N`` (never enumerated to count it)
    figures: list[str]
    block_size: int
    description: str = ""
    block_seconds: float = DEFAULT_BLOCK_SECONDS
    #: its claims (:mod:`attnsvm.config.claims` models; docs/claims.md), checked against what
    #: its cells store by :func:`attnsvm.plan.parse_config`
    claims: tuple[ClaimModel, ...] = ()
    #: its cells were validated (one per grid point, by :func:`parse_config`): the cells of its
    #: blocks are then built without validating them again (:meth:`Cell.trusted`)
    checked: bool = dataclasses.field(default=False, compare=False, repr=False)
    #: the packs of an earlier plan of the same results (``((name, points), ...)``,
    #: :mod:`attnsvm.sweep.packs`): kept as they are wherever still valid, so that extending
    #: the grid never repacks (and so recomputes) a finished point; see :meth:`packs`
    kept_packs: tuple[tuple[str, tuple[Point, ...]], ...] = ()

    def points(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every grid point as ((axis, value), ...) in axis order (Cartesian product)."""
        names = list(self.axes)
        return [
            tuple(zip(names, vals, strict=True)) for vals in itertools.product(*self.axes.values())
        ]

    def cell(self, point: tuple[tuple[str, Any], ...], seed: int) -> Cell:
        """The cell of a grid point and seed (validated, unless the experiment is checked)."""
        values = {**self.fixed, **dict(point), "seed": seed}
        return Cell.trusted(values) if self.checked else Cell(**values)

    def blocks(self) -> list[Block]:
        """Blocks of up to ``block_size`` consecutive seeds per grid point, and with
        ``block_seconds`` > 0 packs of cheap grid points (:meth:`packs`; module docstring).
        Their cells are built when asked for (:attr:`Block.cells`)."""
        out = []
        for name, pack in self.packs():
            if len(pack) > 1:
                out.append(Block(self.name, name, tuple(pack), tuple(self.seeds), self.cell))
                continue
            point = pack[0]
            for k in range(0, len(self.seeds), self.block_size):
                seeds = tuple(self.seeds[k : k + self.block_size])
                out.append(Block(self.name, block_name(point, seeds), (point,), seeds, self.cell))
        return out

    def block(self, name: str) -> Block:
        """The block named ``name`` (a job's own block: only its cells are built), found
        without packing the grid again: among :attr:`kept_packs`, else among the blocks of
        one grid point (a job's plan keeps every pack of the plan that made the job)."""
        seeds = tuple(self.seeds)
        for pack_name, members in self.kept_packs:
            if pack_name == name:
                return Block(self.name, name, tuple(members), seeds, self.cell)
        for point in self.points():
            for k in range(0, len(seeds), self.block_size):
                if block_name(point, seeds[k : k + self.block_size]) == name:
                    return Block(self.name, name, (point,), seeds[k : k + self.block_size],
                                 self.cell)  # fmt: skip
        for b in self.blocks():  # a new pack of this plan
            if b.name == name:
                return b
        raise ConfigError(f"experiment {self.name!r} has no block {name!r}")

    def packs(self) -> list[tuple[str, list[Point]]]:
        """Grid points cut into packs, ``[(name, points)]`` in grid order: one point each
        unless ``block_seconds`` > 0.

        Packing never repacks a point of a kept pack (:attr:`kept_packs`, an earlier plan's):
        a kept pack whose points are all still in the grid, alike in what they store and
        together within ``PACK_MAX_BYTES`` stays as it is, under its name; the other points
        are packed in grid order while the predicted CPU seconds of a pack stay under
        ``block_seconds``, its memory under ``PACK_MAX_BYTES`` and its cells store alike
        (issue 41: adding ``d: 20`` packs the new points, and computes only them). A new
        pack's name spans its first and last point."""
        points = self.points()
        if not _packs(self):
            return [(block_name(p, self.seeds), [p]) for p in points]
        per_point = len(self.seeds)
        facts: dict[Point, tuple[float, tuple, int]] = {}

        def fact(point: Point) -> tuple[float, tuple, int]:
            if point not in facts:
                cell = self.cell(point, self.seeds[0])
                cost = predicted_seconds(cell, per_point) * per_point
                facts[point] = (cost, _storage_key(cell), predicted_bytes(cell, per_point))
            return facts[point]

        order = {p: i for i, p in enumerate(points)}
        used: set[Point] = set()
        packs: list[tuple[str, list[Point]]] = []
        for name, members in self.kept_packs:
            if len(members) < 2 or any(m not in order or m in used for m in members):
                continue
            if len({fact(m)[1] for m in members}) != 1:
                continue
            if sum(fact(m)[2] for m in members) > PACK_MAX_BYTES:
                continue
            packs.append((name, sorted(members, key=order.__getitem__)))
            used.update(members)
        fresh: list[list[Point]] = []
        key, seconds, memory = None, 0.0, 0
        for point in points:
            if point in used:
                continue
            cost, this, size = fact(point)
            full = fresh and (
                this != key or seconds + cost > self.block_seconds or memory + size > PACK_MAX_BYTES
            )
            if not fresh or full:
                fresh.append([point])
                key, seconds, memory = this, cost, size
            else:
                fresh[-1].append(point)
                seconds, memory = seconds + cost, memory + size
        for pack in fresh:
            last = pack[-1] if len(pack) > 1 else None
            packs.append((block_name(pack[0], self.seeds, last=last), pack))
        return sorted(packs, key=lambda pack: order[pack[1][0]])

    @property
    def packing(self) -> bool:
        """Whether grid points are packed into blocks (``block_seconds`` > 0 and every point's
        seeds in one block)."""
        return _packs(self)

    @property
    def n_cells(self) -> int:
        """Cells of the experiment, from the lengths of its axes and seeds (nothing is built)."""
        return len(self.seeds) * math.prod(len(v) for v in self.axes.values())

    def predicted_cost(self) -> tuple[int, float]:
        """Predicted peak bytes of the largest block and CPU seconds of all cells.

        From one cell per grid point (:func:`attnsvm.config.cost.predicted_bytes`,
        :func:`attnsvm.config.cost.predicted_seconds`); no block is built.
        """
        batch = min(self.block_size, len(self.seeds))
        most, seconds = 0, 0.0
        for point in self.points():
            cell = self.cell(point, self.seeds[0])
            most = max(most, predicted_bytes(cell, batch))
            seconds += predicted_seconds(cell, batch) * len(self.seeds)
        return most, seconds

    @property
    def n_blocks_unpacked(self) -> int:
        """Grid points x ceil(seeds / block_size), from the axes' lengths (nothing is built):
        the blocks without packing, an upper bound of :attr:`n_blocks`."""
        per_point = -(-len(self.seeds) // self.block_size)
        return per_point * math.prod(len(v) for v in self.axes.values())

    @property
    def n_blocks(self) -> int:
        """Blocks of the experiment; packing (``block_seconds`` > 0) builds one cell per
        grid point to count them."""
        if _packs(self):
            return len(self.packs())
        return self.n_blocks_unpacked


def _storage_key(cell: Cell) -> tuple:
    """What cells must share to be stored in one block: the variables and checkpoints they
    produce (:func:`attnsvm.sweep.store.results_to_dataset`); sizes may differ (padded)."""
    return (cell.head, cell.generator, cell.train, cell.task, tuple(cell.checkpoints()))


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def block_name(
    point: tuple[tuple[str, Any], ...],
    seeds: Sequence[int],
    last: tuple[tuple[str, Any], ...] | None = None,
) -> str:
    """``d=10_param=KQ_seeds=0-63``: readable, stable under insertion of other axis values.

    A packed block (``last``: its last grid point) is named
    ``d=2_param=W_to_d=8_param=KQ_seeds=0-2``.

    Snakemake can always match it: it never contains ``/``, and it ends in the seed range,
    whose numbers have at most 19 digits (seeds <= 2**63 - 1), so no suffix of it repeats 20
    times (Snakemake's PeriodicWildcardError). A name longer than MAX_BLOCK_NAME characters
    (many axes, long values) keeps its first part and the seed range around a digest of the
    whole name, so it fits in a file name and stays unique.
    """
    parts = [f"{k}={_fmt_value(v)}" for k, v in point]
    if last is not None:
        parts += ["to", *(f"{k}={_fmt_value(v)}" for k, v in last)]
    tail = f"seeds={seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"seeds={seeds[0]}"
    name = "_".join([*parts, tail]).replace("/", "%2F")
    if len(name) > MAX_BLOCK_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        keep = MAX_BLOCK_NAME - len(tail) - len(digest) - 4
        name = f"{name[:keep]}_h={digest}_{tail}"
    return name


def check_config_size(config: Any, limit: int = MAX_CONFIG_NODES) -> None:
    """Refuse a config with more than ``limit`` YAML values, counting every alias again.

    YAML aliases share objects, so a small file can describe a structure with billions of
    values ("billion laughs"); this walk stops after ``limit`` values, in well under a second,
    before anything walks the whole structure.
    """
    stack = [config]
    count = 0
    while stack:
        obj = stack.pop()
        count += 1
        if count > limit:
            raise ConfigError(
                f"config: more than {limit:,} values (YAML aliases counted each time they are "
                "used); a config this large is a mistake or an alias bomb".replace(",", "_")
            )
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)


def _shape(
    name: str,
    raw: dict[str, Any],
    block_size: int,
    block_seconds: float,
    claims: Sequence[ClaimModel] = (),
) -> Experiment:
    """The experiment of a config entry the models accepted (defaults filled in, YAML float
    strings read, one value made an axis; ``claims``: its validated claims); its cells are
    neither built nor validated."""
    fixed = {k: yaml_value(k, v) for k, v in (raw.get("fixed") or {}).items()}
    axes = {
        k: [yaml_value(k, v) for v in (values if isinstance(values, list) else [values])]
        for k, values in (raw.get("grid") or {}).items()
    }
    seeds = raw.get("seeds", 1)
    if isinstance(seeds, dict):  # {from: first, count: N}: seeds first .. first + N - 1
        seeds = range(seeds["from"], seeds["from"] + seeds["count"])
    else:
        seeds = range(seeds) if isinstance(seeds, int) else sorted(seeds)
    figures = raw.get("figures") or []
    return Experiment(
        name,
        fixed,
        axes,
        seeds,
        figures if isinstance(figures, list) else [figures],
        raw.get("block_size", block_size),
        raw.get("description", ""),
        float(raw.get("block_seconds", block_seconds)),
        tuple(claims),
    )


def _shapes(config: dict[str, Any], model: SweepConfig) -> list[Experiment]:
    """The experiments of a config that ``model`` (its validation) accepted."""
    block_size = config.get("block_size", DEFAULT_BLOCK_SIZE)
    block_seconds = config.get("block_seconds", DEFAULT_BLOCK_SECONDS)
    return [
        _shape(name, raw, block_size, block_seconds, model.experiments[name].claims)
        for name, raw in config["experiments"].items()
    ]


def planned_experiment(config: dict[str, Any], name: str) -> Experiment:
    """Experiment ``name`` of a config that :func:`parse_config` accepted before (the Snakemake
    process that planned the job did), built without validating it or its cells again."""
    exp = _shape(
        name,
        config["experiments"][name],
        config.get("block_size", DEFAULT_BLOCK_SIZE),
        config.get("block_seconds", DEFAULT_BLOCK_SECONDS),
    )
    return dataclasses.replace(exp, seeds=list(exp.seeds), checked=True)


def _check_cells(exp: Experiment, mem_mb: int | None) -> Experiment:
    """Build and validate one cell per grid point; refuse a block predicted not to fit.

    Called only once the grid's size is known to be within ``max_cells``.
    """
    where = f"experiment '{exp.name}'"
    batch = min(exp.block_size, len(exp.seeds))  # a training batch: one point's seeds
    worst: tuple[int, tuple] = (0, ())
    for point in exp.points():  # every cell must be valid before any job starts
        at = " at " + ", ".join(f"{k}={v!r}" for k, v in point) if point else ""
        try:
            cell = exp.cell(point, exp.seeds[0])
        except CellError as err:
            raise ConfigError(f"{where}{at}: {err}") from None
        worst = max(worst, (predicted_bytes(cell, batch), point), key=lambda w: w[0])
    if mem_mb is not None and worst[0] > mem_mb * 2**20:
        at = " at " + ", ".join(f"{k}={v!r}" for k, v in worst[1]) if worst[1] else ""
        raise ConfigError(
            f"{where}{at}: a block of {batch} cells is predicted to need "
            f"{format_bytes(worst[0])}, more than mem_mb={mem_mb} "
            f"({format_bytes(mem_mb * 2**20)}) per block job; lower d, n, T, "
            "checkpoint_count or block_size, or raise mem_mb"
        )
    return dataclasses.replace(exp, seeds=list(exp.seeds), checked=True)


def parse_experiment(
    name: str,
    raw: Any,
    default_block_size: int,
    mem_mb: int | None = None,
    *,
    figures: Collection[str],
) -> Experiment:
    """Validate one experiment entry and every cell it describes (errors name key and value).

    Refuses more than DEFAULT_MAX_CELLS cells before building any; ``mem_mb``: refuse a block
    predicted to need more memory (MB); ``figures``: the figure names it may draw.
    """
    config = {"block_size": default_block_size, "experiments": {name: raw}}
    (exp,) = _shapes(config, validate_config(config, figures))
    _check_max_cells(exp.n_cells, DEFAULT_MAX_CELLS, default=True)
    return _check_cells(exp, mem_mb)


def _check_max_cells(total: int, limit: int, default: bool) -> None:
    if total > limit:
        how = (
            f"more than the default max_cells={limit}; set max_cells higher"
            if default
            else f"more than max_cells={limit}; raise max_cells"
        )
        raise ConfigError(
            f"config: the grid has {total} cells, {how} if this is intended "
            "(a typo like 'seeds: 100000'?)"
        )


def describe_cost(exp: Experiment) -> str:
    """``16 cells in 2 blocks, largest block ~1.2 MiB, ~36 CPU-s`` (predicted)."""
    most, seconds = exp.predicted_cost()
    return (
        f"{exp.n_cells} cells in {exp.n_blocks} blocks, largest block ~{format_bytes(most)}, "
        f"~{format_cpu_time(seconds)} predicted"
    )


def parse_sweep(config: Any, *, figures: Collection[str]) -> dict[str, Experiment]:
    """Validate a whole sweep config (top-level keys, experiments, cells) into experiments.

    ``figures``: the figure names an experiment may draw; :func:`attnsvm.plan.parse_config`
    passes the registry's (the one validation everything calls). The keys and values are
    checked by the models of :mod:`attnsvm.config.schema`, the rules that tie cell fields
    together on one cell per grid point (:data:`~attnsvm.config.schema.CellModel`); the other
    cells of a point differ only in their seed, and are built unchecked.

    Work is bounded whatever the input (issue 17): the config's size is checked first, the
    cells and blocks are counted from the axes' lengths and checked against ``max_cells`` and
    ``max_blocks`` (defaults DEFAULT_MAX_CELLS, DEFAULT_MAX_BLOCKS) before any is built, and
    the largest block's predicted memory against ``mem_mb``. Packed blocks
    (``block_seconds``) are counted again once one cell per grid point is validated.
    """
    check_config_size(config)
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a mapping, got {type(config).__name__}")
    model = validate_config(config, figures)  # every key and value (not yet cross-field rules)
    shapes = _shapes(config, model)
    limit = config.get("max_cells", DEFAULT_MAX_CELLS)
    max_blocks = config.get("max_blocks", DEFAULT_MAX_BLOCKS)
    mem_mb = config.get("mem_mb", DEFAULT_MEM_MB)
    _check_max_cells(sum(e.n_cells for e in shapes), limit, "max_cells" not in config)
    # blocks are counted from the axes' lengths before any cell is built; packing
    # (block_seconds) can only lower that count, and counting packs needs valid cells
    unpacked = sum(e.n_blocks_unpacked for e in shapes)
    if unpacked > max_blocks and not any(_packs(e) for e in shapes):
        raise _too_many_blocks(unpacked, max_blocks, "max_blocks" not in config)
    checked = [_check_cells(e, mem_mb) for e in shapes]
    n_blocks = sum(e.n_blocks for e in checked)
    if n_blocks > max_blocks:
        raise _too_many_blocks(n_blocks, max_blocks, "max_blocks" not in config)
    return {e.name: e for e in checked}


def _too_many_blocks(n_blocks: int, max_blocks: int, default: bool) -> ConfigError:
    return ConfigError(
        f"config: the grid has {n_blocks} blocks (workflow jobs), more than "
        f"{'the default ' if default else ''}max_blocks={max_blocks}; raise block_size "
        "(seeds per job), block_seconds (packs cheap grid points) or max_blocks"
    )


def _packs(exp: Experiment) -> bool:
    """Whether ``exp`` may pack grid points into one block (``block_seconds``)."""
    return exp.block_seconds > 0 and len(exp.seeds) <= exp.block_size


def experiment_from_json(text: str) -> Experiment:
    """Rebuild an :class:`Experiment` from :meth:`attnsvm.plan.Plan.experiment_config` JSON.

    The JSON comes from a plan whose config was validated (:mod:`attnsvm.config.schema`), so
    its cells are trusted, not validated again.
    """
    raw = json.loads(text)
    return Experiment(
        raw["name"],
        raw["fixed"],
        raw["grid"],
        raw["seeds"],
        raw["figures"],
        raw["block_size"],
        raw.get("description", ""),
        raw.get("block_seconds", 0.0),
        checked=True,
    )
