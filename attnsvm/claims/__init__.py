"""The claims ledger: theoretical predictions tested against a run, with verdicts and evidence.

An experiment's ``claims`` (their shape: :mod:`attnsvm.config.claims`) are checked against
what the experiment stores before any work (:mod:`attnsvm.claims.spec`, called by
:func:`attnsvm.plan.parse_config`), and whether its seeds can decide them
(:mod:`attnsvm.claims.design`, ``attnsvm check-config``); they are evaluated on its sweep store
with calibrated intervals, the seed as the unit and a baseline as a control row
(:mod:`attnsvm.claims.stats`, :mod:`attnsvm.claims.evaluate`; where each interval method is
calibrated: :mod:`attnsvm.claims.table`, measured by :mod:`attnsvm.claims.calibration`) and
written as ``results/<experiment>/claims.json`` and a tidy ``claims.csv``
(:mod:`attnsvm.claims.ledger`, with the family-wise gate). The report shows them first
(:mod:`attnsvm.report.claims_page`) and ``attnsvm claims`` prints them and fails when a FAIL
holds family-wise. Semantics: docs/science.md §13; how to write one: docs/claims.md.
"""

from attnsvm.claims.stats import mean_interval, median_interval, share_interval

__all__ = ["mean_interval", "median_interval", "share_interval"]
