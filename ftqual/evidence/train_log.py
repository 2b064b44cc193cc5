"""logs/train_cycle<N>.log: Megatron's account of one cycle, each line prefixed `"<rank>: "`.

Facts kept: FT timeouts (`FT: initialized. Timeouts=SectionTimeouts(...)`, `FT: loaded timeouts from`),
checkpoint saves (saving / scheduled / successfully saved), loads (fresh start, loading, successfully loaded,
`Unable to load optimizer`), iteration lines (consumed samples, batch size, loss), a few arguments, timers,
`FT: closed.`, our wrapper's `[ftqual-inject] {...}` line (an older `[inject] {...}` line is ignored),
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
from typing import NamedTuple

import numpy as np

from ftqual.evidence import canonical
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
from ftqual.evidence.safeio import MAX_LINE_BYTES, line_block, open_regular

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
        self.rank_prefixes = np.zeros(0, dtype=np.uint64)  # sorted: see `_new_ranks`

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
        elif "consumed samples" in text and (m := _ITERATION.search(text)):
            self._iteration(m, text, number, raw)
        elif "-checkpoint ." in text and (m := _TIMER.match(text)):
            self.add("timers", Timer(m[1], float(m[3]), at()))  # (min, max): the max is what counts
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
            errors=tuple(get("errors", ())),
            milestones=tuple(get("milestones", ())),
            ranks=MappingProxyType(dict(sorted(self.ranks.items()))),
        )


# Logs are read in blocks of this many bytes (extended to the next newline). Within a block each keyword is
# found with bytes.find (C speed), and only the lines holding one are decoded and parsed: the chatter that
# makes a large log (per-rank warnings, NCCL INFO) is never split into Python strings.
_BLOCK_BYTES = 4 << 20
_NEEDLES = tuple(keyword.encode() for keyword in _KEYWORDS)


# Keywords of at least 7 bytes are sought in a large block by its aligned 4-byte words at once: such a
# keyword at offset p covers the whole word at p + k, k = -p mod 4, which holds its bytes k..k+3. Words are
# screened by a 16-bit multiplicative hash against the keywords' fragments, the few left are compared with
# the fragments exactly, and each is confirmed by comparing the keyword's bytes where it would start
# (numpy over the candidates). Same hits as bytes.find, less time: one pass instead of one per keyword.
_FRAGMENT_MIN = 7  # keyword bytes for a whole aligned word to lie within every occurrence
_FRAGMENT_BLOCK = 1 << 20  # smaller blocks are searched with bytes.find
_FRAGMENT_MUL = np.uint32(0x9E3779B1)


def _fragments(needles: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, bytes]]]:
    """The hash table, the sorted fragments and (fragment, k, keyword) for the keywords of >= 7 bytes."""
    table = np.zeros(1 << 16, dtype=bool)
    entries = []
    for needle in needles:
        if len(needle) >= _FRAGMENT_MIN:
            for k in range(4):
                entries.append((int.from_bytes(needle[k : k + 4], "little"), k, needle))
    values = np.array([value for value, _, _ in entries], dtype=np.uint32)
    table[(values * _FRAGMENT_MUL) >> np.uint32(16)] = True
    return table, np.sort(values), entries


_FRAGMENT_CACHE: dict[tuple[bytes, ...], tuple[np.ndarray, np.ndarray, list[tuple[int, int, bytes]]]] = {}


def _long_keyword_hits(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Every offset where one of the `needles` of >= 7 bytes starts in `block` (unordered)."""
    if (found := _FRAGMENT_CACHE.get(needles)) is None:
        found = _FRAGMENT_CACHE[needles] = _fragments(needles)
    table, values, entries = found
    if not entries:
        return []
    words = np.frombuffer(block, dtype="<u4", count=len(block) // 4)
    candidates = np.flatnonzero(table[(words * _FRAGMENT_MUL) >> np.uint32(16)])
    word = words[candidates]
    exact = values[np.minimum(np.searchsorted(values, word), len(values) - 1)] == word
    candidates, word = candidates[exact], word[exact]
    if not len(candidates):
        return []
    a = np.frombuffer(block, dtype=np.uint8)
    hits: list[int] = []
    for value, k, needle in entries:
        start = candidates[word == value] * 4 - k
        start = start[(start >= 0) & (start + len(needle) <= len(block))]
        if len(start):
            pattern = np.frombuffer(needle, dtype=np.uint8)
            same = (a[start[:, None] + np.arange(len(needle))] == pattern).all(axis=1)
            hits.extend(start[same].tolist())
    return hits


def _keyword_hits(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Where a keyword is in `block`: for each keyword, at least its first offset in each line holding it
    (callers keep the lines)."""
    hits: list[int] = []
    find = block.find
    if len(block) >= _FRAGMENT_BLOCK:
        hits = _long_keyword_hits(block, needles)
        needles = tuple(needle for needle in needles if len(needle) < _FRAGMENT_MIN)
    for needle in needles:
        pos = find(needle)
        while pos >= 0:
            hits.append(pos)
            end = find(b"\n", pos)
            if end < 0:
                break
            pos = find(needle, end + 1)
    return hits


def _candidate_starts(block: bytes, needles: tuple[bytes, ...] = _NEEDLES) -> list[int]:
    """Sorted offsets of the lines in `block` that contain a keyword (the same test as `_interesting`:
    the keywords are ASCII, so a keyword is in the decoded line exactly when its bytes are in the raw one)."""
    rfind = block.rfind
    return sorted({rfind(b"\n", 0, pos) + 1 for pos in _keyword_hits(block, needles)})


# Iteration lines in Megatron's own layout are parsed a block at a time (`canonical.parse`: numpy over the
# bytes, no regex and no Python step per line); the other lines holding `consumed samples` go through the
# collector. The other keywords are sought only outside what the canonical lines are proven to hold.
_SAMPLES = b"consumed samples"
_OTHER_NEEDLES = tuple(n for n in _NEEDLES if n != _SAMPLES)
_ARGUMENTS = b"------ arguments ------"
_MAX_SHIFT = 1 << 60  # microseconds; a forged tz_offset_s beyond it leaves the block to the collector
_BULK_MIN = 8  # iteration lines a block needs to be read in bulk (fewer cost less line by line)


def _gaps(block: bytes, lo: np.ndarray, clean_end: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """What lies outside [lo, clean_end) of the canonical lines: (those bytes joined, where each gap starts in
    the block, where in the joined bytes), or None when these spans make less than a quarter of the block
    (searching it whole then costs less). No keyword lies within the spans (`canonical` proves it: a head
    holds only its layout's words, digits, spaces and marks, one `consumed samples`; a rest read to the
    line's end was searched), and none is cut by leaving them out: a keyword would have to hold the newline
    before a line's start or after its end, or the `|` that ends a head."""
    if int((clean_end - lo).sum()) * 4 < len(block):
        return None
    gap_start = np.concatenate(([0], clean_end))
    gap_size = np.append(lo, len(block)) - gap_start
    keep = np.flatnonzero(gap_size > 0)
    gap_start, gap_size = gap_start[keep], gap_size[keep]
    rest = b"".join([block[s : s + k] for s, k in zip(gap_start.tolist(), gap_size.tolist(), strict=True)])
    return rest, gap_start, np.concatenate(([0], np.cumsum(gap_size)))


def _in_block(found: list[int], gap_start: np.ndarray, at_rest: np.ndarray) -> np.ndarray:
    """Offsets in the joined gaps (`_gaps`) as offsets in the block."""
    where = np.array(found, dtype=np.int64)
    gap = np.searchsorted(at_rest, where, side="right") - 1
    return gap_start[gap] + where - at_rest[gap]


def _line_starts(block: bytes, offsets: np.ndarray) -> list[int]:
    """The sorted starts of the lines holding these offsets."""
    rfind = block.rfind
    return sorted({rfind(b"\n", 0, pos) + 1 for pos in offsets.tolist()})


def _other_starts(block: bytes, lo: np.ndarray, clean_end: np.ndarray) -> list[int]:
    """`_candidate_starts(block, _OTHER_NEEDLES)`, the keywords sought only outside [lo, clean_end) of the
    canonical lines when these make much of the block (`_gaps`)."""
    gaps = _gaps(block, lo, clean_end)
    if gaps is None:
        return _candidate_starts(block, _OTHER_NEEDLES)
    rest, gap_start, at_rest = gaps
    hits = _keyword_hits(rest, _OTHER_NEEDLES)
    return _line_starts(block, _in_block(hits, gap_start, at_rest)) if hits else []


def _every(data: bytes, needle: bytes) -> list[int]:
    """Every offset of `needle` in `data` (occurrences of these needles cannot overlap)."""
    found, pos, find = [], data.find(needle), data.find
    while pos >= 0:
        found.append(pos)
        pos = find(needle, pos + len(needle))
    return found


def _sample_lines(block: bytes, total: int, newlines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each line holding `consumed samples`, whether it holds them once), in line order."""
    pieces = np.fromiter(map(len, block.split(_SAMPLES)), dtype=np.int64, count=total + 1)[:-1]
    at = np.cumsum(pieces) + np.arange(total, dtype=np.int64) * len(_SAMPLES)
    line_of = np.searchsorted(newlines, at)  # newlines before each occurrence: the index of its line
    first = np.flatnonzero(np.concatenate(([True], line_of[1:] != line_of[:-1])))
    return line_of[first], np.diff(np.append(first, total)) == 1


# A block whose last PROBE bytes are mostly iteration lines is taken as iteration-dense without counting
# `consumed samples` over the whole of it: every line is tried, and the words are sought only outside the
# canonical lines (in a dense block: its chatter and the lines not proven). Only speed depends on the guess.
_PROBE = 64 << 10


def _dense_probe(block: bytes, newlines: np.ndarray) -> bool:
    if len(block) < 4 * _PROBE:
        return False
    start = len(block) - _PROBE
    found = block.count(_SAMPLES, start)
    return found > 0 and found * 2 >= len(newlines) - int(np.searchsorted(newlines, start))


def _dense_without_count(
    block: bytes, a: np.ndarray, newlines: np.ndarray, starts: np.ndarray, ends: np.ndarray, shift: int
) -> tuple[canonical.Parsed, np.ndarray, np.ndarray, list[int] | None, int]:
    """Every line of an iteration-dense block parsed: (parsed, which lines hold `consumed samples`, which are
    canonical and hold them once, the other keyword lines' starts or None when not sought, the count of
    `consumed samples`). Where the canonical lines make most of the block, each holds the words once in its
    head, and an occurrence elsewhere lies outside their clean spans: the words and the other keywords are
    sought there only. Else (a wrong guess) they are counted over the whole block."""
    parsed = canonical.parse(a, starts, ends, shift, MAX_LINE_BYTES, _NEEDLES)
    ok = parsed.ok
    gaps = _gaps(block, starts[ok], parsed.clean_end[ok])
    if gaps is not None:
        rest, gap_start, at_rest = gaps
        held = ok.astype(np.int64)
        if extra := _every(rest, _SAMPLES):
            line_of = np.searchsorted(newlines, _in_block(extra, gap_start, at_rest))
            held += np.bincount(line_of, minlength=len(held))
        hits = _keyword_hits(rest, _OTHER_NEEDLES)
        others = _line_starts(block, _in_block(hits, gap_start, at_rest)) if hits else []
        return parsed, held > 0, ok & (held == 1), others, int(held.sum())
    total = block.count(_SAMPLES)
    if int(ok.sum()) == total:  # each canonical line holds the words once, no other line holds them
        return parsed, ok, ok, None, total
    where, once = _sample_lines(block, total, newlines)
    samples = np.zeros(len(ok), dtype=bool)
    samples[where] = True
    single = np.zeros(len(ok), dtype=bool)
    single[where] = once
    return parsed, samples, ok & single, None, total


def _bulk_iterations(
    collector: _Collector,
    block: bytes,
    base: int,
    number: int,
    arguments: bool,
    a: np.ndarray,
    newlines: np.ndarray,
) -> list[int] | None:
    """Record the block's iteration lines (`a`: the block's bytes, `newlines`: where its newlines are);
    return the other candidate lines' starts, or None (nothing recorded) when the block must be read line
    by line: an argument dump in it (`arguments`) or open, or a line with `consumed samples` that also holds
    another keyword (its facts must keep their order).

    Canonical lines become records at once; the other lines with `consumed samples` go through the collector
    in line order between them, so the table stays in line order and each number's first line wins."""
    if collector.in_args or arguments:
        return None
    count = len(newlines) + (not block.endswith(b"\n"))  # lines in the block
    starts = np.concatenate(([0], newlines + 1))[:count]
    ends = np.append(newlines, len(block))[:count]
    shift = canonical.shift_micros(collector.clock.tz_offset_s)
    if shift is not None and abs(shift) > _MAX_SHIFT:
        shift = None
    others: list[int] | None = None
    if shift is not None and _dense_probe(block, newlines):
        lines = np.arange(count)
        parsed, samples, ok, others, total = _dense_without_count(block, a, newlines, starts, ends, shift)
        if total < _BULK_MIN:
            return None if total else _candidate_starts(block, _OTHER_NEEDLES)
    else:
        total = block.count(_SAMPLES)
        if not total:
            return _candidate_starts(block, _OTHER_NEEDLES)
        if total < _BULK_MIN or shift is None:
            return None
        if total * 2 >= count:  # iteration-dense: every line is tried, most are canonical
            lines = np.arange(count)
            parsed = canonical.parse(a, starts, ends, shift, MAX_LINE_BYTES, _NEEDLES)
            ok = parsed.ok
            if int(ok.sum()) == total:  # each canonical line holds the words once, no other line holds them
                samples = ok
            else:
                where, once = _sample_lines(block, total, newlines)
                samples = np.zeros(count, dtype=bool)
                samples[where] = True
                single = np.zeros(count, dtype=bool)
                single[where] = once
                ok = ok & single
        else:
            lines, once = _sample_lines(block, total, newlines)
            parsed = canonical.parse(a, starts[lines], ends[lines], shift, MAX_LINE_BYTES, _NEEDLES)
            ok = parsed.ok & once
            samples = np.ones(len(lines), dtype=bool)
    lo, hi = starts[lines], ends[lines]
    if others is None:
        others = _other_starts(block, lo[ok], parsed.clean_end[ok])
    if others:
        held = lo[samples]
        where = np.minimum(np.searchsorted(held, others), len(held) - 1)
        if (held[where] == np.array(others)).any():
            return None
    rows = np.zeros(int(ok.sum()), dtype=DTYPE)
    for name in ("iteration", "train_iters", "consumed", "gbs", "loss", "elapsed", "t"):
        rows[name] = getattr(parsed, name)[ok]
    rows["line"] = number + lines[ok] + 1
    rows["offset"] = base + lo[ok]
    rows["flags"] = HAS_GBS | HAS_LOSS | HAS_ELAPSED | HAS_T
    done = 0
    before = np.cumsum(ok) - ok  # canonical lines before each line
    for index in np.flatnonzero(samples & ~ok).tolist():  # in line order, between the records around them
        if (upto := int(before[index])) > done:
            collector.bulk(rows[done:upto])
            done = upto
        start, end = int(lo[index]), int(hi[index])
        raw = block[start : min(end + 1, len(block), start + MAX_LINE_BYTES)].decode("utf-8", "replace")
        collector.line(number + int(lines[index]) + 1, raw, base + start)
    if done < len(rows):
        collector.bulk(rows[done:])
    return others


_RANK_WIDTH = 24  # bytes of a line's start where its rank prefix is sought at once
_RANK_TABLE_MAX = 1 << 20  # ranks below this are looked up in a table
_RANK_PREFIX = 8  # a line's first bytes, as one word: lines starting like one whose rank is known are skipped


def _new_ranks(collector: _Collector, block: bytes, a: np.ndarray, newlines: np.ndarray, number: int) -> None:
    """Note the first line of every rank in the block not seen yet: what `_RankScan.scan` finds (the prefix
    `_RANK_BYTES` matches at a line's start), read at every line start at once. A line whose prefix does not
    fit the window, or whose rank has more than 15 digits, is matched by `_RANK_BYTES` itself."""
    starts = np.concatenate(([0], newlines + 1))
    starts = starts[starts < len(block)]
    m = len(starts)
    seen = collector.ranks
    if m < 256:  # a few lines: the regex at each start costs less
        for i, start in enumerate(starts.tolist()):
            if (match := _RANK_BYTES.match(block, start)) and (rank := int(match[1])) not in seen:
                stop = block.find(b"\n", start)
                raw = block[start : len(block) if stop < 0 else stop].decode("utf-8", "replace")
                seen[rank] = ref(collector.rel, number + i + 1, raw)
        return
    # A line whose first 8 bytes are those of a line already read, whose rank prefix ended within them,
    # has that line's rank (the prefix depends on those bytes only): a rank seen, nothing to note.
    whole = starts + _RANK_PREFIX <= len(block)
    prefix = np.zeros(m, dtype=np.uint64)
    prefix[whole] = canonical.windows(a, starts[whole], _RANK_PREFIX).view(np.uint64)[:, 0]
    known_prefixes = collector.rank_prefixes
    if len(known_prefixes):
        at = np.minimum(np.searchsorted(known_prefixes, prefix), len(known_prefixes) - 1)
        index = np.flatnonzero(~(whole & (known_prefixes[at] == prefix)))
        if not len(index):
            return
        starts, prefix, whole = starts[index], prefix[index], whole[index]
    else:
        index = np.arange(m)
    # The same holds within the block: only the first line of each 8-byte prefix is read, and the later
    # ones too where that first line's rank prefix did not end within the 8 bytes (a second pass).
    first = _first_of_each(prefix, whole)
    tokens = _rank_tokens(a, len(block), starts[first])
    undecided = whole[first] & (tokens.end + 2 > _RANK_PREFIX)
    if undecided.any():
        again = np.isin(prefix, prefix[first][undecided]) & whole
        again[first] = True
        first = np.flatnonzero(again)
        tokens = _rank_tokens(a, len(block), starts[first])
    starts, prefix, whole, index = starts[first], prefix[first], whole[first], index[first]
    ranked, odd, end, value = tokens
    table = np.zeros(_RANK_TABLE_MAX, dtype=bool)
    table[[rank for rank in seen if rank < _RANK_TABLE_MAX]] = True
    new = ranked & ((value >= _RANK_TABLE_MAX) | ~table[np.minimum(value, _RANK_TABLE_MAX - 1)])
    lines = np.flatnonzero(new)
    ranks, first_line = np.unique(value[lines], return_index=True)  # each new rank's first line is enough
    found: list[tuple[int, int]] = list(zip(lines[first_line].tolist(), ranks.tolist(), strict=True))
    for i in np.flatnonzero(odd).tolist():
        if match := _RANK_BYTES.match(block, int(starts[i])):
            found.append((i, int(match[1])))
    for i, rank in sorted(found):
        if rank not in seen:
            start = int(starts[i])
            stop = block.find(b"\n", start)
            raw = block[start : len(block) if stop < 0 else stop].decode("utf-8", "replace")
            seen[rank] = ref(collector.rel, number + int(index[i]) + 1, raw)
    fresh = prefix[ranked & whole & (end + 2 <= _RANK_PREFIX)]  # their ranks are all in `seen` now
    if len(fresh):
        merged = np.concatenate((known_prefixes, fresh))
        collector.rank_prefixes = np.unique(merged, return_index=True)[0]


def _first_of_each(prefix: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """Sorted indexes of the lines to read: the first line of each prefix, and every line without one."""
    with_prefix = np.flatnonzero(whole)
    keep = np.ones(len(prefix), dtype=bool)
    keep[with_prefix] = False
    keep[with_prefix[np.unique(prefix[with_prefix], return_index=True)[1]]] = True
    return np.flatnonzero(keep)


class _RankTokens(NamedTuple):
    ranked: np.ndarray  # the line starts with a rank prefix read here
    odd: np.ndarray  # left to `_RANK_BYTES`: the window cannot tell
    end: np.ndarray  # where the digits end, from the line's start
    value: np.ndarray  # the rank, where ranked


def _rank_tokens(a: np.ndarray, size: int, starts: np.ndarray) -> _RankTokens:
    """The rank prefix (`[ \\t]*digits: `) of the lines at `starts` (sorted), read in a window of _RANK_WIDTH
    bytes at each."""
    m = len(starts)
    padded = m > 0 and size - int(starts[-1]) < _RANK_WIDTH
    source = None
    if padded:
        source = np.concatenate((a[-2 * _RANK_WIDTH :], np.zeros(_RANK_WIDTH, dtype=np.uint8)))
    rows = np.empty((m, _RANK_WIDTH), dtype=np.uint8)
    inside = starts + _RANK_WIDTH <= size
    if inside.any():
        rows[inside] = canonical.windows(a, starts[inside], _RANK_WIDTH)
    if source is not None:
        offset = size - min(size, 2 * _RANK_WIDTH)
        rows[~inside] = canonical.windows(source, starts[~inside] - offset, _RANK_WIDTH)
    columns = np.arange(_RANK_WIDTH)
    blank = (rows == ord(" ")) | (rows == ord("\t"))
    lead = np.where(blank.all(axis=1), _RANK_WIDTH, (~blank).argmax(axis=1))
    digit = ((rows - np.uint8(ord("0"))) < 10) | (columns < lead[:, None])
    end = np.where(digit.all(axis=1), _RANK_WIDTH, (~digit).argmax(axis=1))  # after the digits
    width = end - lead
    known = end + 2 <= _RANK_WIDTH
    colon = rows[np.arange(m), np.minimum(end, _RANK_WIDTH - 1)] == ord(":")
    space = rows[np.arange(m), np.minimum(end + 1, _RANK_WIDTH - 1)] == ord(" ")
    ranked = known & (width >= 1) & colon & space
    token_end = starts + end
    odd = ~known | (ranked & ((width > canonical.MAX_DIGITS) | (token_end < 16) | ~inside))  # regex below
    ranked &= ~odd
    value = np.zeros(m, dtype=np.int64)
    if ranked.any():
        value[ranked] = canonical.number_before(a, token_end[ranked], width[ranked])
    return _RankTokens(ranked, odd, end, value)


def _after_arguments(block: bytes, head: int) -> int | None:
    """Where to end a block holding the argument dump at `head` (which is read line by line) so that the
    iteration lines after it are read in bulk: after the line that ends the dump, when much of the block
    follows."""
    end = block.find(b"end of arguments", head) if head >= 0 else -1
    cut = block.find(b"\n", end) + 1 if end >= 0 else 0
    return cut if 0 < cut < len(block) - (64 << 10) and b"\r" not in block else None


def _newlines_in(newlines: np.ndarray, first: int, end: int) -> int:
    """Newlines in block[first:end] (`newlines`: their positions in the block)."""
    return int(np.searchsorted(newlines, end) - np.searchsorted(newlines, first))


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
            block = line_block(handle, _BLOCK_BYTES)
            if not block:
                break
            head = block.find(_ARGUMENTS)
            if (cut := _after_arguments(block, head)) is not None:  # the rest is read again as the next block
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
            _new_ranks(collector, block, a, newlines, number)
            size, pos = len(block), 0
            bulk = _bulk_iterations(collector, block, base, number, head >= 0, a, newlines)
            starts = bulk if bulk is not None else _candidate_starts(block)
            if collector.in_args:  # an argument dump continues from the previous block
                starts.insert(0, 0)

            for start in starts:
                if start < pos:
                    continue
                number += _newlines_in(newlines, pos, start)
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
            number += _newlines_in(newlines, pos, size)
            complete = block.endswith(b"\n")
            if not complete and pos < size:
                number += 1  # the last line, without newline, held no keyword
    return collector.freeze(number, complete=complete)
