#!/usr/bin/env bash
# Snakemake runs this once, right after it creates the ftqual.yaml environment, inside that environment
# and in the workflow's working directory: the checkout, where the Snakefile and ftqual/ are. Installs
# ftqual itself (editable, so the rules run the checkout's code); its dependencies come from ftqual.yaml.
set -euo pipefail
python -m pip install --no-deps --editable .
