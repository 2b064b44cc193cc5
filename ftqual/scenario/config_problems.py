"""Every mistake of a config against its schema at once, one line each, with "did you mean".

Every mistake of a config against its schema, one line each: the key's path, what is wrong, and "did you
mean ..." where a key or a value is close to a known one.

Why not jsonschema's own message: it stops at the first error and, through Snakemake, prints the whole schema
and config after it (1,377 lines for one typo). Here every error of the config is read at once
(`iter_errors`), and each becomes `invalid config at <path>: <what>`; a value is shown shortened.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema

SHOWN_CHARS = 60  # a value quoted in a line, at most
LISTED_CHOICES = 16  # an enum of up to this many values is listed in full


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def path_of(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def closest(word: str, known: Iterable[Any]) -> str | None:
    """The known words nearest `word` ("a or b"), when one is near enough to be a typo of it: a known word
    that `word` contains or is part of (`sigkill`: kill), else difflib's nearest two."""
    names = [str(k) for k in known]
    word = str(word)
    inside = [n for n in names if len(n) >= 3 and (n in word or word in n)]
    found = inside[:1] or difflib.get_close_matches(word, names, n=2, cutoff=0.6)
    return " or ".join(found) if found else None


def _known_keys(schema: Mapping[str, Any]) -> list[str]:
    return list(schema.get("properties", {}))


def _unknown_keys(error: jsonschema.ValidationError) -> list[str]:
    lines = []
    instance, schema = error.instance, error.schema
    if not isinstance(instance, Mapping):
        return [f"invalid config at {path_of(error.absolute_path)}: {error.message}"]
    known = _known_keys(schema)
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        if key in known or any(re.search(p, key) for p in patterns):
            continue
        near = closest(key, known)
        hint = f"; did you mean {near}?" if near else f" (known here: {', '.join(known)})"
        lines.append(f"invalid config at {path_of([*error.absolute_path, key])}: unknown setting{hint}")
    return lines


def _bad_choice(error: jsonschema.ValidationError) -> str:
    choices = list(error.validator_value)
    where = path_of(error.absolute_path)
    near = closest(error.instance, choices) if isinstance(error.instance, str) else None
    if near is not None:
        return f"invalid config at {where}: {shown(error.instance)} is not a choice; did you mean {near}?"
    listed = (
        ", ".join(str(c) for c in choices) if len(choices) <= LISTED_CHOICES else f"{len(choices)} values"
    )
    return f"invalid config at {where}: {shown(error.instance)} is not one of {listed}"


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """Of an anyOf/oneOf, the alternative's error that says most (jsonschema's best_match)."""
    if error.context:
        return _deepest(jsonschema.exceptions.best_match(error.context))
    return error


def _line(error: jsonschema.ValidationError) -> list[str]:
    error = _deepest(error) if error.validator in ("anyOf", "oneOf") else error
    if error.validator == "additionalProperties":
        return _unknown_keys(error)
    if error.validator == "enum":
        return [_bad_choice(error)]
    message = error.message
    if error.validator in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const"):
        # jsonschema quotes the whole instance; a mapping or a long string is shortened
        message = message.replace(repr(error.instance), shown(error.instance), 1)
    return [f"invalid config at {path_of(error.absolute_path)}: {message}"]


def schema_problems(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """One line per mistake of `config` against `schema`, in the config's order, none twice."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    lines: list[str] = []
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        for line in _line(error):
            if line not in lines:
                lines.append(line)
    return lines


def located(problems: Sequence[str], files: Sequence[str], read: Any) -> list[str]:
    """Each problem prefixed with the config file that sets its path, the last one given that sets it
    (Snakemake merges `--configfile`s in order): `read(path)` returns a file's mapping."""
    contents = []
    for name in files:
        try:
            contents.append((name, read(name)))
        except Exception:  # an unreadable file is Snakemake's to report; its lines go unprefixed
            continue
    out = []
    for problem in problems:
        where = _path_in(problem)
        owner = next((name for name, data in reversed(contents) if _holds(data, where)), None)
        out.append(f"{owner}: {problem}" if owner else problem)
    return out


def _path_in(problem: str) -> list[str]:
    prefix = "invalid config at "
    if not problem.startswith(prefix):
        return []
    path = problem[len(prefix) :].split(":", 1)[0]
    return [] if path == "(top level)" else path.split(".")


def _holds(data: Any, parts: Sequence[str]) -> bool:
    if not parts:
        return False
    for part in parts:
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return False
    return True
