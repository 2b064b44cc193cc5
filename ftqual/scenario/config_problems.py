"""Every mistake of a config against its schema at once, one line each, with "did you mean".

Every mistake of a config against its schema, one line each: the key's path, what is wrong, and "did you
mean ..." where a key or a value is close to a known one.

Why not jsonschema's own message: it stops at the first error and, through Snakemake, prints the whole schema
and config after it (1,377 lines for one typo). Here every error of the config is read at once
(`iter_errors`), and each becomes `invalid config at <path>: <what>`; a value is shown shortened.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
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


def _alternative_errors(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """An anyOf/oneOf's errors worth saying. A value that is not null is no mistake of the `null`
    alternative (`scale: {gpus: many}` is no "not of type 'null'"): where one alternative is left, every
    error of it; else the one that says most."""
    branches: dict[int, list[jsonschema.ValidationError]] = {}
    for sub in error.context or ():
        branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    alternatives = error.validator_value if isinstance(error.validator_value, list) else []
    if error.instance is not None:
        branches = {
            i: errs
            for i, errs in branches.items()
            if not (i < len(alternatives) and alternatives[i].get("type") == "null")
        }
    if len(branches) == 1:
        return next(iter(branches.values()))
    return [_deepest(error)]


TYPE_WORDS = {"integer": "a whole number", "number": "a number", "object": "a mapping", "array": "a list",
              "string": "text", "boolean": "true or false"}  # fmt: skip


def _type_words(error: jsonschema.ValidationError) -> str | None:
    """`'many' is not a whole number of GPUs`: the schema's type in words, its `title` as the unit."""
    wanted = error.validator_value
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    if not names or any(n not in TYPE_WORDS for n in names) or "null" in names:
        return None
    unit = error.schema.get("title")
    said = " or ".join(TYPE_WORDS[n] for n in names) + (f" of {unit}" if unit else "")
    return f"{shown(error.instance)} is not {said}"


def _example(error: jsonschema.ValidationError) -> str | None:
    """The `examples` of the nearest setting above the mistake that has one, written as YAML."""
    import yaml

    node: jsonschema.ValidationError | None = error
    while node is not None:
        examples = node.schema.get("examples") if isinstance(node.schema, Mapping) else None
        if examples and node.absolute_path:
            value = yaml.safe_dump(examples[0], default_flow_style=True, sort_keys=False).strip()
            return f"write {node.absolute_path[-1]}: {value}"
        node = node.parent
    return None


def _line(error: jsonschema.ValidationError) -> list[str]:
    if error.validator in ("anyOf", "oneOf"):
        return [line for sub in _alternative_errors(error) for line in _line(sub)]
    if error.validator == "additionalProperties":
        return _unknown_keys(error)
    if error.validator == "enum":
        return [_bad_choice(error)]
    message = error.message
    if error.validator in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "const"):
        # jsonschema quotes the whole instance; a mapping or a long string is shortened
        message = message.replace(repr(error.instance), shown(error.instance), 1)
    if error.validator == "type":
        message = _type_words(error) or message
    example = _example(error)
    message += f"; {example}" if example else ""
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


COMMAND_LINE = "--config"  # the origin of a value given on the command line


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where values came from: a config file (its mapping) or the command line's `--config`."""

    name: str
    data: Any


def origins(files: Sequence[str], read: Any, given: Mapping[str, Any] | None = None) -> list[Origin]:
    """The origins of a merged config, the one that wins last: the config files in the order Snakemake
    merges them (`read(path)` returns a file's mapping), then `--config`'s values."""
    found = []
    for name in files:
        try:
            found.append(Origin(name, read(name)))
        except Exception:  # an unreadable file is Snakemake's to report; its lines go unprefixed
            continue
    if given:
        found.append(Origin(COMMAND_LINE, given))
    return found


def located(
    problems: Sequence[str], files: Sequence[str], read: Any, given: Mapping[str, Any] | None = None
) -> list[str]:
    """Each problem prefixed with where the value at its path came from: the last config file given that
    sets it (Snakemake merges `--configfile`s in order), or `--config` (`given`: its values), which wins
    over every file. A problem about several settings (`invalid config at a, b: ...`) is prefixed with the
    origin given last among theirs, the others named after it."""
    return [_located(problem, origins(files, read, given)) for problem in problems]


def _located(problem: str, found: Sequence[Origin]) -> str:
    paths = _paths_in(problem)
    owners = {path: _owner(found, path) for path in paths}
    owned = [i for i in owners.values() if i is not None]
    if not owned:
        return problem
    chosen = max(owned)
    mine = [p for p, i in owners.items() if i == chosen]
    others = [f"{p} from {found[i].name}" for p, i in owners.items() if i is not None and i != chosen]
    rest = problem.split(":", 1)[1]
    said = f"{found[chosen].name}: invalid config at {', '.join(mine)}:{rest}"
    return said + (f" ({'; '.join(others)})" if others else "")


def _owner(found: Sequence[Origin], path: str) -> int | None:
    parts = path.split(".")
    return next((i for i in reversed(range(len(found))) if _holds(found[i].data, parts)), None)


def _paths_in(problem: str) -> list[str]:
    prefix = "invalid config at "
    if not problem.startswith(prefix):
        return []
    where = problem[len(prefix) :].split(":", 1)[0]
    return [p for p in where.split(", ") if p and p != "(top level)"]


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


# ---------------------------------------------------------------------------------------------
# a problem of several settings across the scenarios


class _Named(dict):
    """A vocabulary's names that remember which settings a rule named (ftqual.scenario.constraints)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        super().__init__(names)
        self.used: dict[str, None] = {}

    def __getitem__(self, key: str) -> str:
        self.used[key] = None
        return super().__getitem__(key)


def recording(vocabulary: Any) -> Any:
    """A copy of a constraints.Vocabulary whose rules' problems can say the settings they name."""
    return dataclasses.replace(vocabulary, names=_Named(vocabulary.names))


def named_in(vocabulary: Any, message: str) -> tuple[str, ...]:
    """The settings a recording vocabulary's rules named that `message` names."""
    words = set(re.findall(r"[A-Za-z_]+", message))
    names = vocabulary.names
    return tuple(k for k in getattr(names, "used", ()) if dict.get(names, k) in words)


@dataclasses.dataclass(frozen=True)
class Found:
    """A scenario's problem and the settings it names."""

    scenario: str
    message: str
    keys: tuple[str, ...] = ()


def said_once(
    found: Sequence[Found], own: Mapping[str, Collection[str]], scripted: Mapping[str, str]
) -> list[str]:
    """A line per problem at the paths of the settings it names: `scenarios.<name>.<key>` where the scenario
    sets the key itself, else the top-level key, so a problem that the same top-level values make in
    every scenario is said once. A setting the team's launch script decided (`scripted`: key -> its
    file:line and flag) is named by that line instead. A problem naming no setting stays the scenario's."""
    groups: dict[tuple[str, tuple[str, ...], str | None], None] = {}
    for f in found:
        mine = own.get(f.scenario, ())
        paths = tuple(f"scenarios.{f.scenario}.{k}" if k in mine else k for k in f.keys)
        script = next((scripted[k] for k in f.keys if k not in mine and k in scripted), None)
        groups[(f.message, paths or (f"scenarios.{f.scenario}",), script)] = None
    return [
        f"invalid config: {script}: {message}" if script else f"invalid config at {', '.join(at)}: {message}"
        for message, at, script in groups
    ]


# ---------------------------------------------------------------------------------------------
# what Snakemake reads before us: YAML files, --config values


def yaml_problem(path: str | Path) -> str | None:
    """A YAML syntax error of a config file as `file:line:column: ...` (Snakemake says only "not valid JSON
    or YAML"); None when the file parses or cannot be read (Snakemake reports that)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        return (
            f"{where}: not valid YAML: {what}; indent with spaces (no tabs), put ': ' after each key and "
            "close every bracket and quote"
        )
    return None


def typed_given(given: Mapping[str, Any], entries: Iterable[str]) -> dict[str, Any]:
    """`--config` values as YAML reads them. Snakemake reads a mapping or list given with `--config` with
    YAML's BaseLoader, whose every value is text (`scale={gpus: 4096, days: 30}` arrives as
    `{'gpus': '4096', 'days': '30'}`); `entries` are the command line's `key=value` words, each read again
    as YAML, as a config file would be. A value that does not read (or reads otherwise) stays Snakemake's."""
    import yaml

    typed = dict(given)
    for entry in entries:
        key, sep, text = str(entry).partition("=")
        if not sep or not isinstance(given.get(key), (Mapping, list)):
            continue
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        same = isinstance(value, Mapping) == isinstance(given[key], Mapping)
        if same and isinstance(value, (Mapping, list)):
            typed[key] = value
    return typed


def overlay(config: dict[str, Any], given: Mapping[str, Any]) -> None:
    """`given` merged into `config` in place as Snakemake merges `--config` (mappings key by key)."""
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(config.get(key), dict):
            overlay(config[key], value)
        else:
            config[key] = value
