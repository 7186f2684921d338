# The claims ledger (docs/claims.md): each experiment's claims evaluated on its sweep store,
# and the report's claims (the table on its first page and the category "0. Claims").


rule claims:
    input:
        sweep=rules.collect.output.sweep,
    output:
        json=path("claims"),
        table=path("claims_table"),
    log:
        path("claims_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    params:
        claims=experiment_claims,
        version=attnsvm.__version__,
    script:
        "../scripts/claims.py"


rule claims_page:
    input:
        ledgers=expand(rules.claims.output.json, experiment=list(PLAN.experiments)),
    output:
        rst=path("claims_rst"),
        html=report(
            path("claims_page"),
            caption="../report/claims.rst",
            category=PLAN.CLAIMS_CATEGORY,
            labels={"result": "table: claims, verdicts and evidence"},
        ),
    log:
        path("claims_page_log"),
    conda:
        "../envs/attnsvm.yaml"
    params:
        experiments=list(PLAN.experiments),
        figures=PLAN.figure_pngs(),
        version=attnsvm.__version__,
    script:
        "../scripts/claims_page.py"
