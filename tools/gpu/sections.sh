#!/usr/bin/env bash
# A hang in every FT section on one H200 (tools/gpu/sections-1gpu.yaml), in one device call: setup (in the
# replacement's setup, after its checkpoint load), checkpointing (inside an asynchronous save) and out of
# section (right after a step's section closed), each caught by its own section's timeout, and a baseline
# under the same tight timeouts. Writes $OUT/sections/ and $OUT/sections.tar.gz.
exec tools/gpu/one_call_1gpu.sh sections config/timeouts.yaml tools/gpu/sections-1gpu.yaml
