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
        html=report(
            report_file("summary.html"),
            caption="../report/summary_html.rst",
            category="Summary",
        ),
        # report/workflow.rst shows it on the report's landing page: the verdict and what needs attention
        landing=report_file("landing.html"),
        junit=report(
            report_file("junit.xml"),
            caption="../report/junit.rst",
            category="Summary",
        ),
        plots=report(
            expand(
                report_file("plots/{plot}.png"), plot=rule_inputs.summary_plots(PLAN)
            ),
            caption="../report/plots.rst",
            category="Plots",
        ),
    log:
        "logs/summary.log",
    retries: 0
    conda:
        "../envs/ftqual.yaml"
    params:
        # `ftqual report --preflight ... --out <this folder>`, built as onerror's rebuild builds it.
        command=summary_command,
    shell:
        "{params.command} > {log:q} 2>&1"
