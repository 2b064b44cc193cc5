"""`json.dumps(value, indent=2)`'s text, the same bytes, without json's pure-Python indenting encoder.

json's C encoder serves only `indent=None`; with an indent, json encodes in pure Python with a generator per
level: 0.1-0.2 s for a verify report with a 10,000-point timeline, 0.05 s here (`_records` converts a list of
same-keyed dicts, the timeline's points, a column at a time). A value this does not cover (a non-str key, a
type json encodes through `default`, nesting deeper than the recursion limit) is left to json.dumps.
Compared with json.dumps in `tests/unit/verification/evidence/test_fast_paths.py`.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii


def dumps_indent2(value: object) -> str:
    """`json.dumps(value, indent=2)`."""
    try:
        return _indented(value, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(value, indent=2, sort_keys=False)


class _NotPlain(Exception):
    """A value `_indented` leaves to json.dumps (a non-str key, a type json encodes through `default`)."""


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (_INF, -_INF):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


_INF = float("inf")
_SCALARS = {
    str: encode_basestring_ascii,
    int: int.__repr__,
    float: _float,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _value: "null",
}


def _indented(value: object, newline: str) -> str:
    """json.dumps(value, indent=2)'s text for `value` at the depth `newline` indents to (the same bytes).
    Raises _NotPlain for what it does not cover."""
    kind = type(value)
    if kind is dict:
        if not value:
            return "{}"
        inner = newline + "  "
        parts = []
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise _NotPlain
            scalar = _SCALARS.get(type(item))
            text = scalar(item) if scalar is not None else _indented(item, inner)
            parts.append(f"{encode_basestring_ascii(key)}: {text}")
    elif kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = newline + "  "
        if len(value) > 1 and type(value[0]) is dict and (text := _records(value, newline)) is not None:
            return text
        parts = []
        for item in value:  # type: ignore[attr-defined]
            scalar = _SCALARS.get(type(item))
            parts.append(scalar(item) if scalar is not None else _indented(item, inner))
    else:
        scalar = _SCALARS.get(kind)
        if scalar is None:
            raise _NotPlain
        return scalar(value)
    opening, closing = ("{", "}") if kind is dict else ("[", "]")
    return f"{opening}{inner}{(',' + inner).join(parts)}{newline}{closing}"


def _column(values: list[object]) -> list[str] | None:
    kinds = set(map(type, values))
    if not kinds <= _SCALARS.keys():
        return None
    if len(kinds) == 1:
        return list(map(_SCALARS[kinds.pop()], values))
    return [_SCALARS[type(item)](item) for item in values]


def _records(items: list[object] | tuple[object, ...], newline: str) -> str | None:
    """_indented's text for a list of dicts with the same keys and scalar values only (the timeline's
    points), converted a column at a time; None for any other list."""
    keys = tuple(items[0])  # type: ignore[arg-type]
    if not keys or any(type(key) is not str for key in keys):
        return None
    if any(type(item) is not dict or tuple(item) != keys for item in items):  # type: ignore[arg-type]
        return None
    columns = []
    for key in keys:
        column = _column([item[key] for item in items])  # type: ignore[index]
        if column is None:
            return None
        columns.append(column)
    inner, fields = newline + "  ", newline + "    "
    names = [encode_basestring_ascii(key).replace("%", "%%") for key in keys]
    row = "{" + fields + ("," + fields).join(f"{name}: %s" for name in names) + inner + "}"
    rows = (row % values for values in zip(*columns, strict=True))
    return "[" + inner + ("," + inner).join(rows) + newline + "]"
