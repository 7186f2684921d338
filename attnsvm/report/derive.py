"""An experiment's derived outputs, all in one process: summary, figures, status table, claims.

:func:`write_derived` is the library function of the workflow's ``derive`` rule: once an
experiment's sweep store is collected, it writes, in this order,

- ``summary.nc`` (:func:`attnsvm.sweep.summary.write_summary`), and the skeletons of the
  sweep and the summary that :func:`attnsvm.open_results` opens them from
  (:func:`attnsvm.sweep.skeleton.keep_skeletons`; not a derived output: a speed-up),
- every figure of the experiment into its figures folder: PDF, PNG, caption and its page in
  the report, the PNG with the caption under it (:func:`attnsvm.report.draw.make_figure`),
- ``status.html`` (:func:`attnsvm.report.status_table.write_status_table`),
- ``claims.json`` and ``claims.csv`` (:func:`attnsvm.claims.ledger.write_ledger`),

each as those functions write it alone: atomically, its inputs checked first, its digest record
(docs/store.md, "Derived outputs") last; the ledger's record is the job's last file. One job
instead of one per output: a job's cost was mostly its interpreter start-up and imports
(xarray, scipy, matplotlib: 1-1.5 s each), paid here once per experiment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from attnsvm.claims.ledger import write_ledger
from attnsvm.logs import stage
from attnsvm.report.draw import make_figure
from attnsvm.report.status_table import write_status_table
from attnsvm.sweep.paths import in_figures
from attnsvm.sweep.skeleton import keep_skeletons
from attnsvm.sweep.summary import write_summary

log = logging.getLogger(__name__)


def write_derived(
    sweep_path: str | os.PathLike,
    experiment: str,
    claims: str,
    figures: Sequence[str],
    summary: str | os.PathLike,
    figures_dir: str | os.PathLike,
    status_table: str | os.PathLike,
    claims_json: str | os.PathLike,
    claims_csv: str | os.PathLike,
) -> None:
    """Write every derived output of ``experiment`` from its sweep store at ``sweep_path``.

    ``claims``: the experiment's claims as canonical JSON
    (:meth:`attnsvm.plan.Plan.claims_config`); ``figures``: the names of its figures, drawn
    into ``figures_dir`` (created; files named by :data:`attnsvm.sweep.paths.LAYOUT`). A sweep
    or summary that does not check out stops the job with one
    :class:`~attnsvm.sweep.integrity.StoreError` naming it, before the outputs that need it.
    """
    with stage(log, "summary", experiment=experiment):
        write_summary(sweep_path, summary)
        keep_skeletons(sweep_path, summary)  # attnsvm.open_results's next open reads these
    Path(figures_dir).mkdir(parents=True, exist_ok=True)
    for name in figures:
        with stage(log, f"figure {name}"):
            make_figure(
                name,
                sweep_path,
                summary,
                in_figures(figures_dir, "figure", figure=name, ext="pdf"),
                in_figures(figures_dir, "figure", figure=name, ext="png"),
                in_figures(figures_dir, "caption", figure=name),
                in_figures(figures_dir, "figure", figure=name, ext="html"),
            )
    with stage(log, "status table"):
        write_status_table(summary, status_table)
    with stage(log, "claims"):
        write_ledger(sweep_path, claims, experiment, claims_json, claims_csv)
