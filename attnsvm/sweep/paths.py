"""The one path scheme: every output and log of the workflow under the results directory.

:data:`LAYOUT` names each path once, as a template whose fields are the workflow's wildcards
(``experiment``, ``block``, ``figure``) and a file extension ``ext``. The Snakemake rules take
their outputs and logs from it with fields left as wildcards (``path("block")`` in
``workflow/rules/common.smk``), the library (:class:`attnsvm.plan.Plan`, ``attnsvm
status``) with every field filled in. The layout itself is documented in ``docs/store.md``.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path

from attnsvm.sweep.derived import record_of
from attnsvm.sweep.onefile import SUFFIX

LAYOUT: dict[str, str] = {
    "experiment": "{experiment}",
    "blocks_dir": "{experiment}/blocks",
    "block": "{experiment}/blocks/{block}" + SUFFIX,
    "block_log": "{experiment}/logs/block/{block}.log",
    "sweep": "{experiment}/sweep.zarr",
    "collect_log": "{experiment}/logs/collect.log",
    "summary": "{experiment}/summary.nc",
    "figures": "{experiment}/figures",
    "figure": "{experiment}/figures/{figure}.{ext}",
    "caption": "{experiment}/figures/{figure}.caption.rst",
    "status_table": "{experiment}/status.html",
    "claims": "{experiment}/claims.json",
    "claims_table": "{experiment}/claims.csv",
    "derive_log": "{experiment}/logs/derive.log",
    "run_info": "run_info.rst",
    "run_info_log": "logs/run_info.log",
    "claims_page": "claims.html",
    "claims_rst": "claims.rst",
    "claims_page_log": "logs/claims_page.log",
}
"""Path of every output and log, relative to the results directory."""


def in_figures(figures_dir: str | os.PathLike, name: str, **values: str) -> Path:
    """Path ``name`` of :data:`LAYOUT` (a file of the experiment's figures folder: "figure",
    "caption") under ``figures_dir``, the folder the ``derive`` job writes; ``values`` fill
    the fields below the folder (``figure``, ``ext``)."""
    folder = LAYOUT["figures"] + "/"
    if not LAYOUT[name].startswith(folder):
        raise KeyError(f"path {name!r} is not in the figures folder")
    return Path(figures_dir) / LAYOUT[name][len(folder) :].format(**values)


def fields(name: str) -> list[str]:
    """The fields of the template ``name`` of :data:`LAYOUT`, in order."""
    return [f for _, f, _, _ in string.Formatter().parse(LAYOUT[name]) if f]


class _Wildcards(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class Paths:
    """Output layout under the results directory (:data:`LAYOUT`)."""

    results: str

    def pattern(self, name: str, **values: str) -> str:
        """Path ``name``; fields not given in ``values`` stay Snakemake wildcards."""
        return f"{self.results}/" + LAYOUT[name].format_map(_Wildcards(values))

    def get(self, name: str, **values: str) -> str:
        """Path ``name`` with every field given (``KeyError`` names a missing one)."""
        missing = [f for f in fields(name) if f not in values]
        if missing:
            raise KeyError(f"path {name!r} needs {missing}")
        return self.pattern(name, **values)

    def experiment(self, exp: str) -> str:
        return self.get("experiment", experiment=exp)

    def blocks_dir(self, exp: str) -> str:
        return self.get("blocks_dir", experiment=exp)

    def block(self, exp: str, block: str) -> str:
        return self.get("block", experiment=exp, block=block)

    def sweep(self, exp: str) -> str:
        return self.get("sweep", experiment=exp)

    def summary(self, exp: str) -> str:
        return self.get("summary", experiment=exp)

    def figures(self, exp: str) -> str:
        """The figures folder of ``exp`` (one output of its ``derive`` job)."""
        return self.get("figures", experiment=exp)

    def figure(self, exp: str, fig: str, ext: str) -> str:
        return self.get("figure", experiment=exp, figure=fig, ext=ext)

    def status_table(self, exp: str) -> str:
        return self.get("status_table", experiment=exp)

    def claims(self, exp: str) -> str:
        """The claims ledger of ``exp`` (attnsvm.claims.ledger)."""
        return self.get("claims", experiment=exp)

    def claims_table(self, exp: str) -> str:
        """The tidy table of the claims ledger of ``exp`` (CSV)."""
        return self.get("claims_table", experiment=exp)

    def run_info(self) -> str:
        """The report's section about the run (attnsvm.report.text.run_info_rst)."""
        return self.get("run_info")

    def claims_page(self) -> str:
        """The report's claims page: every experiment's claims with their evidence (HTML)."""
        return self.get("claims_page")

    def claims_rst(self) -> str:
        """The claims table at the top of the report's first page (RST)."""
        return self.get("claims_rst")

    def result_jobs(self, exp: str) -> list[tuple[str, str]]:
        """(log, output) of the result jobs of ``exp``, in the order they run: collect (the
        sweep store's ``zarr.json``), then derive (summary, figures, status table and claims
        ledger; the ledger's digest record is the last file it writes)."""
        return [
            (self.get("collect_log", experiment=exp), f"{self.sweep(exp)}/zarr.json"),
            (self.get("derive_log", experiment=exp), str(record_of(self.claims(exp)))),
        ]
