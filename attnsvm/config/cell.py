"""One grid cell: the complete, validated description of one training + SVM run.

A :class:`Cell` is what a workflow job receives, what a store records and what a summary
indexes by (docs/science.md §1-5 name every field). Cells that differ only in ``seed``
share a :meth:`Cell.shape_key` and are trained together as one batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

GENERATORS = (
    "gaussian",
    "relu",
    "orthonormal",
    "toy2d",
    *("ntp_acyclic", "ntp_cyclic", "ntp_text"),
    *("digits", "photos"),
)
#: generators of real tokens (attnsvm.gd.real_tokens): d and T follow from patch and positional
REAL_GENERATORS = ("digits", "photos")
HEADS = ("linear", "relu", "lambda")
PARAMS = ("W", "KQ")
ATTENTIONS = ("cross", "self", "sequence", "causal")
TASKS = ("train", "regpath", "ntp")
INITS = ("uniform", "zero")
OPTIMIZERS = (
    *("normalized", "plain", "sign", "adam", "spectral", "mirror1p5", "mirror3", "polyak"),
)
DTYPES = ("float64", "float32")
SPACINGS = ("log", "linear")


#: Upper bounds of the fields that multiply work (issue 17): beyond them a cell is a typo, not
#: an experiment. Memory and run time are predicted from the sizes (``predicted_bytes``,
#: ``predicted_seconds``) and checked against the machine or the workflow's ``mem_mb``.
MAX_SIZE = 100_000  # d, n and T each
MAX_ITERATIONS = 100_000_000
MAX_CHECKPOINTS = 10_000
MAX_HEADS = 1_000
#: checkpoint_count may exceed iterations up to this (the default; duplicates are dropped)
FREE_CHECKPOINTS = 30
#: seeds are stored as int64 coordinates: the largest seed the store (and so a cell) accepts
MAX_SEED = 2**63 - 1


CHOICES: dict[str, tuple[str, ...]] = {
    "generator": GENERATORS,
    "head": HEADS,
    "param": PARAMS,
    "attention": ATTENTIONS,
    "init": INITS,
    "optimizer": OPTIMIZERS,
    "dtype": DTYPES,
    "checkpoint_spacing": SPACINGS,
    "task": TASKS,
}
"""Allowed values of the cell fields that take one of a fixed set (validation, CLI choices)."""


class CellError(ValueError):
    """A cell field has a value outside what is allowed; the message names field and value."""


@dataclass(frozen=True)
class Cell:
    """One grid cell (docs/science.md sections 1-3: data, model, training; 5: thresholds).

    ``m`` is the inner dimension of ``W = K Q^T`` (``None`` means ``m = d``); it is ignored
    for ``param="W"``. ``lam`` is the lambda of the lambda head, ignored for other heads.
    """

    generator: str = "gaussian"
    d: int = 10
    T: int = 8
    n: int = 6
    head: str = "linear"
    lam: float = 0.0
    param: str = "W"
    m: int | None = None
    attention: str = "cross"
    init: str = "uniform"
    optimizer: str = "normalized"
    lr: float = 0.1
    iterations: int = 2000
    checkpoint_spacing: str = "log"
    checkpoint_count: int = 30
    dtype: str = "float64"
    corr_threshold: float = 0.99
    saturation_tol: float = 1e-3
    relevant_tol: float = 1e-3
    rank_tol: float = 1e-6
    support_tol: float = 1e-5
    train: bool = True
    train_head: bool = False
    task: str = "train"
    radius_min: float = 0.1
    radius_max: float = 100.0
    K: int = 6
    patch: int = 2
    positional: bool = False
    digit_pos: int = 3
    digit_neg: int = 8
    heads: int = 1
    norm_svms: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        _derive_real_sizes(self)
        validate_cell(self)
        # Fields a cell does not use are normalized, so that they do not change its identity:
        # m only matters for KQ, lam only for the lambda head (changing them reruns only the
        # blocks whose cells use them).
        if self.param != "KQ" and self.m is not None:
            object.__setattr__(self, "m", None)
        if self.head != "lambda" and self.lam != 0.0:
            object.__setattr__(self, "lam", 0.0)
        if self.task != "regpath":  # the radii only matter for the regularization path
            for name in _REGPATH_FIELDS:
                object.__setattr__(self, name, _REGPATH_DEFAULTS[name])
        if self.task != "ntp" and self.K != _DEFAULTS["K"]:  # the vocabulary: NTP only
            object.__setattr__(self, "K", _DEFAULTS["K"])
        unused = () if self.generator == "digits" else _DIGIT_FIELDS
        if self.generator not in REAL_GENERATORS:
            unused = _REAL_FIELDS
        for name in unused:  # the real-token fields only matter for their generators
            object.__setattr__(self, name, _DEFAULTS[name])

    # ------------------------------------------------------------------ derived values
    @property
    def inner_dim(self) -> int:
        """Inner dimension m of ``W = K Q^T`` (defaults to d)."""
        return self.d if self.m is None else self.m

    def shape_key(self) -> tuple:
        """Everything but the seed: cells with equal keys train as one batch."""
        return tuple((k, v) for k, v in self.to_dict().items() if k != "seed")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields, JSON-serializable.

        ``task`` and the radii are left out for ``task="train"`` (their defaults), ``K``
        for every task but ``ntp``, the real-token fields for the other generators, and
        ``heads``, ``norm_svms`` and ``train_head`` at their defaults, so cells written
        before these fields existed keep their description, digest and blocks.
        """
        out = {name: getattr(self, name) for name in _FIELD_NAMES}  # asdict: 10x slower
        if self.task == "train":
            for name in ("task", *_REGPATH_FIELDS):
                out.pop(name)
        if self.task != "ntp":
            out.pop("K")
        if self.generator not in REAL_GENERATORS:
            for name in _REAL_FIELDS:
                out.pop(name)
        elif self.generator != "digits":
            for name in _DIGIT_FIELDS:
                out.pop(name)
        if self.heads == 1:  # single head: the cells from before multi-head attention
            out.pop("heads")
        if not self.norm_svms:  # issue 15's field: cells without it keep their digests
            out.pop("norm_svms")
        if not self.train_head:  # the fixed head (the default): digests as before the field
            out.pop("train_head")
        return out

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> Cell:
        """A cell from the fields of a cell validated before (``to_dict`` of a planned cell),
        neither validated nor normalized again: the worker's way (fields left out keep their
        defaults, but d and T of real tokens are derived; an unknown key is still refused)."""
        unknown = values.keys() - _DEFAULTS.keys()
        if unknown:
            raise CellError(_unknown_key_message(sorted(unknown)[0], set(_DEFAULTS)))
        cell = object.__new__(cls)
        cell.__dict__.update(_DEFAULTS)
        cell.__dict__.update(values)
        _derive_real_sizes(cell)  # config values of a checked experiment leave d and T out
        return cell

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Cell:
        """Build a cell from a dict, rejecting unknown keys with a did-you-mean hint."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise CellError(_unknown_key_message(unknown[0], known))
        return cls(**values)

    def replace(self, **changes: Any) -> Cell:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def digest(self) -> str:
        """Stable SHA-256 of the cell's fields: identifies the cell in stores."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def checkpoints(self) -> list[int]:
        """Checkpoint iterations: log- or linearly spaced in [1, iterations], plus the last."""
        return checkpoint_iterations(
            self.iterations, self.checkpoint_count, self.checkpoint_spacing
        )


FIELD_DOCS: dict[str, str] = {
    "generator": "data generator (docs/science.md 1); relu draws V, orthonormal needs d >= T, "
    "toy2d needs n=2, T=3, d=2; digits / photos: patches of real images as tokens",
    "d": "token dimension (digits / photos: derived from patch and positional)",
    "T": "tokens per example (>= 2; digits / photos: derived, (8 / patch)^2)",
    "n": "examples",
    "head": "fixed prediction head (docs/science.md 2); relu needs generator relu",
    "lam": "lambda of the lambda head (>= 0)",
    "param": "train W directly or W = K Q^T (docs/science.md 2)",
    "m": "inner dimension of K and Q, 1..d (default: m = d)",
    "attention": "self: the query is the first token; sequence / causal: every token is a "
    "query over all tokens / the tokens up to it (docs/science.md 1, 4)",
    "init": "U(-1/sqrt(d), 1/sqrt(d)), or W = 0 / (K = 0.1 N(0,1), Q = 0) (docs/science.md 3)",
    "optimizer": "normalized or plain full-batch gradient descent (docs/science.md 3); sign, "
    "adam, spectral, mirror1p5, mirror3, polyak (docs/science.md 10)",
    "lr": "step size eta (> 0)",
    "iterations": "gradient descent steps",
    "checkpoint_spacing": "checkpoint iterations log-spaced, or every iterations/count",
    "checkpoint_count": "number of checkpoints (the last iteration is always one)",
    "dtype": "training precision (docs/science.md 3)",
    "corr_threshold": "correlation needed for global/local convergence, in (0, 1) "
    "(docs/science.md 5)",
    "saturation_tol": "unsaturated if min_i max_t s_it < 1 - tol, in (0, 1) (docs/science.md 5)",
    "relevant_tol": "Gen-SVM relevant tokens: s_it >= tol, in (0, 1) (docs/science.md 4)",
    "rank_tol": "relative singular-value tolerance of ranks, in (0, 1) (docs/science.md 5)",
    "support_tol": "tolerance for active SVM constraints (support tokens), in (0, 1)",
    "train": "train by gradient descent; without it only the SVMs of the optimal tokens (E3)",
    "train_head": "train the linear head v jointly with W or (K, Q) (docs/science.md 9)",
    "task": "regpath: norm-constrained minimizers along a radius grid instead of plain GD",
    "radius_min": "regpath only: smallest radius (> 0)",
    "radius_max": "regpath only: largest radius (> radius_min)",
    "K": "ntp only: vocabulary size (>= 2; docs/science.md 8)",
    "patch": "digits / photos only: side of the square patches (tokens) of an 8x8 image, 2 or 4",
    "positional": "digits / photos only: append a one-hot patch position to each token",
    "digit_pos": "digits only: the digit of label +1 (0..9)",
    "digit_neg": "digits only: the digit of label -1 (0..9, not digit_pos)",
    "heads": "attention heads H summed through the linear head (docs/science.md 12)",
    "norm_svms": "also solve the max-entry, spectral and l_p Att-SVMs of alpha and correlate "
    "GD with them (docs/science.md 10)",
    "seed": "random seed of data and initialization (>= 0)",
}
"""One line per :class:`Cell` field (config/README.md has the same table): CLI help text."""

_REGPATH_FIELDS = ("radius_min", "radius_max")
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Cell))  # scalars only: a shallow dict
_REGPATH_DEFAULTS = {"radius_min": 0.1, "radius_max": 100.0}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Cell)}
_DIGIT_FIELDS = ("digit_pos", "digit_neg")
_REAL_FIELDS = ("patch", "positional", *_DIGIT_FIELDS)


def _derive_real_sizes(c: Cell) -> None:
    """Set d and T of a real-token cell from its patch and positional fields (docs/science.md
    §9); a bad patch is left for the validation to name."""
    if c.generator not in REAL_GENERATORS:
        return
    from attnsvm.gd.real_tokens import PATCHES, token_count, token_dim

    if c.patch in PATCHES and isinstance(c.positional, bool):
        object.__setattr__(c, "T", token_count(c.patch))
        object.__setattr__(c, "d", token_dim(c.generator, c.patch, c.positional))


def checkpoint_iterations(iterations: int, count: int, spacing: str = "log") -> list[int]:
    """Sorted unique checkpoint iterations in ``[1, iterations]``, always including the last.

    ``log``: ``count`` points log-spaced from 1 to ``iterations`` (rounded, deduplicated).
    ``linear``: every ``iterations // count`` iterations (e.g. every 100 for 2000 / 20).
    """
    if spacing == "log":
        pts = {
            max(1, round(math.exp(math.log(iterations) * k / max(count - 1, 1))))
            for k in range(count)
        }
    else:
        step = max(1, iterations // count)
        pts = set(range(step, iterations + 1, step))
    pts.add(iterations)
    return sorted(p for p in pts if 1 <= p <= iterations)


def _unknown_key_message(key: str, known: set[str]) -> str:
    import difflib

    hint = difflib.get_close_matches(key, sorted(known), n=1)
    tail = f"; did you mean '{hint[0]}'?" if hint else ""
    return f"unknown cell field '{key}'{tail} (allowed: {', '.join(sorted(known))})"


class FieldRule(NamedTuple):
    """What values a cell field takes: ``kind`` (choice, int, optional int, real, bool), the
    bounds of a number (pydantic's ge/gt/le/lt), and the words of the messages."""

    kind: str
    bounds: dict[str, float]
    must: str  # "d must be <must>, got 0"
    above: str = ""  # instead of ``must`` above the maximum


_OPEN_UNIT = FieldRule("real", {"gt": 0, "lt": 1}, "a number in the open interval (0, 1)")
_POSITIVE = FieldRule("real", {"gt": 0}, "a positive finite number")
#: the one description of a cell field's values: :class:`attnsvm.config.schema.CellModel` and
#: the config's ``fixed`` and ``grid`` take their types from it, the messages their words
FIELD_RULES: dict[str, FieldRule] = {
    **{k: FieldRule("choice", {}, "one of " + ", ".join(v)) for k, v in CHOICES.items()},
    "d": FieldRule("int", {"ge": 1, "le": MAX_SIZE}, "a positive integer", f"at most {MAX_SIZE}"),
    "T": FieldRule("int", {"ge": 2, "le": MAX_SIZE}, "an integer >= 2", f"at most {MAX_SIZE}"),
    "n": FieldRule("int", {"ge": 1, "le": MAX_SIZE}, "a positive integer", f"at most {MAX_SIZE}"),
    "lam": FieldRule("real", {"ge": 0}, "a non-negative finite number"),
    "m": FieldRule("optional int", {"ge": 1}, "an integer in [1, d={d}] or null (m = d)"),
    "lr": _POSITIVE,
    "iterations": FieldRule(
        "int", {"ge": 1, "le": MAX_ITERATIONS}, "a positive integer", f"at most {MAX_ITERATIONS:_}"
    ),
    "checkpoint_count": FieldRule(
        "int", {"ge": 1, "le": MAX_CHECKPOINTS}, "a positive integer", f"at most {MAX_CHECKPOINTS}"
    ),
    **{
        name: _OPEN_UNIT
        for name in ("corr_threshold", "saturation_tol", "relevant_tol", "rank_tol", "support_tol")
    },
    "train": FieldRule("bool", {}, "true or false"),
    "positional": FieldRule("bool", {}, "true or false"),
    "patch": FieldRule("int", {"ge": 2, "le": 4}, "2 or 4 (a patch side dividing 8)"),
    **{k: FieldRule("int", {"ge": 0, "le": 9}, "a digit 0..9") for k in _DIGIT_FIELDS},
    "norm_svms": FieldRule("bool", {}, "true or false"),
    "train_head": FieldRule("bool", {}, "true or false"),
    "radius_min": _POSITIVE,
    "radius_max": _POSITIVE,
    "K": FieldRule("int", {"ge": 2, "le": MAX_SIZE}, "an integer >= 2", f"at most {MAX_SIZE}"),
    "heads": FieldRule(
        "int", {"ge": 1, "le": MAX_HEADS}, "a positive integer", f"at most {MAX_HEADS}"
    ),
    "seed": FieldRule(
        "int",
        {"ge": 0, "le": MAX_SEED},
        "a non-negative integer",
        f"at most 2**63 - 1 = {MAX_SEED} (seeds are stored as int64)",
    ),
}


def short(value: Any, limit: int = 80) -> str:
    """``repr`` of a (YAML) value for a message, cut to ``limit`` characters; a container is
    named by its type (never walked)."""
    if not isinstance(value, str | int | float | bool | type(None)):
        return f"a {type(value).__name__}"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def field_message(name: str, error: dict[str, Any], values: dict[str, Any] | None = None) -> str:
    """``d must be a positive integer, got 0``: one pydantic error of a cell field, in words.

    ``values``: the other fields given with it (the rule of ``m`` names ``d``).
    """
    rule = FIELD_RULES[name]
    words = rule.above if rule.above and error["type"] == "less_than_equal" else rule.must
    d = (values or {}).get("d", "d")
    return f"{name} must be {words.format(d=d)}, got {short(error['input'])}"


def cross_field_problem(c: Any) -> str | None:
    """The first rule that ties fields of ``c`` together and that ``c`` breaks (or None)."""
    if c.m is not None and c.m > c.d:
        return f"m must be an integer in [1, d={c.d}] or null (m = d), got {c.m!r}"
    if c.task != "regpath" and c.checkpoint_count > max(c.iterations, FREE_CHECKPOINTS):
        return (
            f"checkpoint_count must be at most iterations={c.iterations} (or "
            f"{FREE_CHECKPOINTS}): one checkpoint per step, got {c.checkpoint_count!r}"
        )
    if c.generator == "toy2d" and (c.n, c.T, c.d) != (2, 3, 2):
        return f"generator 'toy2d' needs n=2, T=3, d=2, got n={c.n}, T={c.T}, d={c.d}"
    if c.generator == "orthonormal" and c.d < c.T:
        return f"generator 'orthonormal' needs d >= T, got d={c.d}, T={c.T}"
    if c.generator in REAL_GENERATORS:
        problem = _real_problem(c)
        if problem:
            return problem
    if c.radius_max <= c.radius_min:
        return f"radius_max must exceed radius_min, got {c.radius_min!r} and {c.radius_max!r}"
    if c.task == "regpath" and not (c.train and c.head == "linear"):
        return "task 'regpath' needs train: true and head 'linear'"
    if (problem := _ntp_problem(c)) is not None:
        return problem
    if c.train_head and not (c.train and c.task == "train" and c.head == "linear"):
        return "train_head needs train: true, task 'train' and head 'linear' (docs/science.md 11)"
    if c.attention in ("sequence", "causal") and c.head != "linear":
        return f"attention {c.attention!r} needs head 'linear', got {c.head!r}"
    if c.heads > 1 and (c.task, c.head, c.train) != ("train", "linear", True):
        return "heads > 1 needs task 'train', head 'linear' and train: true (docs/science.md 12)"
    if c.heads > 1 and c.attention not in ("cross", "self"):
        return f"heads > 1 needs attention 'cross' or 'self', got {c.attention!r}"
    if c.head == "relu" and c.generator != "relu":
        return f"head 'relu' needs generator 'relu' (it draws V), got {c.generator!r}"
    if c.optimizer == "polyak" and not _polyak_ok(c):
        return (
            "optimizer 'polyak' needs task 'train', head 'linear', attention 'cross' or 'self', "
            "one attention head and a fixed head (its loss floor, docs/science.md 10)"
        )
    return None


def _polyak_ok(c: Any) -> bool:
    """Whether the Polyak step's loss floor is defined for ``c`` (docs/science.md §10)."""
    return (
        c.task == "train"
        and c.head == "linear"
        and c.attention in ("cross", "self")
        and c.heads == 1
        and not c.train_head
    )


def _ntp_problem(c: Any) -> str | None:
    """The rules of ``task: ntp`` (docs/science.md §8), or None."""
    ntp_gen = c.generator.startswith("ntp_")
    if (c.task == "ntp") != ntp_gen:
        return (
            f"task 'ntp' and the generators ntp_acyclic, ntp_cyclic, ntp_text go together, "
            f"got task {c.task!r} with generator {c.generator!r}"
        )
    if c.task != "ntp":
        return None
    if (c.head, c.attention) != ("linear", "cross"):
        return (
            "task 'ntp' keeps head 'linear' and attention 'cross' (unused), "
            f"got {c.head!r}, {c.attention!r}"
        )
    if c.generator != "ntp_text" and c.T > c.K:
        return (
            f"generator {c.generator!r} draws T distinct tokens: needs T <= K, got T={c.T}, K={c.K}"
        )
    if not c.train:
        return "task 'ntp' needs train: true"
    if c.norm_svms:
        return "norm_svms is for task 'train' (docs/science.md 10), not task 'ntp'"
    return None


def _real_problem(c: Any) -> str | None:
    """The first rule of the real-token generators (docs/science.md §9) that ``c`` breaks."""
    if c.patch not in (2, 4):
        return f"patch must be 2 or 4 (a patch side dividing 8), got {c.patch!r}"
    if c.generator == "digits" and c.digit_pos == c.digit_neg:
        return f"digit_pos and digit_neg must differ, got {c.digit_pos} and {c.digit_neg}"
    if c.n < 2:
        return f"generator {c.generator!r} needs n >= 2 (both labels), got n={c.n}"
    from attnsvm.gd.real_tokens import pool_size

    pos, neg = pool_size(c.generator, c.digit_pos, c.digit_neg)
    if (c.n + 1) // 2 > pos or c.n // 2 > neg:
        return (
            f"generator {c.generator!r} has {pos} examples of label +1 and {neg} of label -1: "
            f"n must be at most {2 * min(pos, neg) + (pos > neg)}, got n={c.n}"
        )
    return None


def validate_cell(c: Cell) -> None:
    """Raise :class:`CellError` naming the first invalid field, its value and what is allowed
    (the checks are :class:`attnsvm.config.schema.CellModel`'s)."""
    from attnsvm.config.schema import CellModel  # pydantic: only where cells are validated

    values = c.__dict__
    try:
        CellModel.model_validate(values)
    except ValueError as err:  # pydantic's ValidationError
        first = err.errors(include_url=False)[0]
        if first["loc"]:
            raise CellError(field_message(first["loc"][0], first, values)) from None
        raise CellError(str(first["ctx"]["error"])) from None


def _constraint_rows(c: Cell) -> int:
    """Rows of the largest SVM constraint system of a cell (docs/science.md §4)."""
    if c.attention in ("sequence", "causal"):
        return c.n * c.T * (c.T - 1)  # one query per token
    return c.n * (c.T - 1)


def predicted_bytes(c: Cell, batch: int = 1) -> int:
    """Predicted peak memory (bytes) of training ``batch`` seeds of ``c`` and solving its SVMs.

    An order-of-magnitude model from the sizes alone (docs/science.md §1-4), used to refuse
    absurd cells before anything is allocated: training holds per seed the data ``(n, T, d)``,
    a few copies of the parameters (``d x d`` for W, ``2 d x m`` for KQ) and the checkpointed
    trajectory ``(C, d, d)`` plus softmax ``(C, n, T)``; the SVM solvers build dense constraint
    matrices of ``rows x d^2`` (rows = n (T - 1), or n T (T - 1) for sequence attention).
    """
    d, n, T = c.d, c.n, c.T
    floats = 4 * n * T * d * batch  # data, labels, scores, softmax of the current step
    if c.train:
        params = (d * d if c.param == "W" else 2 * d * c.inner_dim + d * d) * c.heads
        n_ckpt = min(c.checkpoint_count, c.iterations) + 1
        if c.task == "regpath":
            n_ckpt = c.checkpoint_count + 1
        floats += batch * (6 * params + n_ckpt * (d * d + n * T))
    floats += 3 * _constraint_rows(c) * d * d + 10 * d * d
    return 8 * floats


#: Constants of the cost model (seconds on one CPU core), least-squares fitted to the per-stage
#: timings that block stores record (``bench/fit_cost_model.py`` refits them from any runs and
#: prints how far each experiment's prediction is from its measured time).
STEP_SECONDS = 6.2e-4
"""One GD step of one grid point (Python and kernel overhead, shared by its batched seeds)."""
PATH_STEP_SECONDS = 4.1e-3
"""One projected step of a regularization path (docs/science.md §3), per grid point."""
FLOP_SECONDS = 7.4e-10
"""One multiply-add of a step: ``n T d x inner`` of them per seed and step."""
CELL_SECONDS = 1.1e-2
"""Per cell, whatever its size: SVM set-up, metrics, bookkeeping."""
SOLVE_SECONDS = 1.0e-6
"""Per unit of :func:`svm_size`: the convex SVM solves of one cell."""
LOWRANK_SECONDS = 2.5e-3
"""Per unit of :func:`svm_size`: the rank-constrained SVM of a KQ cell with m < d (restarts)."""


def train_steps(c: Cell) -> int:
    """GD steps of a cell: ``iterations``, per radius for a regularization path."""
    if not c.train:
        return 0
    return c.iterations * (c.checkpoint_count if c.task == "regpath" else 1)


def svm_size(c: Cell) -> float:
    """``(n T)^1.5 d``: how the cost of a cell's SVM solves grows with its sizes."""
    return (c.n * c.T) ** 1.5 * c.d


def solves_low_rank(c: Cell) -> bool:
    """Whether the cell solves the rank-constrained SVM (KQ with m < d; docs/science.md §4)."""
    return c.param == "KQ" and c.inner_dim < c.d


def predicted_seconds(c: Cell, batch: int = 1) -> float:
    """Predicted CPU seconds per cell when ``batch`` seeds train together (a planning estimate).

    Training costs a per-step overhead shared by the batch plus ``n T d x inner`` multiply-adds
    per seed and step (inner = d for W, m for KQ); the SVM solves grow with :func:`svm_size`.
    The constants above are fitted to measured block timings; the estimate sizes block packing
    (``block_seconds``), job runtimes and ``attnsvm status``'s remaining time.
    """
    steps = train_steps(c)
    inner = c.d if c.param == "W" else c.inner_dim
    step = PATH_STEP_SECONDS if c.task == "regpath" else STEP_SECONDS
    flops = c.n * c.T * c.d * inner * c.heads
    train = steps * (step / max(batch, 1) + FLOP_SECONDS * flops)
    solve = SOLVE_SECONDS + LOWRANK_SECONDS * solves_low_rank(c)
    return train + CELL_SECONDS + solve * svm_size(c)


def machine_memory_bytes() -> int | None:
    """Physical memory of this machine in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


#: ``attnsvm run-cell`` warns above this predicted run time (seconds)
RUN_CELL_WARN_SECONDS = 600.0


def check_run_cost(c: Cell, memory_bytes: int | None = None) -> str | None:
    """Refuse a cell predicted not to fit in memory; a warning if it is predicted to be slow.

    ``memory_bytes``: the memory available (default: this machine's physical memory). Raises
    :class:`CellError` naming the sizes; returns a warning text above RUN_CELL_WARN_SECONDS.
    """
    need = predicted_bytes(c)
    have = machine_memory_bytes() if memory_bytes is None else memory_bytes
    if have is not None and need > have:
        raise CellError(
            f"d={c.d}, n={c.n}, T={c.T} (checkpoint_count={c.checkpoint_count}) is predicted to "
            f"need {format_bytes(need)} of memory, more than this machine's {format_bytes(have)}"
        )
    secs = predicted_seconds(c)
    if secs > RUN_CELL_WARN_SECONDS:
        return (
            f"iterations={c.iterations}, d={c.d}, n={c.n}, T={c.T}: predicted to take about "
            f"{secs / 60:.0f} minutes (Ctrl-C stops it)"
        )
    return None


def format_bytes(n: float) -> str:
    """``745.1 GiB``: a byte count for messages."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
