"""logs/train_cycle<N>.log: Megatron's account of one cycle, each line prefixed `"<rank>: "`.

Facts kept: FT timeouts (`FT: initialized. Timeouts=SectionTimeouts(...)`, `FT: loaded timeouts from`),
checkpoint saves (saving / scheduled / successfully saved), loads (fresh start, loading, successfully loaded,
`Unable to load optimizer`), iteration lines (consumed samples, batch size, loss), a few arguments, timers,
`FT: closed.`, our wrapper's `[ftqual-inject] {...}` line (the legacy `[inject] {...}` line is counted apart
and otherwise ignored), errors (tracebacks, `...Error:` lines), and the set of ranks that printed (the first
line of each `"<rank>: "` prefix). One streaming pass; a last line without newline marks the log incomplete.
"""

from __future__ import annotations

import ast
import bisect
import io
import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ftqual.evidence.clock import Clock
from ftqual.evidence.iterations import (
    DTYPE,
    HAS_ELAPSED,
    HAS_GBS,
    HAS_LOSS,
    HAS_T,
    INT64_MAX,
    IterationTable,
    empty_table,
    micros,
)
from ftqual.evidence.iterations import IterationLine as IterationLine  # re-exported: the checks name it here
from ftqual.evidence.model import Ref, ref
from ftqual.evidence.safeio import MAX_LINE_BYTES, open_regular

MAX_ERRORS = 200
MAX_FACTS = 200000  # per kind: a runaway or forged log must not exhaust memory
TRAIN_LOG = re.compile(r"^train_cycle([0-9]+)\.log$")
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
        "calc_ft_timeouts",
        "transformer_impl",
        "exit_on_missing_checkpoint",
        "log_interval",
    }
)

_PREFIX = re.compile(r"^\s*(\d+): ?")
# The rank prefix ft_launcher writes (right-aligned to the width of the largest rank): ASCII only, so the
# bytes form below finds exactly the lines this one matches.
_RANK = re.compile(r"[ \t]*([0-9]+): ")
_RANK_BYTES = re.compile(rb"[ \t]*([0-9]+): ")
_TS = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]"
# The FT init line is split with str.find, not one regex: two lazy groups backtrack quadratically on a
# forged line repeating the separators.
_FT_INIT_HEAD = re.compile(r"FT: initialized\. Timeouts=SectionTimeouts\(out_of_section=([^,]+), sections=\[")
_FT_CALCULATED = "], calculated_sections="
_FT_OOS_CALCULATED = ", is_out_of_section_calculated="
_FT_FLAG = re.compile(r"(\w+)\)")
_SECTION_VALUE = re.compile(r"(\w+)=([-\d.]+|None|inf)")
_SAVING = re.compile(_TS + r" saving checkpoint at iteration\s+(\d+) to")
_SCHEDULED = re.compile(_TS + r" scheduled an async checkpoint save at iteration\s+(\d+)")
_SAVED = re.compile(r"(?:" + _TS + r" )?successfully saved checkpoint from iteration\s+(\d+) to")
# `<head> <path> at iteration N`: the head is found once and the last ` at iteration N` after it (what a
# greedy `.*` finds), in linear time; `head .* at iteration` tried at every repeated head is quadratic.
_LOADING = re.compile(r"loading (?:distributed )?checkpoint from ")
_LOADED = re.compile(r"successfully loaded checkpoint from ")
_AT_ITERATION = " at iteration "
_DIGITS = re.compile(r"\d+")
_ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+) \| consumed samples:\s+(\d+) \|")
_ITER_TS = re.compile(r"^\s*" + _TS + r" iteration")
_GBS = re.compile(r"global batch size:\s+(\d+)")
_LOSS = re.compile(r"lm loss: ([-+]?(?:[\d.]+(?:[Ee][-+]?\d+)?|nan|inf))", re.IGNORECASE)
_ELAPSED = re.compile(r"elapsed time per iteration \(ms\): ([\d.]+)")
_ARG = re.compile(r"^  (\w+) (?:\.+ |\s)\s*(.*)$")  # value stripped in code: `(.*?)\s*$` is quadratic
_NUM = r"(\d+(?:\.\d+)?)"
_TIMER = re.compile(r"^\s+(load-checkpoint|save-checkpoint) \.*: \(" + _NUM + ", " + _NUM + r"\)")
_MILESTONE = re.compile(r"^\[([^\]]+)\] datetime: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)")
MODEL_BUILT = "after model, optimizer, and learning rate scheduler are built"
TRAINING_DONE = "after training is done"
# Every line a fact can come from contains one of these; noise lines cost these substring tests only.
_KEYWORDS = (
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
)


def _interesting(line: str) -> bool:
    for keyword in _KEYWORDS:
        if keyword in line:
            return True
    return False


_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception))(?::|\s*$)")


@dataclass(frozen=True)
class FtInit:
    out_of_section: float | None
    sections: Mapping[str, float | None]
    calculated: bool  # calculated_sections non-empty or out-of-section calculated
    ref: Ref


@dataclass(frozen=True)
class SaveEvent:
    kind: str  # "start" | "scheduled" | "done"
    iteration: int
    t: datetime | None
    ref: Ref


@dataclass(frozen=True)
class LoadEvent:
    kind: str  # "start" | "done"
    iteration: int
    ref: Ref


@dataclass(frozen=True)
class Timer:
    name: str
    min_ms: float
    max_ms: float
    ref: Ref


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
    saves: tuple[SaveEvent, ...] = ()
    loads: tuple[LoadEvent, ...] = ()
    fresh_starts: tuple[Ref, ...] = ()
    optimizer_errors: tuple[Ref, ...] = ()
    iterations: IterationTable = field(default_factory=empty_table)  # every iteration line, in log order
    args: Mapping[str, ArgValue] = field(default_factory=dict)
    timers: tuple[Timer, ...] = ()
    closed: tuple[Ref, ...] = ()
    injections: tuple[Injection, ...] = ()
    legacy_injections: tuple[Ref, ...] = ()
    errors: tuple[Ref, ...] = ()
    milestones: tuple[Milestone, ...] = ()
    ranks: Mapping[int, Ref] = field(default_factory=dict)  # rank -> its first line in this log

    def milestone(self, label: str) -> Milestone | None:
        for item in self.milestones:
            if item.label == label:
                return item
        return None

    def saves_of(self, kind: str) -> tuple[SaveEvent, ...]:
        return tuple(s for s in self.saves if s.kind == kind)

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
    head = _FT_INIT_HEAD.match(text)
    if head is None:
        return None
    mid = text.find(_FT_CALCULATED, head.end())
    end = text.find(_FT_OOS_CALCULATED, mid + len(_FT_CALCULATED)) if mid >= 0 else -1
    flag = _FT_FLAG.match(text, end + len(_FT_OOS_CALCULATED)) if end >= 0 else None
    if flag is None:
        return None
    sections = {
        name: (None if value == "None" else _float(value))
        for name, value in _SECTION_VALUE.findall(text, head.end(), mid)
    }
    listed = text[mid + len(_FT_CALCULATED) : end].strip()
    calculated = listed not in ("set()", "[]", "") or flag[1] == "True"
    return FtInit(_float(head[1].strip()), MappingProxyType(sections), calculated, here)


def _load_iteration(pattern: re.Pattern, text: str) -> int | None:
    """N of `<pattern> <path> at iteration N` (the last such N after the head), or None."""
    head = pattern.search(text)
    if head is None:
        return None
    end = len(text)
    while (at := text.rfind(_AT_ITERATION, head.end(), end)) >= 0:
        if digits := _DIGITS.match(text, at + len(_AT_ITERATION)):
            return int(digits[0])
        end = at + len(_AT_ITERATION) - 1
    return None


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
            if "end of arguments" in text:
                self.in_args = False
            elif (m := _ARG.match(text)) and m[1] in WANTED_ARGS:
                self.args[m[1]] = ArgValue(m[2].strip(), ref(self.rel, number, raw))
            return
        if "------ arguments ------" in text:
            self.in_args, self.args_rank = True, rank
            return

        def at() -> Ref:
            return ref(self.rel, number, raw)

        if text.startswith("FT: "):
            if init := _ft_init(text, at()):
                self.add("ft_inits", init)
            elif text.startswith("FT: loaded timeouts from"):
                self.add("ft_loaded", at())
            elif text.startswith("FT: closed."):
                self.add("closed", at())
        elif text.startswith("[ftqual-inject]"):
            self.add("injections", Injection(_payload(text[len("[ftqual-inject]") :]), at()))
        elif text.startswith("[inject] "):
            self.add("legacy_injections", at())
        elif "consumed samples" in text and (m := _ITERATION.search(text)):
            self._iteration(m, text, number, raw)
        elif "-checkpoint ." in text and (m := _TIMER.match(text)):
            self.add("timers", Timer(m[1], float(m[2]), float(m[3]), at()))
        elif "checkpoint" in text:
            self._checkpoint(text, at)
        elif "] datetime: " in text and (m := _MILESTONE.match(text)):
            self.add("milestones", Milestone(m[1], self.clock.parse_local(m[2]), at()), 100)
        if "Unable to load optimizer" in text:
            self.add("optimizer_errors", at())
        if text.startswith("Traceback (most recent call last)") or _ERROR.match(text):
            self.add("errors", at(), MAX_ERRORS)

    def _checkpoint(self, text: str, at) -> None:
        if m := _SAVING.search(text):
            self.add("saves", SaveEvent("start", int(m[2]), self.clock.parse_local(m[1]), at()))
        elif m := _SCHEDULED.search(text):
            self.add("saves", SaveEvent("scheduled", int(m[2]), self.clock.parse_local(m[1]), at()))
        elif m := _SAVED.search(text):
            t = self.clock.parse_local(m[1]) if m[1] else None
            self.add("saves", SaveEvent("done", int(m[2]), t, at()))
        elif (loaded := _load_iteration(_LOADED, text)) is not None:
            self.add("loads", LoadEvent("done", loaded, at()))
        elif (loading := _load_iteration(_LOADING, text)) is not None:
            self.add("loads", LoadEvent("start", loading, at()))
        elif "could not find the metadata file" in text:
            self.add("fresh_starts", at())

    def _iteration(self, m: re.Match, text: str, number: int, raw: str) -> None:
        """One record per new iteration number (the first line wins); a number beyond int64 (forged) is no
        fact, as one too long for int() is not."""
        iteration, total, consumed = int(m[1]), int(m[2]), int(m[3])
        gbs = _GBS.search(text)
        size = int(gbs[1]) if gbs else 0
        if max(iteration, total, consumed, size) > INT64_MAX or iteration in self.seen_iterations:
            return
        self.seen_iterations.add(iteration)
        ts = _ITER_TS.match(text)
        loss = _LOSS.search(text)
        elapsed = _ELAPSED.search(text)
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
            saves=tuple(get("saves", ())),
            loads=tuple(get("loads", ())),
            fresh_starts=tuple(get("fresh_starts", ())),
            optimizer_errors=tuple(get("optimizer_errors", ())),
            iterations=self.table.close(),
            args=MappingProxyType(dict(self.args)),
            timers=tuple(get("timers", ())),
            closed=tuple(get("closed", ())),
            injections=tuple(get("injections", ())),
            legacy_injections=tuple(get("legacy_injections", ())),
            errors=tuple(get("errors", ())),
            milestones=tuple(get("milestones", ())),
            ranks=MappingProxyType(dict(sorted(self.ranks.items()))),
        )


# Logs are read in blocks of this many bytes (extended to the next newline). Within a block each keyword is
# found with bytes.find (C speed), and only the lines holding one are decoded and parsed: the chatter that
# makes a large log (per-rank warnings, NCCL INFO) is never split into Python strings.
_BLOCK_BYTES = 4 << 20
_NEEDLES = tuple(keyword.encode() for keyword in _KEYWORDS)


def _candidate_starts(block: bytes, needles: tuple[bytes, ...] = _NEEDLES) -> list[int]:
    """Sorted offsets of the lines in `block` that contain a keyword (the same test as `_interesting`:
    the keywords are ASCII, so a keyword is in the decoded line exactly when its bytes are in the raw one)."""
    starts: set[int] = set()
    find, rfind = block.find, block.rfind
    for needle in needles:
        pos = find(needle)
        while pos >= 0:
            starts.add(rfind(b"\n", 0, pos) + 1)
            end = find(b"\n", pos)
            if end < 0:
                break
            pos = find(needle, end + 1)
    return sorted(starts)


# Iteration lines in Megatron's own format (every field in its place up to the loss) are parsed a block at a
# time: one regex pass collects them and numpy converts their numbers. The rest of such a line holds no fact
# once the block checks passed (no other keyword on a line with `consumed samples`, one per line). Every other
# line, and every block where that could differ from the line-by-line reading, goes through the collector.
_BULK = re.compile(
    rb"\n *[0-9]+: +\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\] iteration +(\d{1,18})/ *(\d{1,18}) \| "
    rb"consumed samples: +(\d{1,18}) \| elapsed time per iteration \(ms\): (\d{1,15}\.\d{1,15}) \| "
    rb"learning rate: [-+.0-9Ee]+ \| global batch size: +(\d{1,18}) \| "
    rb"lm loss: ([-+]?\d{1,15}\.\d{1,15}E[-+]\d{1,3}) \|",
)
_SAMPLES = b"consumed samples"
_OTHER_NEEDLES = tuple(n for n in _NEEDLES if n != _SAMPLES)


def _bulk_iterations(collector: _Collector, block: bytes, base: int, number: int) -> list[int] | None:
    """Record the block's iteration lines at once and return the other candidate lines' starts, or None
    (nothing recorded) when the block must be read line by line: an argument dump in it or open, a line
    with `consumed samples` not in the canonical format, or one that also holds another keyword."""
    if collector.in_args or b"------ arguments ------" in block:
        return None
    found = _BULK.findall(b"\n" + block)  # a line starts after a newline: a literal the regex seeks fast
    if not found or len(found) != block.count(_SAMPLES):
        return None
    others = _candidate_starts(block, _OTHER_NEEDLES)
    for start in others:
        end = block.find(b"\n", start)
        if block.find(_SAMPLES, start, len(block) if end < 0 else end) >= 0:
            return None
    newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    # each canonical line holds `consumed samples` once and no other line does (counted above): their
    # starts are the line starts before each occurrence, found without a Python step per line
    pieces = np.fromiter(map(len, block.split(_SAMPLES)), dtype=np.int64, count=len(found) + 1)[:-1]
    at = np.cumsum(pieces) + np.arange(len(found), dtype=np.int64) * len(_SAMPLES)
    before = np.searchsorted(newlines, at)
    starts = np.concatenate(([-1], newlines))[before] + 1  # after the newline before, or the block's start
    rows = _bulk_rows(collector, found, starts, before, base, number)
    if rows is None:
        return None
    collector.bulk(rows)
    return others


_BULK_TYPES = (np.int64, np.int64, np.int64, np.float64, np.int64, np.float64)


def _numbers(column: tuple[bytes, ...], dtype) -> np.ndarray | None:
    """The column's numbers, parsed in C (strtoll / the correctly rounded strtod float() uses)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = np.fromstring(b" ".join(column), dtype=dtype, sep=" ")
    return out if len(out) == len(column) else None


def _bulk_rows(collector: _Collector, found: list, starts, before, base: int, number: int):
    """The records of the canonical lines (None when a timestamp is one strptime would refuse)."""
    columns = list(zip(*found, strict=True))
    ts = np.array(columns[0])
    numbers = [_numbers(column, dtype) for column, dtype in zip(columns[1:], _BULK_TYPES, strict=True)]
    if any(column is None for column in numbers):
        return None
    it, total, consumed, elapsed, gbs, loss = numbers
    digits = ts.view(np.uint8).reshape(len(ts), -1)
    year = digits[:, :4].astype(np.int64) - 48
    year = year[:, 0] * 1000 + year[:, 1] * 100 + year[:, 2] * 10 + year[:, 3]
    if (year < 2).any() or (year > 9998).any():  # the UTC shift could leave datetime's range
        return None
    digits = digits.copy()
    digits[:, 10] = ord("T")
    try:
        naive = digits.view(ts.dtype).reshape(-1).astype("datetime64[us]").astype(np.int64)
    except ValueError:  # a date or time out of range: the line-by-line reading says which is none
        return None
    shift = timedelta(seconds=collector.clock.tz_offset_s) // timedelta(microseconds=1)
    out = np.zeros(len(found), dtype=DTYPE)
    out["iteration"] = it
    out["train_iters"] = total
    out["consumed"] = consumed
    out["gbs"] = gbs
    out["loss"] = loss
    out["elapsed"] = elapsed
    out["t"] = naive - shift
    out["line"] = number + before + 1  # newlines before the occurrence = before the line start
    out["offset"] = base + starts
    out["flags"] = HAS_GBS | HAS_LOSS | HAS_ELAPSED | HAS_T
    return out


def _exclusion(tokens: set[bytes]) -> bytes:
    """A regex matching exactly `<token>: ` for the given digit strings, as a trie whose digits with equal
    subtrees share a character class (so 0..1023 stays a short pattern, tested in a few steps per line)."""
    trie: dict = {}
    for token in tokens:
        node = trie
        for digit in token:
            node = node.setdefault(digit, {})
        node[None] = {}

    def emit(node: dict) -> bytes:
        groups: dict[bytes, list[int]] = {}
        for digit, child in node.items():
            if digit is not None:
                groups.setdefault(emit(child), []).append(digit)
        alternatives = [b": "] if None in node else []
        for sub, digits in groups.items():
            head = bytes(digits) if len(digits) == 1 else b"[" + bytes(sorted(digits)) + b"]"
            alternatives.append(head + sub)
        return alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"

    return emit(trie)


class _RankScan:
    """Finds the first line of every rank in the blocks the fast path reads, without splitting them.

    One regex search per block finds the next line whose rank prefix is not yet excluded; the exclusion (a
    negative lookahead over the ranks already seen) is recompiled only once the matches it would have saved
    outweigh a compile, so a world of a thousand ranks costs a few compiles, not one per rank.
    """

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.excluded: set[bytes] = set()
        self.seen: set[bytes] = set()
        self.pattern = re.compile(rb"\n[ \t]*([0-9]+): ")
        self.wasted = 0

    def _compile(self) -> None:
        self.excluded = set(self.seen)
        self.pattern = re.compile(rb"\n[ \t]*+(?!" + _exclusion(self.excluded) + rb")([0-9]+): ")
        self.wasted = 0

    def scan(self, block: bytes, number: int) -> None:
        """`block` starts at a line start, after `number` lines; it holds no carriage return."""
        counted, lines = 0, number  # `lines` lines lie before offset `counted`
        if m := _RANK_BYTES.match(block):
            self._found(m[1], block, 0, number + 1)
        pos = 0
        while m := self.pattern.search(block, pos):
            start = m.start() + 1
            pos = m.end()
            token = m[1]
            if token in self.seen:
                self.wasted += 1
                if self.wasted > 256 + 4 * len(self.seen):
                    self._compile()
                continue
            lines += block.count(b"\n", counted, start)
            counted = start
            self._found(token, block, start, lines + 1)

    def _found(self, token: bytes, block: bytes, start: int, number: int) -> None:
        self.seen.add(token)
        ranks = self.collector.ranks
        rank = int(token)
        if rank not in ranks:
            end = block.find(b"\n", start)
            raw = block[start : len(block) if end < 0 else end].decode("utf-8", "replace")
            ranks[rank] = ref(self.collector.rel, number, raw)


def _rest_of_line(handle) -> bytes:
    """The rest of the current line, cut after MAX_LINE_BYTES (the remainder is skipped, its newline kept)."""
    tail = handle.readline(MAX_LINE_BYTES)
    if len(tail) < MAX_LINE_BYTES or tail.endswith(b"\n"):
        return tail
    while chunk := handle.readline(MAX_LINE_BYTES):
        if chunk.endswith(b"\n"):
            return tail + b"\n"
    return tail


def _after_arguments(block: bytes) -> int | None:
    """Where to end a block holding the argument dump (which is read line by line) so that the iteration
    lines after it are read in bulk: after the line that ends the dump, when much of the block follows."""
    head = block.find(b"------ arguments ------")
    end = block.find(b"end of arguments", head) if head >= 0 else -1
    cut = block.find(b"\n", end) + 1 if end >= 0 else 0
    return cut if 0 < cut < len(block) - (64 << 10) and b"\r" not in block else None


def parse_train_log(path: Path, rel: str, cycle: int, clock: Clock, root: Path | None = None) -> TrainLog:
    """One pass over one cycle's log. Raises OSError if the file cannot be opened, is not a regular file,
    or (with `root`) resolves outside it. Memory is bounded per line (MAX_LINE_BYTES) and per kind of fact.

    Same lines, line numbers and text as reading the file in text mode line by line and handing every
    keyword line (and every line of the argument dump) to the collector, and every other line's rank prefix
    to `rank_line`; a block holding a carriage return is read exactly that way, since universal newlines
    make a lone `\r` end a line.
    """
    collector = _Collector(cycle, rel, clock, path, root)
    ranks = _RankScan(collector)
    number = 0  # lines before the current position
    complete = True
    with open_regular(path, *((root,) if root is not None else ())) as handle:
        while True:
            base = handle.tell()  # where the block starts in the file: iteration lines are read back from it
            block = handle.read(_BLOCK_BYTES)
            if not block:
                break
            if not block.endswith(b"\n"):
                block += _rest_of_line(handle)
            if (cut := _after_arguments(block)) is not None:  # the rest is read again as the next block
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
            ranks.scan(block, number)
            size, pos = len(block), 0
            starts = _bulk_iterations(collector, block, base, number)
            if starts is None:
                starts = _candidate_starts(block)
            if collector.in_args:  # an argument dump continues from the previous block
                starts.insert(0, 0)
            for start in starts:
                if start < pos:
                    continue
                number += block.count(b"\n", pos, start)
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
            number += block.count(b"\n", pos)
            complete = block.endswith(b"\n")
            if not complete and pos < size:
                number += 1  # the last line, without newline, held no keyword
    return collector.freeze(number, complete=complete)
