"""One UTC clock for every timestamp in a run directory.

cycle_info records and NVRx's profiling lines are UTC (`...Z`, `... UTC`); Megatron's bracketed times, the
NVRx logger's `asctime` and torch's glog prefix are naive local time. run.json's `tz_offset_s` (seconds east
of UTC of the clock those naive times use) converts them; without it the clock assumes UTC and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ftqual.launch import run_schema

_NAIVE_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S,%f", "%Y-%m-%d %H:%M:%S")
# The shapes of _NAIVE_FORMATS as their timestamps are usually written (ASCII digits, fixed widths, one
# space): parse_local reads these directly, anything else through strptime.
_PLAIN_LOCAL = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]{1,6}))?"
)
_GLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\b")


@dataclass(frozen=True)
class Clock:
    """Converts naive local timestamps to aware UTC datetimes."""

    tz_offset_s: float = 0.0
    assumed: bool = True

    def local(self, naive: datetime) -> datetime:
        return (naive - timedelta(seconds=self.tz_offset_s)).replace(tzinfo=UTC)

    def parse_local(self, text: str) -> datetime | None:
        """`2026-11-29 14:19:08.761161` or `2026-11-29 14:19:09,847` (local) -> UTC."""
        text = text.strip()
        if m := _PLAIN_LOCAL.fullmatch(text):
            # What strptime would read from the usual shape, without its regex and locale machinery (every
            # one of its fields is in strptime's range; what datetime() refuses goes the strptime way).
            year, month, day, hour, minute, second, frac = m.groups()
            micro = int(frac.ljust(6, "0")) if frac else 0
            try:
                naive = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro)
                return self.local(naive)
            except (ValueError, OverflowError):
                pass
        for fmt in _NAIVE_FORMATS:
            try:
                return self.local(datetime.strptime(text, fmt))
            except (ValueError, OverflowError):  # year 1 shifted before year 1: not a real time
                continue
        return None

    def parse_glog(self, line: str, year: int) -> datetime | None:
        """torch's `E1129 14:19:09.846000 19484 file.py:986] ...` prefix (local, no year) -> UTC."""
        m = _GLOG.match(line)
        if not m:
            return None
        month, day, hour, minute, second, frac = m.groups()
        micro = int((frac or "0").ljust(6, "0"))
        try:
            naive = datetime(year, int(month), int(day), int(hour), int(minute), int(second), micro)
            return self.local(naive)
        except (ValueError, OverflowError):
            return None

    def describe(self) -> str:
        if self.assumed:
            return "run.json has no tz_offset_s: naive log timestamps were taken as UTC"
        return f"naive log timestamps converted with tz_offset_s={self.tz_offset_s:g} from run.json"

    def as_dict(self) -> dict[str, object]:
        return {"tz_offset_s": self.tz_offset_s, "assumed_utc": self.assumed, "note": self.describe()}


# run.json's time format, stated once with the record (the markers and cycle_infos write it too)
parse_utc = run_schema.parse_utc
iso_z = run_schema.iso_z


def seconds(start: datetime | None, end: datetime | None) -> float | None:
    """end - start in seconds, rounded to milliseconds; None if either is unknown."""
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def clock_from_meta(tz_offset_s: object) -> Clock:
    """run_meta has bounded the offset (RunMetaError otherwise); a non-finite one is taken as absent."""
    if (
        isinstance(tz_offset_s, int | float)
        and not isinstance(tz_offset_s, bool)
        and abs(tz_offset_s) <= 48 * 3600
    ):
        return Clock(tz_offset_s=float(tz_offset_s), assumed=False)
    return Clock()
