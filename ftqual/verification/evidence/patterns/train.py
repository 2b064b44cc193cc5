r"""Every pattern of the training log (logs/train_cycle<N>.log), each with an example line.

The training log (logs/train_cycle<N>.log, Megatron's lines each prefixed `"<rank>: "` by ft_launcher):
every pattern its readers match, once.

Readers: `evidence/train_log.py` (the facts), `evidence/scan/` (its fast paths over a block's bytes),
`ftqual/verification/causes.py` and `ftqual/workflow/progress.py`. Unified here:

- the log's file name: `train_cycle([0-9]+)\.log`, matched whole (causes and progress had `(\d+)`, which
  also takes non-ASCII digits; the snapshot `^...$` with `match`, which also takes a trailing newline): every
  recorded log's name is ASCII;
- the checkpoint load: `successfully loaded checkpoint from <path> at iteration N`, read by `load_iteration`
  in linear time (progress had `from .* at iteration (\d+)`: the same N, the last after the head, in
  quadratic time on a forged line).

Kept apart, because their readers want different facts of the line:
- `ITERATION` (a record: consumed samples are one of its fields) and `ITERATION_PACE` (the live status: the
  iteration and its time; it also takes a line without consumed samples, as printed by other workloads);
- `ITERATION_TIMESTAMP` (the record's time: the timestamp leads the text after the rank prefix) and
  `ITERATION_STAMP` (causes: the first timestamped iteration line anywhere in a raw line);
- `ERROR_NAME` (the parser's error facts: the line after the rank prefix starts with the exception's name)
  and `ERROR_LINE` (causes: the message too, past a torch `[rankN]: ` prefix).
"""

from __future__ import annotations

import re

from ftqual.rank.ids import INJECT_PREFIX

_TS = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]"
_NUM = r"(\d+(?:\.\d+)?)"

# A cycle's log file: `train_cycle0.log`
TRAIN_LOG_NAME = re.compile(r"train_cycle([0-9]+)\.log")

# The rank prefix (what the parser strips): `0: ` (`  3: ` right-aligned to the largest rank's width)
PREFIX = re.compile(r"^\s*(\d+): ?")
# The rank prefix ft_launcher writes (the first line of each rank is noted): ASCII only, so the bytes form
# finds exactly the lines this one matches.
RANK = re.compile(r"[ \t]*([0-9]+): ")
RANK_BYTES = re.compile(rb"[ \t]*([0-9]+): ")
# What causes strip before they compare a line: `0: [rank0]: `
RANK_AND_TORCH_RANK = re.compile(r"^(?:\d+: )?(?:\[rank\d+\]: )?")

# The FT init line, split with str.find, not one regex (two lazy groups backtrack quadratically on a forged
# line repeating the separators):
#   0: FT: initialized. Timeouts=SectionTimeouts(out_of_section=180.00, sections=[setup=900.00, step=30.00,
#      checkpointing=600.00, ], calculated_sections=set(), is_out_of_section_calculated=False)
FT_INIT_HEAD = re.compile(r"FT: initialized\. Timeouts=SectionTimeouts\(out_of_section=([^,]+), sections=\[")
# Calculated timeouts (--calc-ft-timeouts), rank 0 after NVRx calculated and ft_state.json was written:
#   0: FT: updated timeouts saved to /runs/.../ft_state.json. SectionTimeouts(out_of_section=180.00,
#      sections=[setup=900.00, step=10.00, checkpointing=600.00, ], calculated_sections={'step'},
#      is_out_of_section_calculated=False)
FT_UPDATED = "FT: updated timeouts saved to "
FT_TIMEOUTS_HEAD = re.compile(r"SectionTimeouts\(out_of_section=([^,]+), sections=\[")
FT_CALCULATED = "], calculated_sections="
FT_OOS_CALCULATED = ", is_out_of_section_calculated="
FT_FLAG = re.compile(r"(\w+)\)")  # `False)`
SECTION_VALUE = re.compile(r"(\w+)=([-\d.]+|None|inf)")  # `step=30.00`
# Saves (time, iteration):
#   0: [2026-11-30 16:15:30.297209] saving checkpoint at iteration       5 to /runs/.../checkpoints in ..
#   0:   [2026-11-30 16:15:31.988144] scheduled an async checkpoint save at iteration       5 to /runs/...
#   0:   [2026-11-30 16:15:33.627490] successfully saved checkpoint from iteration       5 to /runs/... [..]
SAVING = re.compile(_TS + r" saving checkpoint at iteration\s+(\d+) to")
SCHEDULED = re.compile(_TS + r" scheduled an async checkpoint save at iteration\s+(\d+)")
SAVED = re.compile(r"(?:" + _TS + r" )?successfully saved checkpoint from iteration\s+(\d+) to")
# Loads: the head, then the last ` at iteration N` after it (`load_iteration`):
#   0:  loading distributed checkpoint from /runs/.../checkpoints at iteration 5
#   0:   successfully loaded checkpoint from /runs/.../checkpoints [ t 1/1, gtp_remat 1/1 ] at iteration 5
LOADING = re.compile(r"loading (?:distributed )?checkpoint from ")
LOADED = re.compile(r"successfully loaded checkpoint from ")
AT_ITERATION = " at iteration "
_DIGITS = re.compile(r"\d+")
# A fresh start: the parser's fact, and the live status's line:
#   0: WARNING: could not find the metadata file /runs/.../checkpoints/latest_checkpointed_iteration.txt
#   0:     will not load any checkpoints and will start from random
FRESH_START = "could not find the metadata file"
FRESH = re.compile(r"will not load any checkpoints")
# Megatron's iteration line (`canonical.py` reads the same layout a block at a time):
#   0: [2026-11-30 16:15:25.123456] iteration        5/      30 | consumed samples:           40 | elapsed
#      time per iteration (ms): 812.3 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: 1.0E+01 |
ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \|")
ITERATION_TIMESTAMP = re.compile(r"^\s*" + _TS + r" iteration")
GLOBAL_BATCH = re.compile(r"global batch size:\s+(\d+)")
LOSS = re.compile(r"lm loss: ([-+]?(?:[\d.]+(?:[Ee][-+]?\d+)?|nan|inf))", re.IGNORECASE)
ELAPSED = re.compile(r"elapsed time per iteration \(ms\): ([\d.]+)")
# Every per-iteration figure the line prints, as printed (the exact replay compares the text, not a number);
# Megatron prints `num zeros` only with --log-num-zeros-in-grad:
#   ... | learning rate: 6.000000E-05 | ... | lm loss: 1.046875E+01 | loss scale: 1.0 | grad norm: 5.123 |
#   num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |
FIGURES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, re.compile(r"\| " + label + r":\s*([^|\s]+) \|"))
    for name, label in (
        ("loss", "lm loss"),
        ("grad norm", "grad norm"),
        ("learning rate", "learning rate"),
        ("loss scale", "loss scale"),
        ("skipped iterations", "number of skipped iterations"),
        ("nan iterations", "number of nan iterations"),
        ("zeros in grads", "num zeros"),
    )
)
# The live status's pace (iteration, of N, ms):
#   1:  [2026-11-30 10:00:05] iteration        5/      20 | elapsed time per iteration (ms): 250.0 |
ITERATION_PACE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|.*?elapsed time per iteration \(ms\): ([\d.]+)")
# The first timestamped iteration line of a raw line (causes: the baseline's start-up)
ITERATION_STAMP = re.compile(_TS + r" iteration\s+\d+/")
# The argument dump: its first line, one argument, its last line:
#   0: ------------------------ arguments ------------------------
#   0:   train_iters ..................................... 30
#   0: -------------------- end of arguments ---------------------
ARGUMENTS = "------ arguments ------"
END_OF_ARGUMENTS = "end of arguments"
ARG = re.compile(r"^  (\w+) (?:\.+ |\s)\s*(.*)$")  # value stripped in code: `(.*?)\s*$` is quadratic
# Megatron's timers (min, max); `evaluate` is logged by evaluate() before its results are printed:
#   1:     load-checkpoint ................................: (0.51, 0.53)
#   1:     evaluate .......................................: (69.42, 70.57)
TIMER = re.compile(r"^\s+(load-checkpoint|save-checkpoint|evaluate) \.*: \(" + _NUM + ", " + _NUM + r"\)")
EVALUATE_TIMER = "evaluate ."
# Megatron's evaluation results (evaluate_and_print_results, the last rank), between two dashed lines; in the
# train loop `iteration N`, after training `iteration N on validation set` and `iteration N on test set`:
#   1:  validation loss at iteration 3 | lm loss value: 4.215212E+00 | lm loss PPL: 6.770851E+01 |
#   1:  validation loss at iteration 30 on test set | lm loss value: 4.20E+00 | lm loss PPL: 6.71E+01 |
VALIDATION = re.compile(
    r"^\s*validation(?:-[\w-]+)? loss at iteration (\d+)(?: on (validation|test) set)? \|"
)
VALIDATION_KEYWORD = "loss at iteration "
VALIDATION_LOSS = re.compile(r"lm loss value: ([-+]?(?:[\d.]+(?:[Ee][-+]?\d+)?|nan|inf))", re.IGNORECASE)
# A milestone (label, local time):
#   0: [after in-process setup and before initialize_megatron] datetime: 2026-11-30 16:15:18.989679
MILESTONE = re.compile(r"^\[([^\]]+)\] datetime: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)")
MODEL_BUILT = "after model, optimizer, and learning rate scheduler are built"
# Taken right after ft_integration.setup() returned, i.e. after the FT `setup` section opened (Megatron prints
# it later, with that timestamp; core_v0.19 and the smoke workload):
#   0: [after in-job setup and before initialize_megatron] datetime: 2026-12-02 23:58:05.441778
SETUP_SECTION_OPENED = "after in-job setup and before initialize_megatron"
TRAINING_DONE = "after training is done"
# Our wrapper's injection line (an older `[inject] {...}` line is ignored):
#   1: [ftqual-inject] {"schema": "ftqual.fault/v1", "run_id": "kill-...", "fault": "kill", "rank": 1, ...}
INJECT = INJECT_PREFIX
# The FT client's other lines: `0: FT: loaded timeouts from /runs/.../ft_state.json`, `0: FT: closed.`
FT_LOADED = "FT: loaded timeouts from"
FT_CLOSED = "FT: closed."
# Megatron refusing the optimizer state: `0: Unable to load optimizer from checkpoint /runs/...`
OPTIMIZER_ERROR = "Unable to load optimizer"
# An error the parser keeps (after the rank prefix):
#   0: Traceback (most recent call last):
#   0: RuntimeError: CUDA error: out of memory
TRACEBACK = "Traceback (most recent call last)"
ERROR_NAME = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception))(?::|\s*$)")
# torch's elastic agent prefixes a worker's uncaught traceback with its rank (Megatron on GPU):
#   0: [rank0]: Traceback (most recent call last):
TORCH_RANK = re.compile(r"^\[rank\d+\]: ")
# Its rank, wherever the line has it (causes: which rank logged an error):
TORCH_RANK_OF = re.compile(r"^\s*(?:\d+: ?)?\[rank(\d+)\]:")
# The exception a traceback ends with, whatever its name (causes): `ftqual.rank.faults.InjectedFault: ...`
EXCEPTION_NAME = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*|:?)$")
# An error line with its message, a cause's text (past a torch `[rankN]: ` prefix):
#   0: [rank0]: torch.distributed.DistBackendError: NCCL error in: ...
ERROR_LINE = re.compile(r"^(?:\d+: )?(?:\[rank\d+\]: )?((?:\w+\.)*\w*(?:Error|Exception)\b.*)$")
# The workload refusing its arguments (argparse):
#   0: pretrain_gpt.py: error: unrecognized arguments: --no-such-flag
ARG_ERROR = re.compile(
    r"^(?:\d+: )?(?:\S+: )?error: (?:unrecognized arguments|argument|the following arguments)"
)
# Our wrapper failing the fault rank when its fault never came:
#   0: ... the requested kill fault (injection 2 of 2) was never injected (tracker stayed at or below 5 ...
NEVER_INJECTED = re.compile(r"fault (?:\(injection \d+ of \d+\) )?was never injected")

# Every line a fact of the parser can come from contains one of these; noise lines cost these substring
# tests only (`scan/` seeks their bytes in a block).
KEYWORDS = (
    "checkpoint",
    "consumed samples",
    "FT: ",
    "inject] ",
    "] datetime: ",
    "Unable to load",
    "Traceback",
    "Error",
    "Exception",
    "-- arguments",
    EVALUATE_TIMER,
    VALIDATION_KEYWORD,
)


def load_iteration(pattern: re.Pattern, text: str) -> int | None:
    """N of `<pattern> <path> at iteration N` (the last such N after the head, what a greedy `.*` finds), or
    None; in linear time: `head .* at iteration` tried at every repeated head is quadratic."""
    head = pattern.search(text)
    if head is None:
        return None
    end = len(text)
    while (at := text.rfind(AT_ITERATION, head.end(), end)) >= 0:
        if digits := _DIGITS.match(text, at + len(AT_ITERATION)):
            return int(digits[0])
        end = at + len(AT_ITERATION) - 1
    return None
