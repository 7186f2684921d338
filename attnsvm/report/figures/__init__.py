"""The registry of figures: one module per figure, named as the figure (docs/science.md §6).

Every module of this package is one figure: ``e1`` ... ``e6`` reproduce experiments E1-E6 of
the paper (arXiv 2308.16898), the others go beyond it. A module declares ``FIGURE``, a
:class:`Figure`: its short label, the sweep variables it reads, its report caption (text and
the numbers of the run, from the summary) and its plot function.
A module also declares ``TASKS``, a literal tuple of the tasks (the ``task`` field) whose cells
it draws: the config validation refuses an experiment with a cell of another task
(:func:`figure_tasks`, read from the module's source without importing it).
Adding a figure is adding a module here and naming it in an experiment's ``figures``.

The list of names (:data:`FIGURES`) comes from the module file names, without importing them,
so that config parsing and the block worker read it without matplotlib or xarray; the paper
figures come first (e1..e6 in order), then the others by name. :func:`figure` imports one.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_PAPER = re.compile(r"e(\d+)")


@dataclass(frozen=True)
class Figure:
    """One figure of the report (declared as ``FIGURE`` by the module of the same name).

    ``variables``: sweep variables :func:`plot` reads (the sweep is reduced to them);
    ``what`` / ``look``: caption text (RST) saying what the figure shows and what to look for;
    ``numbers(summary)``: the caption's headline numbers of this run (RST sentences);
    ``plot(sweep, summary)``: the matplotlib Figure. :func:`attnsvm.report.draw.make_figure`
    draws it and writes its files.
    """

    name: str
    label: str
    what: str
    look: str
    plot: Callable[[Any, Any], Any]
    numbers: Callable[[Any], list[str]]
    variables: tuple[str, ...] = ()


def _names() -> tuple[str, ...]:
    found = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    paper = sorted((m for m in found if _PAPER.fullmatch(m)), key=lambda m: int(m[1:]))
    return (*paper, *sorted(m for m in found if m not in paper))


#: Every figure name: the paper's E1-E6 first, then the beyond-the-paper figures.
FIGURES: tuple[str, ...] = _names()
#: The paper's figures (E1-E6 of docs/science.md §6); the report shows them first.
PAPER_FIGURES: tuple[str, ...] = tuple(f for f in FIGURES if _PAPER.fullmatch(f))


@functools.cache
def figure_tasks(name: str) -> tuple[str, ...]:
    """The tasks whose cells figure ``name`` draws: its module's ``TASKS`` literal, read from
    the source without importing the module (config parsing stays free of matplotlib)."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; expected one of {list(FIGURES)}")
    spec = importlib.util.find_spec(f"{__name__}.{name}")
    source = Path(spec.origin).read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "TASKS"
        ):
            return tuple(ast.literal_eval(node.value))
    raise ValueError(f"figure module {name} declares no TASKS")


def figure(name: str) -> Figure:
    """The declaration of figure ``name`` (imports its module, and so matplotlib)."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; expected one of {list(FIGURES)}")
    return importlib.import_module(f"{__name__}.{name}").FIGURE


def figure_module(name: str):
    """The module drawing figure ``name``."""
    figure(name)
    return importlib.import_module(f"{__name__}.{name}")


__all__ = ["FIGURES", "PAPER_FIGURES", "Figure", "figure", "figure_module", "figure_tasks"]
