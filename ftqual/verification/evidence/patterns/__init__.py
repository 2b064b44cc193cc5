"""The log-line patterns, one module per source format, compiled once.

The log-line patterns of each source format, compiled once: `launcher` for ft_launcher's log
(logs/launcher.log), `train` for the training log (logs/train_cycle<N>.log), `common` for what any log's
lines are searched for (the "telling" line that names an error).

Every reader of those logs takes its patterns from here: the evidence parsers (`launcher_log.py`,
`train_log.py`), their fast paths (`scan/`), the causes (`ftqual/verification/causes.py`) and the live
progress reader
(`ftqual/workflow/progress.py`), so a line NVRx or Megatron prints is recognised alike wherever it is read.
They live
under `ftqual/verification/evidence` because that is the bottom of the import chain (`evidence <- checks <-
metrics <-
verify`): causes and progress already import the evidence readers, and nothing here imports anything back.
Each pattern comes with an example of the line it takes; where two readers want different facts of one line
(a record's fields, a live status's pace), the module says why there are two.
"""
