"""Text for people: one-screen summaries of a :class:`~attnsvm.tasks.result.CellResult` and the
report's section about the run (versions, commits, cell counts, configuration)."""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import xarray as xr
import yaml

from attnsvm import codes, provenance
from attnsvm.atomic import write_text_atomic
from attnsvm.sweep.derived import record_of, run_info_inputs, write_record
from attnsvm.tasks.result import CellResult, left_fused_loop

_SVM_LABELS = {
    "fro_alpha": "Att-SVM   (Frobenius, GD's alpha)",
    "nuc_alpha": "Att-SVM_* (nuclear,   GD's alpha)",
    "fro_opt": "Att-SVM   (Frobenius, opt)",
    "nuc_opt": "Att-SVM_* (nuclear,   opt)",
}


def cell_summary_dict(res: CellResult) -> dict[str, Any]:
    """JSON-ready summary: cell, status, selection, SVM statuses, scalars, timings."""
    return {
        "cell": res.cell.to_dict(),
        "status": res.status,
        "message": res.message,
        "device": res.device,
        "alpha": res.alpha.tolist(),
        "opt": res.opt.tolist(),
        "convergence": res.convergence,
        "convergence_strict": res.convergence_strict,
        "svms": {
            k: {
                "status": r.status,
                "objective": r.objective,
                "solver": r.solver,
                "seconds": r.seconds,
            }
            for k, r in res.svms.items()
        },
        "scalars": {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in res.scalars.items()
        },
        "timings": res.timings,
    }


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.6g}"
    return str(x)


def cell_summary(res: CellResult) -> str:
    """Readable one-screen summary of one cell's result."""
    c, sc = res.cell, res.scalars
    lines = [
        f"attnsvm cell  generator={c.generator} n={c.n} T={c.T} d={c.d} head={c.head} "
        f"param={c.param}{'' if c.param == 'W' else f'(m={c.inner_dim})'} "
        f"attention={c.attention} seed={c.seed}",
        f"training      {c.optimizer} GD, lr={c.lr}, {c.iterations} iterations, {c.dtype}, "
        f"init={c.init}, device={res.device}",
        f"status        {res.status}"
        + (f": {res.message.strip().splitlines()[-1]}" if res.message else ""),
    ]
    if c.train and len(res.iterations):
        lines += [
            f"final         loss={_fmt(sc.get('loss'))}  ||W||_F={_fmt(sc.get('wnorm'))}  "
            f"softmax mass={_fmt(sc.get('softmax_mass'))}  rank(W_GD)={sc.get('rank_gd')}",
            f"selection     alpha={res.alpha.tolist()}  opt={res.opt.tolist()}  "
            f"alpha==opt: {bool(sc.get('alpha_is_opt'))}",
        ]
    lines.append(
        "SVM                                  status              objective  rank  corr(W_GD)"
    )
    for key, r in res.svms.items():
        corr = sc.get(f"corr_{key}", float("nan"))
        lines.append(
            f"  {_SVM_LABELS.get(key, key):35s}{r.status:19s}{_fmt(r.objective):>10s}"
            f"{sc.get(f'rank_{key}', -1):>6}  {_fmt(corr)}"
        )
    if res.convergence:
        lines.append(
            f"convergence   {res.convergence} by selection (locally optimal: "
            f"{bool(sc.get('locally_optimal'))}); strict rule: {res.convergence_strict} "
            f"(saturated: {bool(sc.get('saturated'))}, corr >= {c.corr_threshold}: "
            f"{bool(sc.get('corr_converged'))})"
        )
    if "support_share" in sc:
        lines.append(
            f"support       share of non-selected tokens that are support vectors: "
            f"{_fmt(sc['support_share'])}; SVM margin 1/||W_mm||_F = {_fmt(sc.get('svm_margin'))}"
        )
    if "corr_v" in sc:  # trained head, docs/science.md §11
        lines.append(
            f"head          trained: corr(v, v_mm)={_fmt(sc['corr_v'])}  "
            f"||v||={_fmt(sc.get('vnorm'))}  margin={_fmt(sc.get('v_margin'))} "
            f"(max {_fmt(sc.get('vmm_margin'))})  alpha==opt of v(0): "
            f"{bool(sc.get('alpha_is_opt_init'))}"
        )
    if res.gen is not None:
        lines.append(
            f"Gen-SVM       corr(W, W_svmeq)={_fmt(sc.get('corr_svmeq'))}  "
            f"corr(W, W_mm_gen)={_fmt(sc.get('corr_mm_gen'))}  "
            f"relevant tokens/example={_fmt(sc.get('n_relevant'))}  "
            f"ambiguous={bool(sc.get('ambiguous'))}"
        )
    lines.append("timings (s)   " + "  ".join(f"{k}={v:.3f}" for k, v in res.timings.items()))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- report: run info
#: the comment that ends the run section's first part, the line "What ran" at the top of the
#: report's first page (workflow/report/workflow.rst includes the parts on either side of it)
RUN_DETAILS_MARK = ".. attnsvm: run details"


def _short_commits(text: str) -> str:
    """``git commit b350c35e48fd...`` -> ``git commit b350c35e48``: a line that fits."""
    return re.sub(r"\b([0-9a-f]{10})[0-9a-f]{30}\b", r"\1", text)


def run_info_rst(
    config: dict[str, Any],
    sweeps: dict[str, str | os.PathLike],
    configfiles: list[str] | None = None,
) -> str:
    """RST section of the report about this run: versions, commits, cells, configuration.

    ``sweeps``: ``{experiment: sweep.zarr path}``; ``configfiles``: the config files the run
    read (Snakemake's ``--configfile``). The attnsvm versions and git commits are those
    recorded by the block jobs that computed the results (``blocks`` attribute of each sweep
    store), next to those of the process that wrote this text. The text before
    :data:`RUN_DETAILS_MARK` is one paragraph, "What ran", for the top of the report; after
    it, the cells per status and the configuration (in a collapsed HTML ``details``).
    """
    computed: Counter[str] = Counter()
    rows, torch_loop = [], {}
    totals: Counter[str] = Counter()
    for name, path in sweeps.items():
        sweep = xr.open_zarr(path)
        attrs = sweep.attrs
        computed += provenance.computed_by(json.loads(attrs.get("blocks", "{}")))
        counts = json.loads(attrs.get("status_counts", "{}"))
        totals.update({s: counts.get(s, 0) for s in codes.CELL_STATUS})
        rows.append([name] + [str(counts.get(s, 0)) for s in codes.CELL_STATUS])
        if "device" in sweep:  # cells a field kept out of the fused loop (attnsvm.gd.fused)
            torch_loop[name] = sum(left_fused_loop(str(d)) for d in sweep["device"].values.flat)
    commit_now = provenance.git_commit() or "unknown"
    by = "; ".join(
        f"{_short_commits(what)} ({k} block{'s' * (k != 1)})"
        for what, k in sorted(computed.items())
    )
    cells = ", ".join(f"{totals[s]:,} {s}" for s in codes.CELL_STATUS)
    files = ", ".join(f"``{f}``" for f in configfiles or []) or "the default config"
    lines = [
        f"**What ran:** {len(sweeps)} experiment{'s' * (len(sweeps) != 1)} of {files}, "
        f"{sum(totals.values()):,} cells ({cells}), results in "
        f"``{config.get('results', 'results')}/``; computed by {by or 'no finished block yet'}.",
        "",
        RUN_DETAILS_MARK,
        "",
        "This run",
        "--------",
        "",
        "Results computed by (as recorded by every block job; ``-dirty``: uncommitted changes):",
        "",
    ]
    lines += [f"- {what}: {k} block{'s' if k != 1 else ''}" for what, k in sorted(computed.items())]
    if not computed:
        lines.append("- no finished block yet")
    lines += [
        "",
        f"Captions and this page written by attnsvm {provenance.ATTNSVM_VERSION}, "
        f"git commit {commit_now}, on {provenance.now()}.",
        "",
        ".. list-table:: Cells per status",
        "   :header-rows: 1",
        "",
        "   * - experiment",
    ]
    lines += [f"     - {s}" for s in codes.CELL_STATUS]
    for row in rows:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {c}" if c else "     -" for c in row[1:]]
    if any(torch_loop.values()):
        lines += ["", "Cells trained in the torch loop, outside the fused loop (a field their "
                  "model does not declare for it; docs/extending.md): " + ", ".join(
                      f"{k} {v}" for k, v in torch_loop.items() if v) + "."]  # fmt: skip
    # UTF-8 as written (allow_unicode): "§4", not the escape "\xA74"
    text = yaml.safe_dump(
        config, sort_keys=False, default_flow_style=None, width=100, allow_unicode=True
    )
    lines += [
        "",
        "Configuration",
        "-------------",
        "",
        "The configuration that produced this report (after Snakemake merged the config files "
        f"and ``--config`` overrides; {files}), collapsed: click to open it.",
        "",
        ".. raw:: html",
        "",
        "   <details class='attnsvm-config'><summary>configuration (YAML)</summary>",
        "",
        "::",
        "",
    ]
    lines += ["    " + ln for ln in text.splitlines()]
    lines += ["", ".. raw:: html", "", "   </details>"]
    return "\n".join(lines) + "\n"


def write_run_info(
    config: dict[str, Any],
    sweeps: dict[str, str | os.PathLike],
    out: str | os.PathLike,
    configfiles: list[str] | None = None,
) -> Path:
    """Write :func:`run_info_rst` to ``out`` atomically (workflow rule ``run_info``), then its
    digest record (inputs: every experiment's sweep digest; docs/store.md, "Derived
    outputs")."""
    record = record_of(out)
    record.unlink(missing_ok=True)
    inputs = run_info_inputs(sweeps)
    path = write_text_atomic(out, run_info_rst(config, sweeps, configfiles))
    write_record(record, "run_info", "", [path], inputs)
    return path
