rule summary:
    """The qualification report from every scenario's verify report and the preflight."""
    input:
        preflight="results/preflight.json",
        verify=all_verify_reports(),
    output:
        json=report(
            "results/summary.json",
            caption="../report/summary.rst",
            category="Summary",
        ),
        md=report(
            "results/summary.md",
            caption="../report/summary.rst",
            category="Summary",
        ),
        junit="results/junit.xml",
        plots=report(
            expand("results/plots/{plot}.png", plot=summary_plots()),
            caption="../report/plots.rst",
            category="Plots",
        ),
    log:
        "logs/summary.log",
    retries: 0
    params:
        verify=lambda wildcards, input: [
            f"{scenario}={path}" for scenario, path in zip(SCENARIOS, input.verify)
        ],
        baseline=BASELINE,
    script:
        "../scripts/rule_summary.py"
