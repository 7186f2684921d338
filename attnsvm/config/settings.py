"""What each stage sees of a cell: its settings, the fields it consumes (docs/extending.md).

:meth:`attnsvm.config.cell.Cell.settings` gives a stage (data, train, measure; the registry's
:data:`~attnsvm.config.fields.STAGES`) the fields it consumes and a few :data:`DERIVED`
values, as one read-only object that its code takes whole: a trainer receives the cell's
``train`` settings and passes them down to the kernel, so a new field reaches every model
without a hand-made list of keywords in between.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from attnsvm.config.fields import DEFAULTS, FIELDS, NAMES, STAGES


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


#: Values every stage may read besides its fields, derived from them: name -> (function of the
#: field values, the fields it reads).
DERIVED: Mapping[str, tuple[Callable[[Mapping[str, Any]], Any], tuple[str, ...]]] = {
    "checkpoints": (
        lambda v: checkpoint_iterations(
            v["iterations"], v["checkpoint_count"], v["checkpoint_spacing"]
        ),
        ("iterations", "checkpoint_count", "checkpoint_spacing"),
    ),
    "inner_dim": (lambda v: v["d"] if v["m"] is None else v["m"], ("d", "m")),
}


def stage_fields(stage: str) -> tuple[str, ...]:
    """The fields that ``stage`` consumes (registry order)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    return tuple(f.name for f in FIELDS if stage in f.stages)


class Settings(Mapping[str, Any]):
    """What one stage sees of a cell: the fields it consumes and the :data:`DERIVED` values,
    read-only, as attributes (``settings.lr``) or items.

    Reading a field the stage does not consume is an error naming the registry, so a stage
    never depends on a field without declaring it (docs/extending.md). A stage's code takes
    its settings whole: a new field reaches it without any change in between.
    """

    __slots__ = ("_stage", "_values")

    def __init__(self, stage: str, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_values", dict(values))

    @classmethod
    def of(cls, stage: str, source: Any = None, /, **overrides: Any) -> Settings:
        """The ``stage`` settings of ``source`` (a cell, other settings or a mapping of field
        values; missing fields take their defaults), with ``overrides`` (fields or derived
        values, e.g. ``checkpoints=[0, 10]`` of a library call) on top."""
        names = stage_fields(stage)
        values = dict(DEFAULTS)
        if isinstance(source, Settings):
            values.update(source._values)
        elif isinstance(source, Mapping):
            values.update(source)
        elif source is not None:
            values.update({k: getattr(source, k) for k in NAMES})
        derived = {}
        for name, (fn, needs) in DERIVED.items():
            if name in values or any(n in names for n in needs):
                derived[name] = values[name] if name in values else fn(values)
        unknown = set(overrides) - set(names) - set(DERIVED)
        if unknown:
            raise TypeError(
                f"stage {stage!r} has no setting {sorted(unknown)[0]!r} (its fields: "
                f"{', '.join(names)}; derived: {', '.join(DERIVED)})"
            )
        out = {k: values[k] for k in names} | derived
        out.update(overrides)
        return cls(stage, out)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        try:
            return values[name]
        except KeyError:
            raise AttributeError(
                f"the {self._stage!r} stage does not consume the cell field {name!r}: add "
                f"{self._stage!r} to its stages in attnsvm/config/fields.py"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("settings are read-only")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"Settings[{self._stage}]({body})"

    def replace(self, **changes: Any) -> Settings:
        """A copy with some values changed (e.g. the head's own learning rate)."""
        return Settings(self._stage, {**self._values, **changes})
