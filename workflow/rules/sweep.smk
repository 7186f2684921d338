# Block jobs (train + solve a block of cells), then collect and summarize per experiment.
# Priorities (attnsvm.plan.Plan.priority): experiments in config order, and each
# experiment's collect, summary and figures as soon as its own blocks are done.


rule block:
    output:
        store=directory(path("block")),
    log:
        path("block_log"),
    priority: block_priority
    conda:
        "../envs/attnsvm.yaml"
    threads: config.get("threads", 1)
    resources:
        runtime=block_runtime,
        mem_mb=config.get("mem_mb", 4000),
    params:
        cells_digest=block_digest,
        version=attnsvm.__version__,
        device=config.get("device", "auto"),
    script:
        "../scripts/block.py"


rule collect:
    input:
        block_stores,
    output:
        sweep=directory(path("sweep")),
    log:
        path("collect_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    # block stores are read by up to `threads` processes (from 100 stores per process on);
    # 2 fits any node (the SLURM profile sets it), more only pays for thousands of blocks
    threads: 2
    params:
        experiment=experiment_settings,
        version=attnsvm.__version__,
    script:
        "../scripts/collect.py"


rule summarize:
    input:
        sweep=rules.collect.output.sweep,
    output:
        summary=path("summary"),
    log:
        path("summarize_log"),
    priority: results_priority
    conda:
        "../envs/attnsvm.yaml"
    params:
        version=attnsvm.__version__,
    script:
        "../scripts/summarize.py"
