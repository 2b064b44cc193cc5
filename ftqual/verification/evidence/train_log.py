"""logs/train_cycle<N>.log: Megatron's account of one cycle, each line prefixed `"<rank>: "`.

Facts kept: FT timeouts (`FT: initialized. Timeouts=SectionTimeouts(...)`, `FT: loaded timeouts from`),
checkpoint saves (saving / scheduled / successfully saved), loads (fresh start, loading, successfully loaded,
`Unable to load optimizer`), iteration lines (consumed samples, batch size, loss), a few arguments, timers,
`FT: closed.`, evaluations (each ` validation loss at iteration N ...` line with the `evaluate` timer
printed before it), our wrapper's `[ftqual-inject] {...}` line (an older `[inject] {...}` line is ignored),
errors (tracebacks, `...Error:` lines), and the set of ranks that printed (the first line of each
`"<rank>: "` prefix). One streaming pass; a last line without newline marks the log incomplete.
"""

from __future__ import annotations

import ast
import bisect
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.iterations import (
    HAS_ELAPSED,
    HAS_GBS,
    HAS_LOSS,
    HAS_T,
    INT64_MAX,
    IterationTable,
    empty_table,
    micros,
)
from ftqual.verification.evidence.iterations import (
    IterationLine as IterationLine,  # re-exported: the checks name it here
)
from ftqual.verification.evidence.model import Ref, ref
from ftqual.verification.evidence.patterns import train as patterns
from ftqual.verification.evidence.safeio import MAX_LINE_BYTES, line_block, open_regular
from ftqual.verification.evidence.scan import keywords, train_blocks

MAX_ERRORS = 200
MAX_FACTS = 200000  # per kind: a runaway or forged log must not exhaust memory
TRAIN_LOG = patterns.TRAIN_LOG_NAME  # matched whole
WANTED_ARGS = frozenset(
    {
        "no_load_optim",
        "no_load_rng",
        "finetune",
        "use_distributed_optimizer",
        "global_batch_size",
        "micro_batch_size",
        "train_iters",
        "save_interval",
        "load",
        "save",
        "ckpt_format",
        "async_save",
        "verify_integrity",
        "calc_ft_timeouts",
        "transformer_impl",
        "exit_on_missing_checkpoint",
        "log_interval",
        "eval_iters",
        "eval_interval",
        "ft_num_warmup_iters",
    }
)

_PREFIX = patterns.PREFIX
_RANK = patterns.RANK
MODEL_BUILT = patterns.MODEL_BUILT  # the checks and the metrics name these milestones here
SETUP_SECTION_OPENED = patterns.SETUP_SECTION_OPENED
TRAINING_DONE = patterns.TRAINING_DONE
_KEYWORDS = patterns.KEYWORDS


def _interesting(line: str) -> bool:
    for keyword in _KEYWORDS:
        if keyword in line:
            return True
    return False


@dataclass(frozen=True)
class FtInit:
    out_of_section: float | None
    sections: Mapping[str, float | None]
    calculated: bool  # calculated_sections non-empty or out-of-section calculated
    ref: Ref


@dataclass(frozen=True, slots=True)
class SaveEvent:
    kind: str  # "start" | "scheduled" | "done"
    iteration: int
    t: datetime | None
    ref: Ref


@dataclass(frozen=True, slots=True)
class LoadEvent:
    kind: str  # "start" | "done"
    iteration: int
    ref: Ref


@dataclass(frozen=True, slots=True)
class Timer:
    name: str
    max_ms: float
    ref: Ref


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One evaluation's results line: the iteration it followed, `on` (None: the train loop's; "validation"
    or "test": pretrain()'s after training), its loss, and Megatron's `evaluate` timer (max over ranks, ms)
    that the same rank printed before it (None: none printed)."""

    iteration: int
    on: str | None
    loss: float | None
    timer_ms: float | None
    ref: Ref
    timer_ref: Ref | None = None


@dataclass(frozen=True)
class Injection:
    payload: dict
    ref: Ref


@dataclass(frozen=True)
class Milestone:
    """Megatron's `[label] datetime: ...` lines (setup phases, end of training)."""

    label: str
    t: datetime | None
    ref: Ref


@dataclass(frozen=True)
class ArgValue:
    value: str
    ref: Ref


@dataclass(frozen=True)
class TrainLog:
    cycle: int
    path: str
    lines: int
    complete: bool
    ft_inits: tuple[FtInit, ...] = ()
    ft_loaded: tuple[Ref, ...] = ()
    ft_updates: tuple[FtInit, ...] = ()  # calculated timeouts, as each update set them (--calc-ft-timeouts)
    saves: tuple[SaveEvent, ...] = ()
    loads: tuple[LoadEvent, ...] = ()
    fresh_starts: tuple[Ref, ...] = ()
    optimizer_errors: tuple[Ref, ...] = ()
    iterations: IterationTable = field(default_factory=empty_table)  # every iteration line, in log order
    args: Mapping[str, ArgValue] = field(default_factory=dict)
    timers: tuple[Timer, ...] = ()
    evaluations: tuple[Evaluation, ...] = ()  # in log order
    closed: tuple[Ref, ...] = ()
    injections: tuple[Injection, ...] = ()
    errors: tuple[Ref, ...] = ()
    milestones: tuple[Milestone, ...] = ()
    ranks: Mapping[int, Ref] = field(default_factory=dict)  # rank -> its first line in this log

    def milestone(self, label: str) -> Milestone | None:
        for item in self.milestones:
            if item.label == label:
                return item
        return None

    def saves_of(self, kind: str) -> tuple[SaveEvent, ...]:
        return self._saves_by_kind.get(kind, ())

    @cached_property
    def _saves_by_kind(self) -> dict[str, tuple[SaveEvent, ...]]:
        """Saves grouped once: a long run saves thousands of times and every check asks for its kind."""
        groups: dict[str, list[SaveEvent]] = {}
        for event in self.saves:
            groups.setdefault(event.kind, []).append(event)
        return {kind: tuple(events) for kind, events in groups.items()}

    def loads_of(self, kind: str) -> tuple[LoadEvent, ...]:
        return tuple(item for item in self.loads if item.kind == kind)

    def arg_true(self, name: str) -> bool:
        item = self.args.get(name)
        return item is not None and item.value.strip().lower() == "true"


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _ft_init(text: str, here: Ref) -> FtInit | None:
    """`FT: initialized. Timeouts=SectionTimeouts(out_of_section=X, sections=[...], calculated_sections=...,
    is_out_of_section_calculated=B)`, or None."""
    return _section_timeouts(text, here, patterns.FT_INIT_HEAD.match(text))


def _ft_updated(text: str, here: Ref) -> FtInit | None:
    """`FT: updated timeouts saved to PATH. SectionTimeouts(...)` (calculated timeouts), or None."""
    at = text.find(". SectionTimeouts(", len(patterns.FT_UPDATED))
    head = patterns.FT_TIMEOUTS_HEAD.match(text, at + 2) if at >= 0 else None
    return _section_timeouts(text, here, head)


def _section_timeouts(text: str, here: Ref, head: re.Match | None) -> FtInit | None:
    if head is None:
        return None
    mid = text.find(patterns.FT_CALCULATED, head.end())
    end = text.find(patterns.FT_OOS_CALCULATED, mid + len(patterns.FT_CALCULATED)) if mid >= 0 else -1
    flag = patterns.FT_FLAG.match(text, end + len(patterns.FT_OOS_CALCULATED)) if end >= 0 else None
    if flag is None:
        return None
    sections = {
        name: (None if value == "None" else _float(value))
        for name, value in patterns.SECTION_VALUE.findall(text, head.end(), mid)
    }
    listed = text[mid + len(patterns.FT_CALCULATED) : end].strip()
    calculated = listed not in ("set()", "[]", "") or flag[1] == "True"
    return FtInit(_float(head[1].strip()), MappingProxyType(sections), calculated, here)


def _payload(text: str) -> dict:
    text = text.strip()
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return {"raw": text[:200]}


class _Seen:
    """The iteration numbers of one log, in memory bounded by its shape: increasing runs at a constant step
    (one for a whole run at any log interval) plus the numbers that came out of order (forged logs only)."""

    def __init__(self) -> None:
        self.starts: list[int] = []  # runs: starts[i], starts[i] + steps[i], ..., lasts[i]; disjoint, sorted
        self.steps: list[int] = []
        self.lasts: list[int] = []
        self.others: set[int] = set()

    def __contains__(self, number: int) -> bool:
        if not self.lasts or number > self.lasts[-1]:
            return False
        if number in self.others:
            return True
        i = bisect.bisect_right(self.starts, number) - 1
        return (
            i >= 0
            and number <= self.lasts[i]
            and (not self.steps[i] or (number - self.starts[i]) % self.steps[i] == 0)
        )

    def add(self, number: int) -> None:
        """Add a number not yet seen."""
        if self.lasts and number < self.lasts[-1]:
            self.others.add(number)
        elif self.lasts and self.steps[-1] == 0:
            self.steps[-1] = number - self.lasts[-1]
            self.lasts[-1] = number
        elif self.lasts and number - self.lasts[-1] == self.steps[-1]:
            self.lasts[-1] = number
        else:
            self.starts.append(number)
            self.steps.append(0)
            self.lasts.append(number)

    def add_increasing(self, numbers: np.ndarray) -> None:
        """Add numbers above every number seen, in increasing order, as add() one by one would, a run of
        constant step at a time."""
        steps = np.diff(numbers)
        changes = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # k: steps[k] != steps[k - 1]
        i, n = 0, len(numbers)
        while i < n:
            self.add(int(numbers[i]))
            if i + 1 == n:
                return
            self.add(int(numbers[i + 1]))
            at = int(np.searchsorted(changes, i + 1))
            end = int(changes[at]) if at < len(changes) else n - 1  # the run's last number
            if end > i + 1 and self.steps[-1] == int(steps[i]) and self.lasts[-1] == int(numbers[i + 1]):
                self.lasts[-1] = int(numbers[end])
                i = end + 1
            else:
                i += 2


class _Collector:
    """Mutable accumulator used only inside parse_train_log; frozen into a TrainLog at the end."""

    def __init__(
        self, cycle: int, rel: str, clock: Clock, source: Path | None = None, root: Path | None = None
    ) -> None:
        self.cycle, self.rel, self.clock = cycle, rel, clock
        self.lists: dict[str, list] = {}
        self.args: dict[str, ArgValue] = {}
        self.seen_iterations = _Seen()
        self.table = IterationTable(cycle, rel, source, root)
        self.times: dict[str, int | None] = {}  # timestamp up to the second -> its microseconds (UTC)
        self.in_args = False
        self.args_rank: str | None = None
        self.ranks: dict[int, Ref] = {}
        self.rank_prefixes = np.zeros(0, dtype=np.uint64)  # sorted: see `_new_ranks`
        # per rank, the `evaluate` timer it printed and no results line has claimed yet
        self.eval_timers: dict[str | None, Timer] = {}

    def add(self, kind: str, fact: object, cap: int = MAX_FACTS) -> None:
        items = self.lists.setdefault(kind, [])
        if len(items) < cap:
            items.append(fact)

    def rank_line(self, number: int, raw: str) -> None:
        """Note the rank of a line, if its prefix names one not seen yet."""
        if (m := _RANK.match(raw)) and (rank := int(m[1])) not in self.ranks:
            self.ranks[rank] = ref(self.rel, number, raw)

    def line(self, number: int, raw: str, offset: int = -1) -> None:
        """Line `number`; `offset`: where it starts in the file (-1: unknown, its text is kept if needed)."""
        raw = raw[:MAX_LINE_BYTES]  # facts sit at a line's start; a forged megabyte line costs no more
        self.offset = offset
        try:
            self._line(number, raw)
        except ValueError:  # a number too long for int() (a forged line) yields no fact, never a traceback
            pass

    def _line(self, number: int, raw: str) -> None:
        self.rank_line(number, raw)
        prefix = _PREFIX.match(raw)
        rank = prefix[1] if prefix else None
        text = raw[prefix.end() :] if prefix else raw
        text = text.rstrip("\r\n")
        if self.in_args and rank == self.args_rank:
            if patterns.END_OF_ARGUMENTS in text:
                self.in_args = False
            elif (m := patterns.ARG.match(text)) and m[1] in WANTED_ARGS:
                self.args[m[1]] = ArgValue(m[2].strip(), ref(self.rel, number, raw))
            return
        if patterns.ARGUMENTS in text:
            self.in_args, self.args_rank = True, rank
            return

        def at() -> Ref:
            return ref(self.rel, number, raw)

        if text.startswith("FT: "):
            if init := _ft_init(text, at()):
                self.add("ft_inits", init)
            elif text.startswith(patterns.FT_UPDATED):
                if update := _ft_updated(text, at()):
                    self.add("ft_updates", update)
            elif text.startswith(patterns.FT_LOADED):
                self.add("ft_loaded", at())
            elif text.startswith(patterns.FT_CLOSED):
                self.add("closed", at())
        elif text.startswith(patterns.INJECT):
            self.add("injections", Injection(_payload(text[len(patterns.INJECT) :]), at()))
        elif "consumed samples" in text and (m := patterns.ITERATION.search(text)):
            self._iteration(m, text, number, raw)
        elif "-checkpoint ." in text and (m := patterns.TIMER.match(text)):
            self.add("timers", Timer(m[1], float(m[3]), at()))  # (min, max): the max is what counts
        elif patterns.EVALUATE_TIMER in text and (m := patterns.TIMER.match(text)):
            timer = Timer(m[1], float(m[3]), at())
            self.add("timers", timer)
            self.eval_timers[rank] = timer
        elif patterns.VALIDATION_KEYWORD in text and (m := patterns.VALIDATION.match(text)):
            self._evaluation(m, text, rank, at())
        elif "checkpoint" in text:
            self._checkpoint(text, at)
        elif "] datetime: " in text and (m := patterns.MILESTONE.match(text)):
            self.add("milestones", Milestone(m[1], self.clock.parse_local(m[2]), at()), 100)
        if patterns.OPTIMIZER_ERROR in text:
            self.add("optimizer_errors", at())
        bare = patterns.TORCH_RANK.sub("", text, count=1) if text.startswith("[rank") else text
        if bare.startswith(patterns.TRACEBACK) or patterns.ERROR_NAME.match(bare):
            self.add("errors", at(), MAX_ERRORS)

    def _evaluation(self, m: re.Match, text: str, rank: str | None, here: Ref) -> None:
        """A results line, with the `evaluate` timer its rank printed since its last results line: evaluate()
        logs the timer just before evaluate_and_print_results prints the block, on the same (last) rank."""
        loss = patterns.VALIDATION_LOSS.search(text)
        timer = self.eval_timers.pop(rank, None)
        value = _float(loss[1]) if loss else None
        ms, where = (timer.max_ms, timer.ref) if timer is not None else (None, None)
        self.add("evaluations", Evaluation(int(m[1]), m[2], value, ms, here, where))

    def _checkpoint(self, text: str, at) -> None:
        if m := patterns.SAVING.search(text):
            self.add("saves", SaveEvent("start", int(m[2]), self.clock.parse_local(m[1]), at()))
        elif m := patterns.SCHEDULED.search(text):
            self.add("saves", SaveEvent("scheduled", int(m[2]), self.clock.parse_local(m[1]), at()))
        elif m := patterns.SAVED.search(text):
            t = self.clock.parse_local(m[1]) if m[1] else None
            self.add("saves", SaveEvent("done", int(m[2]), t, at()))
        elif (loaded := patterns.load_iteration(patterns.LOADED, text)) is not None:
            self.add("loads", LoadEvent("done", loaded, at()))
        elif (loading := patterns.load_iteration(patterns.LOADING, text)) is not None:
            self.add("loads", LoadEvent("start", loading, at()))
        elif patterns.FRESH_START in text:
            self.add("fresh_starts", at())

    def _iteration(self, m: re.Match, text: str, number: int, raw: str) -> None:
        """One record per new iteration number (the first line wins); a number beyond int64 (forged) is no
        fact, as one too long for int() is not."""
        iteration, total, consumed = int(m[1]), int(m[2]), int(m[3])
        gbs = patterns.GLOBAL_BATCH.search(text)
        size = int(gbs[1]) if gbs else 0
        if max(iteration, total, consumed, size) > INT64_MAX or iteration in self.seen_iterations:
            return
        self.seen_iterations.add(iteration)
        ts = patterns.ITERATION_TIMESTAMP.match(text)
        loss = patterns.LOSS.search(text)
        elapsed = patterns.ELAPSED.search(text)
        value = _float(loss[1]) if loss else None
        ms = _float(elapsed[1]) if elapsed else None
        t = self._micros(ts[1]) if ts else None
        flags = (
            (HAS_GBS if gbs else 0)
            | (HAS_LOSS if value is not None else 0)
            | (HAS_ELAPSED if ms is not None else 0)
            | (HAS_T if t is not None else 0)
        )
        row = (iteration, total, consumed, size, value or 0.0, ms or 0.0, t or 0, number, self.offset, flags)
        self.table.append(row, raw if self.offset < 0 else None)

    def bulk(self, rows: np.ndarray) -> None:
        """Record canonical iteration lines of one block (in line order), each new iteration number once."""
        its = rows["iteration"]
        seen = self.seen_iterations
        increasing = bool((np.diff(its) > 0).all()) and (not seen.lasts or int(its[0]) > seen.lasts[-1])
        if increasing:
            seen.add_increasing(its)
        else:
            keep = np.zeros(len(rows), dtype=bool)
            for index, value in enumerate(its.tolist()):
                if value not in seen:
                    seen.add(value)
                    keep[index] = True
            rows = rows[keep]
        self.table.extend(rows)

    def _micros(self, text: str) -> int | None:
        """clock.parse_local(text) as microseconds, strptime run once per second of the log: the fraction
        (1 to 6 digits after `.`, what `%f` accepts) is added to the parsed second."""
        head, dot, frac = text.partition(".")
        if dot and not (frac.isdigit() and len(frac) <= 6):
            moment = self.clock.parse_local(text)
            return micros(moment) if moment is not None else None
        if head not in self.times:
            if len(self.times) >= 4096:
                self.times.clear()
            moment = self.clock.parse_local(head)
            self.times[head] = micros(moment) if moment is not None else None
        base = self.times[head]
        if base is None:
            moment = self.clock.parse_local(text)
            return micros(moment) if moment is not None else None
        return base + (int(frac.ljust(6, "0")) if dot else 0)

    def freeze(self, lines: int, complete: bool) -> TrainLog:
        get = self.lists.get
        return TrainLog(
            cycle=self.cycle,
            path=self.rel,
            lines=lines,
            complete=complete,
            ft_inits=tuple(get("ft_inits", ())),
            ft_loaded=tuple(get("ft_loaded", ())),
            ft_updates=tuple(get("ft_updates", ())),
            saves=tuple(get("saves", ())),
            loads=tuple(get("loads", ())),
            fresh_starts=tuple(get("fresh_starts", ())),
            optimizer_errors=tuple(get("optimizer_errors", ())),
            iterations=self.table.close(),
            args=MappingProxyType(dict(self.args)),
            timers=tuple(get("timers", ())),
            evaluations=tuple(get("evaluations", ())),
            closed=tuple(get("closed", ())),
            injections=tuple(get("injections", ())),
            errors=tuple(get("errors", ())),
            milestones=tuple(get("milestones", ())),
            ranks=MappingProxyType(dict(sorted(self.ranks.items()))),
        )


def parse_train_log(path: Path, rel: str, cycle: int, clock: Clock, root: Path | None = None) -> TrainLog:
    """One pass over one cycle's log. Raises OSError if the file cannot be opened, is not a regular file,
    or (with `root`) resolves outside it. Memory is bounded per line (MAX_LINE_BYTES) and per kind of fact.

    Same lines, line numbers and text as reading the file in text mode line by line and handing every
    keyword line (and every line of the argument dump) to the collector, and every other line's rank prefix
    to `rank_line`; a block holding a carriage return is read exactly that way, since universal newlines
    make a lone `\r` end a line.
    """
    collector = _Collector(cycle, rel, clock, path, root)
    number = 0  # lines before the current position
    complete = True
    with open_regular(path, *((root,) if root is not None else ())) as handle:
        while True:
            base = handle.tell()  # where the block starts in the file: iteration lines are read back from it
            block = line_block(handle, train_blocks.BLOCK_BYTES)
            if not block:
                break
            head = block.find(train_blocks.ARGUMENTS)
            if (
                cut := train_blocks.after_arguments(block, head)
            ) is not None:  # the rest is read again as the next block
                block = block[:cut]
                handle.seek(base + cut)
            if b"\r" in block:
                for raw in io.StringIO(block.decode("utf-8", "replace"), newline=None):
                    number += 1
                    complete = raw.endswith("\n")
                    if collector.in_args or _interesting(raw):
                        collector.line(number, raw)
                    else:
                        collector.rank_line(number, raw)
                continue
            a = np.frombuffer(block, dtype=np.uint8)
            newlines = np.flatnonzero(a == 10)
            train_blocks.new_ranks(collector, block, a, newlines, number)
            size, pos = len(block), 0
            bulk = train_blocks.bulk_iterations(collector, block, base, number, head >= 0, a, newlines)
            starts = bulk if bulk is not None else keywords.candidate_starts(block, train_blocks.NEEDLES)
            if collector.in_args:  # an argument dump continues from the previous block
                starts.insert(0, 0)

            for start in starts:
                if start < pos:
                    continue
                number += keywords.newlines_in(newlines, pos, start)
                pos = start
                while True:  # the keyword line, then every line while inside the argument dump
                    end = block.find(b"\n", pos)
                    stop = size if end < 0 else end + 1
                    number += 1
                    raw = block[pos : min(stop, pos + MAX_LINE_BYTES)].decode("utf-8", "replace")
                    collector.line(number, raw, base + pos)
                    pos = stop
                    if not collector.in_args or pos >= size:
                        break
            number += keywords.newlines_in(newlines, pos, size)
            complete = block.endswith(b"\n")
            if not complete and pos < size:
                number += 1  # the last line, without newline, held no keyword
    return collector.freeze(number, complete=complete)
