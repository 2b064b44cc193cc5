#!/usr/bin/env bash
# The 1-GPU qualification under recommended timeouts next to the walkthrough's, in one device call
# (tools/gpu/recommended-1gpu.yaml): the baseline must finish with no timeout firing, the hang under the
# recommendation must be caught within its step timeout plus the rank monitor's interval, and the same hang
# under the walkthrough's values shows what those cost. Writes $OUT/recommended/ and $OUT/recommended.tar.gz.
exec tools/gpu/one_call_1gpu.sh recommended tools/gpu/recommended-1gpu.yaml
