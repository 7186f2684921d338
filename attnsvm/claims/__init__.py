"""The claims ledger: theoretical predictions tested against a run, with verdicts and evidence.

An experiment's ``claims`` (their shape: :mod:`attnsvm.config.claims`) are checked against
what the experiment stores before any work (:mod:`attnsvm.claims.spec`, called by
:func:`attnsvm.plan.parse_config`), evaluated on its sweep store with reproducible confidence
intervals (:mod:`attnsvm.claims.stats`, :mod:`attnsvm.claims.evaluate`) and written as
``results/<experiment>/claims.json`` and a tidy ``claims.csv`` (:mod:`attnsvm.claims.ledger`).
The report shows them first (:mod:`attnsvm.report.claims_page`) and ``attnsvm claims`` prints
them and fails when a claim FAILs. Semantics: docs/science.md §13; how to write one:
docs/claims.md.
"""
