"""The claims ledger on disk: ``claims.json`` and the tidy ``claims.csv`` of an experiment.

:func:`write_ledger` writes the ledger for the workflow's ``derive`` rule: it reads the
experiment's sweep store (verified, :func:`attnsvm.sweep.integrity.load_verified`), evaluates
its claims (:mod:`attnsvm.claims.evaluate`) and writes

- ``claims.json``: ``{"format", "experiment", "versions", "counts", "claims": [entry, ...]}``,
  one entry per claim with the claim as written, its verdict, estimate, interval and evidence
  (docs/claims.md, "The ledger");
- ``claims.csv``: one row per line of evidence (``level`` claim, pooled, point, group, step,
  fit), every column a plain value, for ``pandas.read_csv``.

Both are deterministic (no time stamps; the bootstrap is seeded): the same sweep and claims
give the same files. Each entry also holds its control row (``control``: the claim's baseline,
which must not PASS), whether the experiment's seeds can decide it (``design``,
:mod:`attnsvm.claims.design`) and, for a FAIL, the smallest family-wise level at which it
still FAILs (``fail_p``), from which :func:`holm_gate` decides the exit status of ``attnsvm
claims`` over all the claims of a config (Holm's step-down procedure). :func:`text_table` is
what ``attnsvm claims`` prints, :func:`gate_text` and :func:`summary_lines` its last lines.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy
import scipy

from attnsvm.atomic import write_text_atomic
from attnsvm.claims.design import by_design, decidability, given_shortfall, seeds_needed
from attnsvm.claims.evaluate import EXCLUDED, _Reader, evaluate_claim
from attnsvm.claims.spec import claims_from_json
from attnsvm.claims.stats import VERDICTS
from attnsvm.config.claims import ClaimModel, condition
from attnsvm.provenance import ATTNSVM_VERSION
from attnsvm.sweep.derived import check_record, claims_inputs, record_of, write_record
from attnsvm.sweep.integrity import load_verified

LEDGER_FORMAT = "attnsvm-claims-3"
#: the family-wise error rate of the exit gate (Holm over every claim of a config)
FAMILY_ALPHA = 0.05
#: the smallest level a FAIL is tried at, as a share of its own 1 - confidence: 2^-12
_FAIL_P_STEPS = 48
#: the columns of claims.csv, in order
CSV_COLUMNS = (
    "experiment", "claim", "kind", "claim_verdict", "level", "label", "verdict", "estimate",
    "lo", "hi", "confidence", "method", "n_values", "n_cells", *EXCLUDED, "variable", "minus",
    "aggregate", "test", "statement", "theory", "figure", "source", "exploratory",
)  # fmt: skip


def _versions() -> dict[str, str]:
    return {"attnsvm": ATTNSVM_VERSION, "scipy": scipy.__version__, "numpy": numpy.__version__}


def counts(entries: Iterable[dict]) -> dict[str, int]:
    """Claims per verdict."""
    c = Counter(e["verdict"] for e in entries)
    return {v: c.get(v, 0) for v in VERDICTS}


def ledger(entries: list[dict], experiment: str) -> dict[str, Any]:
    """The ``claims.json`` document of an experiment's evaluated claims."""
    return {
        "format": LEDGER_FORMAT,
        "experiment": experiment,
        "versions": _versions(),
        "counts": counts(entries),
        "claims": entries,
    }


def fail_p(reader: _Reader, claim: ClaimModel, experiment: str) -> float:
    """The smallest ``1 - level`` on the grid ``(1 - c) 2^(-i/4)`` at which a FAILing claim
    still FAILs when evaluated at that level (1.0 for a claim that does not FAIL at its own
    level c): its p-value for the family-wise gate, rounded up to the grid (conservative)."""
    alpha = 1.0 - claim.confidence

    def fails(i: int) -> bool:
        level = 1.0 - alpha * 2.0 ** (-i / 4)
        return evaluate_claim(reader, claim, experiment, confidence=level)["verdict"] == "FAIL"

    lo, hi = 0, _FAIL_P_STEPS  # fails(lo); find the last i that fails
    if fails(hi):
        return alpha * 2.0 ** (-hi / 4)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fails(mid) else (lo, mid)
    return alpha * 2.0 ** (-lo / 4)


def ledger_entries(sweep, claims: Sequence[ClaimModel], experiment: str) -> list[dict]:
    """The ledger entries of ``claims`` on a sweep (a Dataset): each evaluated with its
    control row, its design (:func:`~attnsvm.claims.design.decidability` at the sweep's
    seeds) and, for a FAIL, its ``fail_p``."""
    reader = _Reader(sweep)
    out = []
    for claim in claims:
        entry = evaluate_claim(reader, claim, experiment)
        entry["design"] = decidability(claim, reader.axes, reader.n_seeds)
        decided = entry["verdict"] == "FAIL" and not entry["exploratory"]
        entry["fail_p"] = fail_p(reader, claim, experiment) if decided else 1.0
        out.append(entry)
    return out


def evaluate_store(
    sweep_path: str | os.PathLike, claims: Sequence[Any], experiment: str
) -> list[dict]:
    """The ledger entries of ``claims`` (models) on the sweep store at ``sweep_path``
    (verified first: :class:`~attnsvm.sweep.integrity.StoreError` names a damaged store)."""
    if not claims:
        return []
    # read only the variables the claims name (verified first, every file hashed)
    return ledger_entries(load_verified(sweep_path, lazy=True), claims, experiment)


def blocks_of_plan(sweep_path: str | os.PathLike, planned: Mapping[str, str]) -> int:
    """How many of the planned blocks (``{block: cells digest}``) the sweep store at
    ``sweep_path`` was collected from, with the same cells (its ``blocks`` attribute,
    docs/store.md): all of them for a store of this config's run."""
    import xarray as xr  # the ledger's readers only

    with xr.open_zarr(sweep_path) as ds:
        recorded = json.loads(ds.attrs.get("blocks", "{}"))
    return sum(
        1 for b, digest in planned.items() if (recorded.get(b) or {}).get("cells_digest") == digest
    )


def holm_gate(entries: Sequence[dict], alpha: float = FAMILY_ALPHA) -> dict[str, Any]:
    """The family-wise exit gate (docs/science.md §13): Holm's step-down procedure over the
    claims' ``fail_p`` (1 for a claim that does not FAIL). The k-th smallest is rejected
    while ``p_(k) <= alpha / (m - k + 1)``; a rejected claim's FAIL holds family-wise, and
    the gate fails when one does: the chance that the gate fails while every claim is true
    is at most ``alpha``, however many claims there are."""
    m = len(entries)
    ps = sorted((e.get("fail_p", 1.0), f"{e['experiment']}/{e['name']}") for e in entries)
    held = []
    for k, (p, name) in enumerate(ps):
        if p > alpha / (m - k):
            break
        held.append(name)
    return {"alpha": alpha, "claims": m, "held": held, "passes": not held}


def write_ledger(
    sweep_path: str | os.PathLike,
    claims: str,
    experiment: str,
    out_json: str | os.PathLike,
    out_csv: str | os.PathLike,
) -> dict[str, Any]:
    """Evaluate the claims (``claims``: :func:`attnsvm.claims.spec.claims_json`) of
    ``experiment`` on its sweep store and write ``claims.json`` and ``claims.csv`` atomically,
    then their digest record (docs/store.md, "Derived outputs"; inputs: the sweep's digest and
    the claims' settings)."""
    record = record_of(out_json)
    record.unlink(missing_ok=True)  # a ledger without its record is incomplete
    inputs = claims_inputs(sweep_path, claims)
    entries = evaluate_store(sweep_path, claims_from_json(claims), experiment)
    doc = ledger(entries, experiment)
    write_text_atomic(out_json, json.dumps(doc, indent=1, allow_nan=False) + "\n")
    write_text_atomic(out_csv, csv_text(entries))
    write_record(record, "claims", experiment, [out_json, out_csv], inputs)
    return doc


def read_ledger(path: str | os.PathLike, experiment: str | None = None) -> dict[str, Any]:
    """A ``claims.json`` document (its ``format`` checked). With ``experiment``, the ledger
    and its ``claims.csv`` are first checked against their digest record (one
    :class:`~attnsvm.sweep.integrity.StoreError` naming the file that does not check out)."""
    if experiment is not None:
        check_record(record_of(path), "claims", experiment)
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if doc.get("format") != LEDGER_FORMAT:
        raise ValueError(f"{path}: not a claims ledger of format {LEDGER_FORMAT}")
    return doc


# --------------------------------------------------------------------------- words
def fmt(x: float | None) -> str:
    """A number for a table: 4 significant digits, "nan" for a missing one."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "nan"
    return f"{x:.4g}"


def test_text(entry: dict) -> str:
    """What the claim predicts, in symbols: ``>= 0.99``, ``in [0.5, 1]``, ``each step up``."""
    if entry["kind"] == "monotone":
        way = "up" if entry["direction"] == "increasing" else "down"
        tol = f" (dips <= {fmt(entry['tolerance'])})" if entry["tolerance"] else ""
        return f"each step along {entry['along']} {way}{tol}"
    op, t = entry["op"], entry["threshold"]
    test = f"in [{fmt(t[0])}, {fmt(t[1])}]" if op == "between" else f"{op} {fmt(t)}"
    if entry["kind"] == "boundary":
        return f"slope of log {entry['across']}* against log {entry['along']} {test}"
    return f"slope {test}" if entry["kind"] == "slope" else test


def quantity_text(entry: dict) -> str:
    """``mean of corr_fro_alpha - corr_nuc_alpha``: what is estimated."""
    var = entry["variable"]
    minus = entry.get("minus")
    if isinstance(minus, list):
        var += f" - max({', '.join(minus)})"
    elif minus:
        var += f" - {minus}"
    agg = entry["aggregate"]
    if agg == "quantile":
        agg = f"{fmt(entry['q'])} quantile"
    if agg == "share":
        op, operand = condition(entry["per_seed"])
        return f"share of {var} {op} {operand}"
    return f"{agg} of {var}"


def left_out_text(excluded: dict[str, int]) -> str:
    """``2 failed, 1 no_value`` or ``none``."""
    parts = [f"{n} {k}" for k, n in excluded.items() if n]
    return ", ".join(parts) or "none"


def evidence_text(entry: dict) -> str:
    """One line of evidence: estimate, interval, test, what it was decided on, cells used."""
    lo, hi = entry["interval"]
    conf = entry["interval_confidence"]
    if lo is None or hi is None:
        iv = f"(no interval: {entry['method']})"
    else:
        iv = f"[{fmt(lo)}, {fmt(hi)}] ({conf:.3g}, {entry['method']})"
    what = quantity_text(entry)
    if entry["kind"] == "monotone":
        what = f"step of the {what} along {entry['decided_by']}"
    elif entry["kind"] in ("slope", "boundary"):
        what = f"{entry['decided_by']} of the {what}"
    elif entry["decided_by"] != "pooled":
        what += f" at {entry['decided_by']}"
    return (
        f"{what} = {fmt(entry['estimate'])} {iv}; predicted "
        f"{test_text(entry)}; {entry['n_values']} values of {entry['n_cells']} cells at "
        f"{entry['n_points']} grid point(s), left out: {left_out_text(entry['excluded'])}"
    )


# --------------------------------------------------------------------------- tables
def csv_rows(entries: Sequence[dict]) -> list[dict[str, Any]]:
    """The tidy rows of :data:`CSV_COLUMNS`: one ``claim`` row per claim (its verdict and
    headline), then one per line of its evidence."""
    out = []
    for e in entries:
        common = {
            "experiment": e["experiment"], "claim": e["name"], "kind": e["kind"],
            "claim_verdict": e["verdict"], "variable": e["variable"],
            "minus": json.dumps(e["minus"]) if isinstance(e["minus"], list) else e["minus"],
            "aggregate": e["aggregate"], "test": test_text(e), "statement": e["statement"],
            "theory": e["theory"], "figure": e["figure"],
            "source": (e.get("source") or {}).get("type"), "exploratory": e.get("exploratory"),
        }  # fmt: skip
        head = {
            "level": "claim", "label": e["decided_by"], "verdict": e["verdict"],
            "estimate": e["estimate"], "lo": e["interval"][0], "hi": e["interval"][1],
            "confidence": e["interval_confidence"], "method": e["method"],
            "n_values": e["n_values"], "n_cells": e["n_cells"], **e["excluded"],
        }  # fmt: skip
        out.append({**common, **head})
        c = e.get("control")
        if c:
            out.append({
                **common, "level": "control", "label": c["name"], "verdict": c["verdict"],
                "estimate": c["estimate"], "lo": c["interval"][0], "hi": c["interval"][1],
                "confidence": c["interval_confidence"], "method": c["method"],
                "n_values": c["n_values"], "n_cells": c["n_cells"], **c["excluded"],
            })  # fmt: skip
        for r in e["rows"]:
            row = {
                "level": r["level"], "label": r["label"], "verdict": r["verdict"],
                "estimate": r["estimate"], "lo": r["interval"][0], "hi": r["interval"][1],
                "confidence": r["confidence"], "method": r["method"],
                "n_values": r["n_values"], "n_cells": r["n_cells"], **r["excluded"],
            }  # fmt: skip
            out.append({**common, **row})
    return [{k: row.get(k) for k in CSV_COLUMNS} for row in out]


def csv_text(entries: Sequence[dict]) -> str:
    """``claims.csv``: :func:`csv_rows` as CSV (a header line even without claims)."""
    import pandas as pd  # the ledger's writer only

    frame = pd.DataFrame(csv_rows(entries), columns=list(CSV_COLUMNS))
    return frame.to_csv(index=False, lineterminator="\n")


def control_text(entry: dict) -> str | None:
    """The control row in words: ``control (the nuclear SVM): FAIL, 0.85 [0.83, 0.87]``,
    flagged when the baseline passes; None for a claim without one."""
    c = entry.get("control")
    if not c:
        return None
    lo, hi = c["interval"]
    iv = f"[{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else f"({c['method']})"
    text = f"control ({c['name']}): {c['verdict']}, {fmt(c['estimate'])} {iv}"
    if c["passes"]:
        text += "  !! the baseline passes: the claim cannot tell the theory from it"
    return text


def design_note(entry: dict) -> str | None:
    """``INCONCLUSIVE by design: 8 seeds per grid point cannot decide it; 24 would`` for an
    INCONCLUSIVE claim its configured seeds cannot decide; for one they could, whose cells met
    its ``given`` too rarely, :func:`~attnsvm.claims.design.given_shortfall` (None
    otherwise)."""
    d = entry.get("design")
    if entry["verdict"] != "INCONCLUSIVE" or not by_design(d):
        return given_shortfall(entry)
    need = seeds_needed(d)
    would = f"{need} would" if need is not None else "no number of seeds would"
    return f"INCONCLUSIVE by design: {d['seeds']} seeds per grid point cannot decide it; {would}"


def verdict_word(entry: dict) -> str:
    """``PASS``, or ``PASS*`` for an exploratory verdict (decided on seeds the claim was
    written against, or without a record of them: docs/science.md §13)."""
    return entry["verdict"] + ("*" if entry.get("exploratory") else "")


def source_text(entry: dict) -> str:
    """What kind of statement the claim is: ``theorem``, ``observation`` or ``conjecture``."""
    src = entry.get("source") or {}
    return src.get("type", "?")


def text_table(entries: Sequence[dict]) -> str:
    """The claims as a plain-text table (``attnsvm claims``): verdict, claim, evidence, its
    control row, whether its seeds could decide it, and where it fails."""
    lines = []
    for e in entries:
        lines.append(f"{verdict_word(e):<12} {e['experiment']}/{e['name']} "
                     f"[{source_text(e)}]: {e['statement']}")  # fmt: skip
        if e.get("exploratory"):
            lines.append(f"{'':<12} exploratory: {e['exploratory']}")
        lines.append(f"{'':<12} {evidence_text(e)}")
        for extra in (control_text(e), design_note(e)):
            if extra:
                lines.append(f"{'':<12} {extra}")
        where = [r for r in e["rows"] if r["verdict"] in ("FAIL", "INCONCLUSIVE")]
        if e["verdict"] != "PASS" and len(e["rows"]) > 1 and where:
            shown = ", ".join(f"{r['label']}: {r['verdict']}" for r in where[:6])
            more = f" (+{len(where) - 6} more)" if len(where) > 6 else ""
            lines.append(f"{'':<12} where: {shown}{more}")
    return "\n".join(lines)


def gate_text(gate: dict[str, Any]) -> str:
    """The family-wise gate in one line (:func:`holm_gate`)."""
    head = (f"family-wise gate (Holm over {gate['claims']} claim(s), alpha "
            f"{gate['alpha']:g}): ")  # fmt: skip
    if gate["passes"]:
        return head + "no FAIL holds family-wise: passes"
    return head + f"{len(gate['held'])} FAIL(s) hold family-wise ({', '.join(gate['held'])}): fails"


def summary_lines(entries: Sequence[dict]) -> list[str]:
    """What the verdicts add up to: the INCONCLUSIVE ones by design with the seeds that would
    decide each, and the claims whose baseline passes."""
    lines = []
    inconclusive = [e for e in entries if e["verdict"] == "INCONCLUSIVE"]
    designed = [e for e in inconclusive if by_design(e.get("design"))]
    if designed:
        need = ", ".join(
            f"{e['experiment']}/{e['name']} {seeds_needed(e['design']) or 'none'}" for e in designed
        )
        lines.append(
            f"INCONCLUSIVE by design: {len(designed)} of the {len(inconclusive)} INCONCLUSIVE "
            "claim(s) cannot be decided with the seeds this config gives them (a small run "
            f"by design); seeds per grid point that would decide each: {need}"
        )
    controls = [e for e in entries if e.get("control")]
    passing = [f"{e['experiment']}/{e['name']}" for e in controls if e["control"]["passes"]]
    if passing:
        lines.append(f"baselines that PASS (the claim cannot tell the theory from them): "
                     f"{', '.join(passing)}")  # fmt: skip
    else:
        lines.append(f"control rows: no baseline passes ({len(controls)} of {len(entries)} "
                     "claim(s) name one)")  # fmt: skip
    return lines
