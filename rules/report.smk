rule summary:
    """The qualification report of the current attempts and the preflight, failures included. Written to
    results/reports/<attempts>/; the gate copies it to results/summary.{json,md}, junit.xml and plots/.
    """
    input:
        unpack(summary_input),
    output:
        json=report(
            report_file("summary.json"),
            caption="../report/summary.rst",
            category="Summary",
        ),
        md=report(
            report_file("summary.md"),
            caption="../report/summary.rst",
            category="Summary",
        ),
        junit=report_file("junit.xml"),
        plots=report(
            expand(report_file("plots/{plot}.png"), plot=summary_plots()),
            caption="../report/plots.rst",
            category="Plots",
        ),
    log:
        "logs/summary.log",
    retries: 0
    conda:
        "../envs/ftqual.yaml"
    params:
        ftqual=ftqual_cli(),
        verdicts=report_arguments,
        out=lambda wildcards, output: Path(output.json).parent,
    shell:
        "{params.ftqual} report --preflight {input.preflight:q} {params.verdicts} --out {params.out:q} > {log:q} 2>&1"
