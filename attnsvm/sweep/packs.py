"""The packs of an experiment's plan, kept between runs: ``<experiment>/.attnsvm-packs.json``.

With ``block_seconds`` > 0 cheap grid points are packed into one block (one job, one store;
:meth:`attnsvm.config.grid.Experiment.packs`). A pack is defined by its points, so the
packing must not change when the grid grows: adding ``d: 20`` must pack the new points and
leave every finished pack as it is (issue 41). The workflow's plan therefore records its packs
here when it starts a run (:func:`write`), and every later plan of the same results keeps them
(:func:`kept`): the next run (extended grid or not), each job of this run (which builds its
own block from it), collect, ``attnsvm status``. A missing, unreadable or foreign file only
means that the grid is packed afresh; a pack whose cells changed is recomputed as ever (its
store's cells digest is checked against the plan).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnsvm.atomic import write_text_atomic

if TYPE_CHECKING:  # the config models: not for attnsvm status, which needs only NAME
    from attnsvm.config.grid import Experiment, Point

NAME = ".attnsvm-packs.json"
FORMAT = "attnsvm-packs-1"


def _point(raw: Any) -> Point:
    return tuple((str(axis), value) for axis, value in raw)


def kept(exp: Experiment, exp_dir: str | os.PathLike) -> Experiment:
    """``exp`` with the packs recorded in ``exp_dir`` as its :attr:`kept_packs` (those of a
    plan with the same seeds; none when the file is missing, unreadable or of another plan)."""
    if not exp.packing:
        return exp
    try:
        body = json.loads(Path(exp_dir, NAME).read_text())
        if body.get("format") != FORMAT or body.get("seeds") != [int(s) for s in exp.seeds]:
            return exp
        packs = tuple(
            (str(name), tuple(_point(p) for p in points)) for name, points in body["packs"]
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return exp
    return dataclasses.replace(exp, kept_packs=packs)


def record(exp: Experiment) -> dict[str, Any] | None:
    """The packs of ``exp``'s plan as the file holds them (None: it packs nothing)."""
    if not exp.packing:
        return None
    packs = [[name, [list(map(list, p)) for p in points]]
             for name, points in exp.packs() if len(points) > 1]  # fmt: skip
    return {"format": FORMAT, "seeds": [int(s) for s in exp.seeds], "packs": packs}


def write(exp: Experiment, exp_dir: str | os.PathLike) -> None:
    """Record the packs of ``exp``'s plan in ``exp_dir`` (when they changed)."""
    body = record(exp)
    if body is None:
        return
    path = Path(exp_dir, NAME)
    text = json.dumps(body, separators=(",", ":"))
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
