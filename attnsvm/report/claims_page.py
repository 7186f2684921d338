"""The report's claims: a table at the top of its first page and a full page of evidence.

:func:`write_claims_page` (workflow rule ``claims_page``) reads every experiment's
``claims.json`` (:mod:`attnsvm.claims.ledger`) and writes

- ``claims.rst``: the verdict summary, then one row per claim, FAIL first (verdict,
  experiment, statement with its evidence, theory and note on a click, estimate, prediction
  and a link to the figure's page), included at the top of the report's first page
  (``workflow/report/workflow.rst``), so that the report opens on its verdicts;
- ``claims.html``: every claim with every line of its evidence (pooled, per grid point, per
  step of a trend), the report's first category (:attr:`attnsvm.plan.Plan.CLAIMS_CATEGORY`).

A link to a figure opens that figure's entry in the Snakemake report (its result page), the
way Snakemake's own caption links do; the HTML page, shown in a frame, names the figure and
its file instead.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from attnsvm.atomic import write_text_atomic
from attnsvm.claims import ledger as L
from attnsvm.claims.ledger import (
    counts,
    evidence_text,
    fmt,
    left_out_text,
    read_ledger,
    source_text,
    test_text,
    verdict_word,
)
from attnsvm.claims.stats import VERDICTS
from attnsvm.report.status_table import STATUS_CSS
from attnsvm.sweep.derived import claims_page_inputs, record_of, write_record


def _entries(ledgers: Mapping[str, str | os.PathLike]) -> list[dict]:
    """Every ledger's entries, each ledger checked against its digest record first."""
    return [e for exp, path in ledgers.items() for e in read_ledger(path, exp)["claims"]]


def _rst_text(text: str) -> str:
    """Text for an RST table cell: no markup characters acted upon, one line."""
    out = " ".join(str(text).split())
    for ch in "\\*`|_":
        out = out.replace(ch, "\\" + ch)
    return out


#: ``{experiment: {figure: path of its page}}`` (:meth:`attnsvm.plan.Plan.figure_pages`; any
#: file of the report's results, e.g. :meth:`~attnsvm.plan.Plan.figure_pngs`)
FigurePaths = Mapping[str, Mapping[str, str]]

#: the order of the report's claims table: what contradicts the theory first
VERDICT_ORDER = ("FAIL", "INCONCLUSIVE", "PASS")


def _png(figures: FigurePaths, entry: dict) -> str | None:
    fig = entry.get("figure")
    return figures.get(entry["experiment"], {}).get(fig) if fig else None


def _show_result(path: str) -> str:
    """The ``href`` that opens a result of the Snakemake report (as its caption links do)."""
    return "javascript:app.showResultInfo('" + urllib.parse.quote(path, safe="") + "')"


def figure_link(figures: FigurePaths, entry: dict) -> str:
    """RST link that opens the claim's figure in the Snakemake report (or ``-``)."""
    png = _png(figures, entry)
    if png is None:
        return "-"
    return f"`figure {entry['figure']} <{_show_result(png)}>`__"


def totals_text(entries: list[dict]) -> str:
    """``3 PASS, 1 FAIL, 2 INCONCLUSIVE of 6 claims in 2 experiments``."""
    c = counts(entries)
    exps = len({e["experiment"] for e in entries})
    parts = ", ".join(f"{c[v]} {v}" for v in VERDICTS)
    return f"{parts} of {len(entries)} claims in {exps} experiment{'s' * (exps != 1)}"


def by_verdict(entries: list[dict]) -> list[dict]:
    """The entries FAIL first, then INCONCLUSIVE, then PASS; in run order within each."""
    rank = {v: i for i, v in enumerate(VERDICT_ORDER)}
    return sorted(entries, key=lambda e: rank.get(e["verdict"], -1))


def _estimate_html(e: dict) -> str:
    """``0.996 [0.988, 0.999]`` and, where one grid point or step decided, which."""
    lo, hi = e["interval"]
    text = fmt(e["estimate"])
    text += f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else ""
    out = html.escape(text)
    if e.get("decided_by") not in (None, "pooled"):
        out += f"<br><small>{html.escape(str(e['decided_by']))}</small>"
    return out


def _details_html(e: dict) -> str:
    """What a claim's row shows once opened: its evidence, theory and note."""
    items = [
        ("evidence", evidence_text(e)),
        ("baseline", L.control_text(e)),
        ("design", L.design_note(e)),
        ("theory", e.get("theory") or ""),
    ]
    if e.get("note"):
        items.append(("note", e["note"]))
    return "".join(f"<p><b>{k}:</b> {html.escape(str(v))}</p>" for k, v in items if v)


def claims_table_html(entries: list[dict], figures: FigurePaths) -> str:
    """The first page's claims table: one row per claim, FAIL first; a claim's evidence,
    theory and note open under its statement (HTML ``details``)."""
    rows = [
        "<table class='attnsvm-claims'><thead><tr><th>verdict</th><th>experiment</th>"
        "<th>claim (click for its evidence)</th><th>estimate [interval]</th>"
        "<th>predicted</th><th>figure</th></tr></thead><tbody>"
    ]
    for e in by_verdict(entries):
        page = _png(figures, e)
        link = f'<a href="{_show_result(page)}">{html.escape(e["figure"])}</a>' if page else "-"
        rows.append(
            f"<tr><td class='{e['verdict']}'>{verdict_word(e)} ({source_text(e)})</td>"
            f"<td>{html.escape(e['experiment'])}</td>"
            f"<td><details><summary>{html.escape(e['statement'])}</summary>"
            f"{_details_html(e)}</details></td>"
            f"<td>{_estimate_html(e)}</td><td>{html.escape(test_text(e))}</td>"
            f"<td>{link}</td></tr>"
        )
    rows.append("</tbody></table>")
    return "\n".join(rows)


def _raw(html_text: str) -> list[str]:
    """An RST ``raw:: html`` directive holding ``html_text`` (a line per line of it: docutils
    refuses lines of more than 10,000 characters)."""
    return [".. raw:: html", "", *("   " + line for line in html_text.splitlines()), ""]


def claims_rst(ledgers: Mapping[str, str | os.PathLike], figures: FigurePaths) -> str:
    """The claims of the report's first page (module docstring): the verdict summary, then
    one row per claim, FAIL first."""
    entries = _entries(ledgers)
    lines = ["Claims", "------", ""]
    if not entries:
        return "\n".join([*lines, "No experiment of this run states a claim.", ""])
    c = counts(entries)
    summary = ", ".join(f"<span class='{v}'>{c[v]} {v}</span>" for v in VERDICTS)
    rest = totals_text(entries).split(" of ", 1)[1]
    lines += _raw(f"<p id='attnsvm-verdicts' class='attnsvm-verdicts'>{summary} of {rest}.</p>")
    notes = (*L.summary_lines(entries), L.gate_text(L.holm_gate(entries)))
    lines += [f"{_rst_text(line)}." for line in notes] + [""]
    lines += [
        "**PASS**: the confidence interval of the estimate lies on the predicted side of the "
        "threshold; **FAIL**: on the other side; **INCONCLUSIVE**: it straddles the threshold "
        "or the evidence is too thin (too few seeds or grid points: expected of a small sweep "
        "such as the default one; more seeds narrow the intervals). docs/science.md §13 "
        "defines the verdicts. Click a claim for its evidence; every line of it (per grid "
        "point, per step of a trend, the cells left out): category **0. Claims**; the "
        "ledgers: ``<results>/<experiment>/claims.json`` and ``claims.csv``.",
        "",
    ]
    lines += _raw(claims_table_html(entries, figures))
    return "\n".join(lines) + "\n"


CLAIMS_CSS = (
    STATUS_CSS
    + """
td.PASS { background: #e3f4e6; color: #1d5c2b; font-weight: 600; }
td.FAIL { background: #fde2e1; color: #9b1c1c; font-weight: 600; }
td.INCONCLUSIVE { background: #fff4d6; color: #7a5a00; font-weight: 600; }
table.attnsvm { table-layout: fixed; width: 100%; }
table.attnsvm td { overflow-wrap: break-word; }
table.attnsvm th { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
table.attnsvm td.text { text-align: left; }
table.attnsvm details { text-align: left; }
table.attnsvm summary { cursor: pointer; }
tr.claim td { border-top: 2px solid #b9c2cc; }
"""
)


def _cell(value, cls: str = "") -> str:
    return f"<td class='{cls}'>{html.escape(str(value))}</td>"


def _line_label(row: dict) -> str:
    """``per point: d=2``; the pooled line is just ``pooled``."""
    level, label = str(row["level"]), str(row["label"])
    return label if label == level else f"{level}: {label}"


def _html_row(verdict: str, text: str, line: dict, cls: str = "", raw: bool = False) -> list[str]:
    """One row of the evidence table: a claim's headline or one line of its evidence
    (``raw``: ``text`` is HTML already)."""
    lo, hi = line["interval"]
    conf = line.get("interval_confidence", line.get("confidence"))
    return [
        f"<tr class='{cls}'>",
        _cell(verdict, verdict),
        f"<td class='text'>{text}</td>" if raw else _cell(text, "text"),
        _cell(fmt(line["estimate"])),
        _cell(f"[{fmt(lo)}, {fmt(hi)}]"),
        _cell(f"{conf:.3g}"),
        _cell(line["method"]),
        _cell(line["n_values"]),
        _cell(line["n_cells"]),
        _cell(left_out_text(line["excluded"])),
        "</tr>",
    ]


def claims_html(ledgers: Mapping[str, str | os.PathLike], figures: FigurePaths) -> str:
    """Every claim with every line of its evidence, as one HTML page (module docstring)."""
    entries = _entries(ledgers)
    head = (
        "verdict", "experiment / claim / line", "estimate", "interval", "conf.", "method",
        "values", "cells", "left out",
    )  # fmt: skip
    widths = (12, 29, 8, 12, 6, 11, 5, 5, 12)  # percent of the page; no sideways scrolling
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>claims</title><style>{CLAIMS_CSS}</style></head><body>",
        "<h3>Claims: verdicts and evidence</h3>",
        f"<p class='totals'>{html.escape(totals_text(entries))}. Each claim's first line is "
        "its verdict (click its statement for the theory, the figure and the note); below it "
        "its control row (its baseline, which must not PASS) and every line of its evidence "
        "(pooled, per grid point, per group and step of a trend, the fit of a slope). "
        "docs/science.md §13 explains the intervals and verdicts.</p>",
        *(
            f"<p class='totals'>{html.escape(line)}</p>"
            for line in (*L.summary_lines(entries), L.gate_text(L.holm_gate(entries)))
        ),
        "<table class='attnsvm'><colgroup>",
        *(f"<col style='width:{w}%'>" for w in widths),
        "</colgroup><thead><tr>",
        *(f"<th>{h}</th>" for h in head),
        "</tr></thead><tbody>",
    ]
    for e in entries:
        png = _png(figures, e)
        more = [f"evidence: {evidence_text(e)}", f"theory: {e['theory']}"]
        if png:
            more.append(f"figure {e['figure']} ({png})")
        if e.get("note"):
            more.append(f"note: {e['note']}")
        note = L.design_note(e)
        if note:
            more.append(note)
        text = (
            f"<details><summary><b>{html.escape(e['experiment'])} / "
            f"{html.escape(e['name'])}</b>: {html.escape(e['statement'])}</summary>"
            + "".join(f"<p>{html.escape(m)}</p>" for m in more)
            + "</details>"
        )
        parts += _html_row(e["verdict"], text, e, "claim", raw=True)
        if e.get("control"):
            c = e["control"]
            flag = " (the baseline passes: the claim cannot tell the theory from it)"
            # lower case: no verdict colour, a control that FAILs is what the claim needs
            parts += _html_row(f"baseline {c['verdict'].lower()}", f"control: {c['name']}"
                               + (flag if c["passes"] else ""), c)  # fmt: skip
        for r in e["rows"]:
            parts += _html_row(r["verdict"] or "", _line_label(r), r)
    parts.append("</tbody></table></body></html>")
    return "\n".join(parts)


def write_claims_page(
    ledgers: Mapping[str, str | os.PathLike],
    figures: FigurePaths,
    out_rst: str | os.PathLike,
    out_html: str | os.PathLike,
) -> tuple[Path, Path]:
    """Write :func:`claims_rst` and :func:`claims_html` (workflow rule ``claims_page``), each
    ledger checked against its digest record first, then the page's own record (inputs: each
    ledger's SHA-256; docs/store.md, "Derived outputs")."""
    record = record_of(out_html)
    record.unlink(missing_ok=True)
    inputs = claims_page_inputs(ledgers)
    rst, html = claims_rst(ledgers, figures), claims_html(ledgers, figures)
    out = write_text_atomic(out_rst, rst), write_text_atomic(out_html, html)
    write_record(record, "claims_page", "", out, inputs)
    return out
