"""The code that runs inside every training rank: the standard library and ftqual.contract only.

The code that runs inside every training rank: the fault injection wrapper around the workload, as a
package of the standard library only. Besides the standard library it imports ftqual.contract alone (the
tracker name, the fault kinds, the save phases; it imports nothing else either), so a rank needs neither
the project's dependencies nor the rest of the package; tests/unit/rank/test_boundary.py holds it.

A module per job: ids (what a writer here and a reader elsewhere share), markers, tracker, save_phases, freeze
(the save-phase kill's helper process), damage (checkpoint damage), storage (storage faults), procfs (the one
/proc reader, the launcher's too), leftovers, sections, faults (and their dispatch table), injector, worker
(the entry point: `main`). Importing any of them does no work: NVRx's persistent checkpoint worker is started
with `spawn`, which re-imports the main script (workloads/megatron_gpt_worker.py), and that imports this.
"""
