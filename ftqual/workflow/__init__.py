"""The workflow rules' logic, as plain functions: one module per rule script.

Each `scripts/rule_*.py` only redirects its errors to the rule's log, takes its values from Snakemake's
`snakemake` object and calls one function here, so that tests import and exercise the logic without
running Snakemake.
"""
