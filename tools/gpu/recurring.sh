#!/usr/bin/env bash
# Faults that come back (config/recurring_faults.yaml) on real Megatron-LM on one GPU, in one device call:
#   OUT=... bash tools/gpu/recurring.sh
# baseline, recurring_exception, nan_loss, setup_crash and the curable control flaky_exception (every fault on
# rank 0, NVRx's restart agent in `log` mode: tools/gpu/recurring-1gpu.yaml), then `ftqual recommend-timeouts`.
# Writes $OUT/recurring/ (workflow.log, summary, status, the recommendation, the agent's verdict lines) and
# $OUT/recurring.tar.gz (results, logs, run directories without checkpoint payloads).
set -u
out=${OUT:-$PWD/recurring-out}
name=recurring
mkdir -p "$out/$name"
LIMIT=${LIMIT:-480} OUT=$out bash tools/gpu/one_call_1gpu.sh "$name" config/recurring_faults.yaml \
    tools/gpu/recurring-1gpu.yaml
source tools/gpu/env.sh >/dev/null 2>&1
python3 -m ftqual recommend-timeouts results >"$out/$name/recommend.txt" 2>&1
cp results/timeouts-recommended.yaml "$out/$name/" 2>/dev/null
# The restart agent's verdicts and the stop, per run, for a first look (the run directories hold the whole logs).
grep -HE 'AttrSvcResult|Attribution recommend|no progress|progress|exit code|exitcode' runs/*/logs/launcher.log \
    2>/dev/null | cut -c1-400 >"$out/$name/verdicts.txt"
cat "$out/$name/recommend.txt" 2>/dev/null | head -40
wc -l "$out/$name/verdicts.txt"
