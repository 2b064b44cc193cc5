#!/usr/bin/env bash
# A team's job as it will run (tools/gpu/team_train_gpt.sh, read whole: 8 accumulation steps, an evaluation
# every 5 iterations) on one GPU through the README's command, in two device calls of at most 10 minutes:
#   tools/gpu/team_job.sh          baseline + kill, then `ftqual recommend-timeouts`
#   tools/gpu/team_job.sh proof    baseline + hang under those timeouts (tools/gpu/team-job-recommended.yaml)
# Writes $OUT/<name>/ (workflow.log, summary, the recommendation) and $OUT/<name>.tar.gz.
set -u
out=${OUT:-$PWD/team-job-out}
name=team-job
extra=(tools/gpu/team-job-1gpu.yaml)
if [[ "${1:-}" == proof ]]; then
    name=team-job-proof
    extra=(tools/gpu/team-job-1gpu.yaml tools/gpu/team-job-recommended.yaml tools/gpu/team-job-proof.yaml)
fi
mkdir -p "$out/$name"
LIMIT=${LIMIT:-500} OUT=$out bash tools/gpu/one_call_1gpu.sh "$name" "${extra[@]}"
source tools/gpu/env.sh >/dev/null 2>&1
python3 -m ftqual recommend-timeouts results >"$out/$name/recommend.txt" 2>&1
cp results/timeouts-recommended.yaml "$out/$name/" 2>/dev/null
