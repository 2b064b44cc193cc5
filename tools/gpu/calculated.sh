#!/usr/bin/env bash
# NVRx's calculated timeouts on one H200 (tools/gpu/calculated-1gpu.yaml), in one device call: baseline and a
# two-hang run under calc_ft_timeouts; the report's "Calculated timeouts" part lists the values NVRx chose in
# each cycle. Writes $OUT/calculated/ and $OUT/calculated.tar.gz. 330 s: what the session's budget had left.
LIMIT=${LIMIT:-330} exec tools/gpu/one_call_1gpu.sh calculated tools/gpu/calculated-1gpu.yaml
