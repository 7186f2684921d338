"""The report's claims: a table at the top of its first page and a full page of evidence.

:func:`write_claims_page` (workflow rule ``claims_page``) reads every experiment's
``claims.json`` (:mod:`attnsvm.claims.ledger`) and writes

- ``claims.rst``: one row per claim (verdict, the prediction, its evidence, the theory and a
  link to the figure that shows it), included at the top of the report's first page
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
from attnsvm.claims.ledger import counts, evidence_text, fmt, left_out_text, read_ledger
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


#: ``{experiment: {figure: path of its PNG}}`` (:meth:`attnsvm.plan.Plan.figure_pngs`)
FigurePaths = Mapping[str, Mapping[str, str]]


def _png(figures: FigurePaths, entry: dict) -> str | None:
    fig = entry.get("figure")
    return figures.get(entry["experiment"], {}).get(fig) if fig else None


def figure_link(figures: FigurePaths, entry: dict) -> str:
    """RST link that opens the claim's figure in the Snakemake report (or ``-``)."""
    png = _png(figures, entry)
    if png is None:
        return "-"
    target = "javascript:app.showResultInfo('" + urllib.parse.quote(png, safe="") + "')"
    return f"`figure {entry['figure']} <{target}>`__"


def totals_text(entries: list[dict]) -> str:
    """``3 PASS, 1 FAIL, 2 INCONCLUSIVE of 6 claims in 2 experiments``."""
    c = counts(entries)
    exps = len({e["experiment"] for e in entries})
    parts = ", ".join(f"{c[v]} {v}" for v in VERDICTS)
    return f"{parts} of {len(entries)} claims in {exps} experiment(s)"


def claims_rst(ledgers: Mapping[str, str | os.PathLike], figures: FigurePaths) -> str:
    """The claims table of the report's first page (module docstring)."""
    entries = _entries(ledgers)
    lines = [
        "Claims",
        "------",
        "",
        "What the theory predicts and what this run says, claim by claim (docs/science.md §13): "
        "**PASS** when the confidence interval of the estimate lies on the predicted side of "
        "the threshold, **FAIL** when it lies on the other side, **INCONCLUSIVE** when it "
        "straddles it or the evidence is too thin. Every cell of the selected grid points is "
        "counted: used, or left out with its reason. Per-point evidence: category "
        "**0. Claims**; the ledgers: ``<results>/<experiment>/claims.json`` and ``claims.csv``.",
        "",
    ]
    if not entries:
        return "\n".join([*lines, "No experiment of this run states a claim.", ""])
    lines += [f"{totals_text(entries)}.", ""]
    notes = (*L.summary_lines(entries), L.gate_text(L.holm_gate(entries)))
    lines += [f"{_rst_text(line)}." for line in notes]
    lines += [
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 10 30 45 15",
        "",
        "   * - verdict",
        "     - claim",
        "     - evidence",
        "     - theory",
    ]
    for e in entries:
        verdict = e["verdict"] if e["verdict"] == "PASS" else f"**{e['verdict']}**"
        claim = f"{_rst_text(e['experiment'])}: {_rst_text(e['statement'])}"
        evidence = " ".join(x for x in (evidence_text(e), L.control_text(e), L.design_note(e)) if x)
        lines += [
            f"   * - {verdict}",
            f"     - {claim} ({figure_link(figures, e)})",
            f"     - {_rst_text(evidence)}",
            f"     - {_rst_text(e['theory'])}",
        ]
    return "\n".join(lines) + "\n"


CLAIMS_CSS = (
    STATUS_CSS
    + """
td.PASS { background: #e3f4e6; color: #1d5c2b; font-weight: 600; }
td.FAIL { background: #fde2e1; color: #9b1c1c; font-weight: 600; }
td.INCONCLUSIVE { background: #fff4d6; color: #7a5a00; font-weight: 600; }
table.attnsvm td.text { text-align: left; max-width: 40em; }
tr.claim td { border-top: 2px solid #b9c2cc; }
"""
)


def _cell(value, cls: str = "") -> str:
    return f"<td class='{cls}'>{html.escape(str(value))}</td>"


def _html_row(verdict: str, text: str, line: dict, cls: str = "") -> list[str]:
    """One row of the evidence table: a claim's headline or one line of its evidence."""
    lo, hi = line["interval"]
    conf = line.get("interval_confidence", line.get("confidence"))
    return [
        f"<tr class='{cls}'>",
        _cell(verdict, verdict),
        _cell(text, "text"),
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
        "verdict", "experiment / claim / line", "estimate", "interval", "confidence", "method",
        "values", "cells", "left out",
    )  # fmt: skip
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>claims</title><style>{CLAIMS_CSS}</style></head><body>",
        "<h3>Claims: verdicts and evidence</h3>",
        f"<p class='totals'>{html.escape(totals_text(entries))}. Each claim's first line is "
        "its verdict; below it its control row (its baseline, which must not PASS) and every "
        "line of its evidence (pooled, per grid point, per group and step of a trend, the fit "
        "of a slope). docs/science.md §13 explains the intervals and verdicts.</p>",
        *(
            f"<p class='totals'>{html.escape(line)}</p>"
            for line in (*L.summary_lines(entries), L.gate_text(L.holm_gate(entries)))
        ),
        "<table class='attnsvm'><thead><tr>",
        *(f"<th>{h}</th>" for h in head),
        "</tr></thead><tbody>",
    ]
    for e in entries:
        png = _png(figures, e)
        where = f"; figure {e['figure']} ({png})" if png else ""
        text = (
            f"{e['experiment']} / {e['name']}: {e['statement']} [{evidence_text(e)}; "
            f"theory: {e['theory']}{where}]"
        )
        if e.get("note"):
            text += f" Note: {e['note']}"
        note = L.design_note(e)
        parts += _html_row(e["verdict"], f"{text} {note}" if note else text, e, "claim")
        if e.get("control"):
            c = e["control"]
            flag = " (the baseline passes: the claim cannot tell the theory from it)"
            # lower case: no verdict colour, a control that FAILs is what the claim needs
            parts += _html_row(f"baseline {c['verdict'].lower()}", f"control: {c['name']}"
                               + (flag if c["passes"] else ""), c)  # fmt: skip
        for r in e["rows"]:
            parts += _html_row(r["verdict"] or "", f"{r['level']}: {r['label']}", r)
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
