"""One grid cell: the complete, validated description of one training + SVM run.

A :class:`Cell` is what a workflow job receives, what a store records and what a summary
indexes by. Its fields are those of the registry :data:`attnsvm.config.fields.FIELDS`, which
declares each of them once (type, default, allowed values, meaning, when it matters, when it
enters the description, who consumes it); this module turns the registry into the frozen
dataclass. Cells that differ only in ``seed`` share a :meth:`Cell.shape_key` and are trained
together as one batch.

A block's cells are serialized once, as :func:`cells_text` (canonical JSON of their
descriptions); the block's digest is the SHA-256 of that same text (:func:`text_digest`).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from attnsvm.config.errors import CellError
from attnsvm.config.fields import CONDITIONAL, DEFAULTS, FIELDS, NAMES
from attnsvm.config.settings import Settings, checkpoint_iterations
from attnsvm.images import REAL_GENERATORS, token_count, token_dim


class _CellMethods:
    """The behaviour of :class:`Cell`; its fields come from the registry."""

    __slots__ = ()

    def __post_init__(self) -> None:
        _derive_real_sizes(self)
        validate_cell(self)
        # A field that does not apply to this cell (m without KQ, lam without the lambda head,
        # the radii without regpath, ...) is reset to its default, so that it does not change
        # the cell's identity: changing it reruns only the blocks whose cells use it.
        for f in CONDITIONAL:
            if not f.applies(self) and getattr(self, f.name) != f.default:  # type: ignore[misc]
                object.__setattr__(self, f.name, f.default)

    # ------------------------------------------------------------------ derived values
    @property
    def inner_dim(self) -> int:
        """Inner dimension m of ``W = K Q^T`` (defaults to d)."""
        return self.d if self.m is None else self.m  # type: ignore[attr-defined]

    def shape_key(self) -> tuple:
        """Everything but the seed: cells with equal keys train as one batch."""
        return tuple((k, v) for k, v in self.to_dict().items() if k != "seed")

    def to_dict(self) -> dict[str, Any]:
        """The cell's description: the fields that enter it (``Field.described``), in registry
        order, JSON-serializable. A field left out (a new field at its default, a field that
        does not apply) keeps the descriptions and digests of cells written before it."""
        return {f.name: getattr(self, f.name) for f in FIELDS if f.in_description(self)}

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> Cell:
        """A cell from the fields of a cell validated before (``to_dict`` of a planned cell),
        neither validated nor normalized again: the worker's way (fields left out keep their
        defaults, but d and T of real tokens are derived; an unknown key is still refused)."""
        unknown = values.keys() - DEFAULTS.keys()
        if unknown:
            raise CellError(_unknown_key_message(sorted(unknown)[0], set(DEFAULTS)))
        cell = object.__new__(cls)
        cell.__dict__.update(DEFAULTS)
        cell.__dict__.update(values)
        _derive_real_sizes(cell)  # config values of a checked experiment leave d and T out
        return cell

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Cell:
        """Build a cell from a dict, rejecting unknown keys with a did-you-mean hint."""
        unknown = sorted(set(values) - set(NAMES))
        if unknown:
            raise CellError(_unknown_key_message(unknown[0], set(NAMES)))
        return cls(**values)

    def replace(self, **changes: Any) -> Cell:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def digest(self) -> str:
        """Stable SHA-256 of the cell's description: identifies the cell in stores."""
        return text_digest(_canonical(self.to_dict()))

    def checkpoints(self) -> list[int]:
        """Checkpoint iterations: log- or linearly spaced in [1, iterations], plus the last."""
        return checkpoint_iterations(
            self.iterations,  # type: ignore[attr-defined]
            self.checkpoint_count,  # type: ignore[attr-defined]
            self.checkpoint_spacing,  # type: ignore[attr-defined]
        )

    def settings(self, stage: str) -> Settings:
        """What ``stage`` (``data``, ``train``, ``measure``) sees of this cell: the fields it
        consumes, passed whole to its code (:mod:`attnsvm.config.settings`)."""
        return Settings.of(stage, self)


Cell = dataclasses.make_dataclass(
    "Cell",
    [(f.name, f.type, dataclasses.field(default=f.default)) for f in FIELDS],
    bases=(_CellMethods,),
    frozen=True,
)
Cell.__module__ = __name__  # make_dataclass's own ``module`` argument needs Python 3.12
Cell.__doc__ = """One grid cell (docs/science.md sections 1-3: data, model, training; 5: metrics).

Its fields, their defaults and meanings are those of :data:`attnsvm.config.fields.FIELDS`
(``config/README.md`` has the table). ``m`` is the inner dimension of ``W = K Q^T`` (``None``
means ``m = d``); fields that do not apply to a cell (``m`` for ``param="W"``, ``lam`` for
another head, ...) are reset to their defaults.
"""


def _derive_real_sizes(c: Any) -> None:
    """Set d and T of a real-token cell from its patch and positional fields (docs/science.md
    §9); a bad patch is left for the validation to name."""
    if c.generator not in REAL_GENERATORS:
        return
    if c.patch in (2, 4) and isinstance(c.positional, bool):
        object.__setattr__(c, "T", token_count(c.patch))
        object.__setattr__(c, "d", token_dim(c.generator, c.patch, c.positional))


def _unknown_key_message(key: str, known: set[str]) -> str:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    tail = f"; did you mean '{hint[0]}'?" if hint else ""
    return f"unknown cell field '{key}'{tail} (allowed: {', '.join(sorted(known))})"


def validate_cell(c: Any) -> None:
    """Raise :class:`CellError` naming the first invalid field, its value and what is allowed
    (the checks of :class:`attnsvm.config.schema.CellModel`)."""
    # pydantic is imported only where cells are validated (the block worker never does)
    from attnsvm.config.schema import check_cell_values

    check_cell_values(c.__dict__)


# ----------------------------------------------------------------------- serialization
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def cells_text(cells: Sequence[Any]) -> str:
    """The one serialization of a block's cells (cells or their description dicts): canonical
    JSON of their descriptions, in order. What a job hands its worker, what the store records
    (attribute ``cells``) and what the digest is taken of."""
    dicts = [c if isinstance(c, dict) else c.to_dict() for c in cells]
    return _canonical(dicts)


def text_digest(text: str) -> str:
    """SHA-256 of a :func:`cells_text` (or one cell's canonical description)."""
    return hashlib.sha256(text.encode()).hexdigest()


def cells_digest(cells: Sequence[Any]) -> str:
    """SHA-256 of the block's cell descriptions (order included; cells or their dicts)."""
    return text_digest(cells_text(cells))


def cells_from_text(text: str) -> list[Cell]:
    """The cells of a :func:`cells_text`, trusted (validated when the plan was built)."""
    return [Cell.trusted(d) for d in json.loads(text)]


def stub() -> str:
    """``attnsvm/config/cell.pyi``: :class:`Cell` as a literal frozen dataclass, so that editors
    and type checkers see its fields (``cell.d: int``) and methods; written from the registry
    by ``attnsvm generate``, checked by ``attnsvm generate --check``."""
    lines = [
        '"""Generated by `attnsvm generate` from attnsvm/config/fields.py: do not edit."""',
        "",
        "import dataclasses",
        "from collections.abc import Sequence",
        "from typing import Any",
        "",
        "from attnsvm.config.errors import CellError as CellError",
        "from attnsvm.config.settings import Settings",
        "from attnsvm.config.settings import checkpoint_iterations as checkpoint_iterations",
        "",
        "@dataclasses.dataclass(frozen=True)",
        "class Cell:",
        '    """One grid cell: the fields of attnsvm.config.fields.FIELDS (config/README.md)."""',
        "",
    ]
    for f in FIELDS:
        default = json.dumps(f.default) if isinstance(f.default, str) else repr(f.default)
        lines.append(f"    {f.name}: {f.type} = {default}")
        doc = textwrap.wrap(f.doc.replace("\\", "/"), 88)
        lines += [f'    """{doc[0]}', *(f"    {x}" for x in doc[1:])]
        lines[-1] += '"""'
    lines += ["    @property", "    def inner_dim(self) -> int: ..."]
    for sig in _METHODS:
        if sig.startswith("cls"):
            lines.append("    @classmethod")
        lines.append(f"    def {sig.split(': ', 1)[1] if sig.startswith('cls') else sig}: ...")
    lines += ["", *(f"def {sig}: ..." for sig in _FUNCTIONS), ""]
    return "\n".join(lines)


#: the signatures of Cell's methods (``cls: ``: a classmethod) and of this module's functions
_METHODS = (
    "shape_key(self) -> tuple[tuple[str, Any], ...]",
    "to_dict(self) -> dict[str, Any]",
    "cls: trusted(cls, values: dict[str, Any]) -> Cell",
    "cls: from_dict(cls, values: dict[str, Any]) -> Cell",
    "replace(self, **changes: Any) -> Cell",
    "digest(self) -> str",
    "checkpoints(self) -> list[int]",
    "settings(self, stage: str) -> Settings",
)
_FUNCTIONS = (
    "validate_cell(c: Any) -> None",
    "cells_text(cells: Sequence[Any]) -> str",
    "text_digest(text: str) -> str",
    "cells_digest(cells: Sequence[Any]) -> str",
    "cells_from_text(text: str) -> list[Cell]",
    "stub() -> str",
)


__all__ = [
    "Cell",
    "CellError",
    "cells_digest",
    "cells_from_text",
    "cells_text",
    "checkpoint_iterations",
    "stub",
    "text_digest",
    "validate_cell",
]
