#!/usr/bin/env bash
# The fault campaign on one H200 (tools/gpu/campaign-1gpu.yaml over config/campaign.yaml), in one device
# call: preflight, a short baseline and 10 seeded faults over 420 iterations. Writes $OUT/campaign/ and
# $OUT/campaign.tar.gz. 585 s: the call's 600 s less what the evidence copy needs.
LIMIT=${LIMIT:-585} exec tools/gpu/one_call_1gpu.sh campaign config/campaign.yaml tools/gpu/campaign-1gpu.yaml
