"""Rule `scenario_settings`: write one scenario's resolved settings and launcher environment (the rule's
param) to results/<scenario>/settings.json, which run_scenario reads."""

import json
import sys

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
sys.stderr = open(sm.log[0], "w", buffering=1)

with open(sm.output[0], "w") as out:
    json.dump(sm.params.record, out, indent=2, sort_keys=True)
    out.write("\n")
print(f"wrote {sm.output[0]}", file=sys.stderr)
