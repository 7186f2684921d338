# The report's run-level pages: the section about the run (versions, cells, configuration)
# and the claims ledger of every experiment (docs/claims.md): the table on the report's first
# page and its category "0. Claims".


rule run_info:
    input:
        sweeps=expand(rules.collect.output.sweep, experiment=list(PLAN.experiments)),
    output:
        rst=path("run_info"),
    log:
        path("run_info_log"),
    conda:
        "../envs/attnsvm.yaml"
    params:
        config=config,
        configfiles=config_file_names(workflow.configfiles),
        experiments=list(PLAN.experiments),
        version=attnsvm.__version__,
    script:
        "../scripts/run_info.py"


rule claims_page:
    input:
        ledgers=expand(rules.derive.output.claims, experiment=list(PLAN.experiments)),
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
        figures=PLAN.figure_pages(),
        version=attnsvm.__version__,
    script:
        "../scripts/claims_page.py"
