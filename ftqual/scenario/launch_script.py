"""A team's launch script read as they write it, never run: every token with its file:line.

A team's launch arguments as they write them: a file of flags, or a launch script written like Megatron's
own examples (`GPT_MODEL_ARGS=( ... )` arrays, `NAME=value` variables, `torchrun ... pretrain_gpt.py
${GPT_MODEL_ARGS[@]} ...`), read without running it. Each token keeps the `file:line` it came from, so that
every problem names its line.

What is read:
- `\\` continuations, `#` comments, quotes (shell rules, via shlex);
- `NAME=value` and `export NAME=value` (the script's variables, expanded where they are assigned, as bash
  does), `NAME=( ... )` arrays over one line or many;
- the command line that runs a `*.py` script: its arguments are the job's, what comes before the script is the
  launcher (ftqual launches with ft_launcher instead; it is listed, not run). Without such a line, the lines
  that start with a flag are the arguments; without those, every array in order, less the launcher's
  (torchrun's flags only);
- `$NAME`, `${NAME}`, `${NAME[@]}`, `${NAME[*]}` from the script's variables, then the environment.

A value that cannot be known without running the script (`$1`, `$(...)`, `$((...))`, an unset variable)
stays as written, marked unresolved: it is a problem only where it would reach the job (a flag ftqual
replaces drops it). Any other statement (`set -e`, `mkdir`, `if`) is skipped and listed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Token:
    text: str
    where: str  # "file:line", or "megatron_args[i]"
    unresolved: str | None = None  # why its value cannot be known without running the script


@dataclass(frozen=True)
class ScriptArgs:
    tokens: tuple[Token, ...]
    launcher: tuple[Token, ...] = ()  # what ran the script (torchrun and its flags), replaced by ft_launcher
    skipped: tuple[str, ...] = ()  # "file:line: statement" not read as arguments
    problems: tuple[str, ...] = field(default=())


# torchrun's own flags: an array of nothing else is the launcher's (Megatron's DISTRIBUTED_ARGS).
TORCHRUN_FLAGS = {
    "--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--rdzv-backend",
    "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf", "--standalone", "--max-restarts", "--monitor-interval",
    "--start-method", "--role", "--tee", "--redirects", "--log-dir", "--local-addr", "--no-python",
    "--run-path", "--module", "--logs-specs", "--local-ranks-filter",
}  # fmt: skip
DECLARERS = {"export", "declare", "local", "readonly", "typeset"}
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
ASSIGN_RE = re.compile(rf"({NAME})=(.*)", re.S)
ARRAY_START_RE = re.compile(rf"({NAME})=\((.*)", re.S)
REF_RE = re.compile(rf"\$(?:\{{(?P<array>{NAME})\[[@*]\]\}}|\{{(?P<braced>{NAME})\}}|(?P<plain>{NAME}))")
WHOLE_REF_RE = re.compile(rf"\$(?:\{{({NAME})(\[[@*]\])?\}}|({NAME}))")


def _flag_name(text: str) -> str:
    return text.split("=", 1)[0].replace("_", "-")


def _statements(text: str, name: str) -> list[list[tuple[int, str]]]:
    """Logical lines: physical lines joined at a trailing `\\`, blank and comment-only lines dropped; each
    piece keeps its line number."""
    out: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        continued = stripped.endswith("\\") and not stripped.endswith("\\\\")
        current.append((number, stripped[:-1] if continued else stripped))
        if not continued:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def _split(pieces: list[tuple[int, str]], name: str) -> tuple[list[Token], str | None]:
    """The tokens of one statement; each piece on its own where it splits alone (so each token names its
    own line), else the statement as a whole (a quote over several lines), named by its first line."""
    tokens: list[Token] = []
    try:
        for number, piece in pieces:
            tokens += [Token(t, f"{name}:{number}") for t in shlex.split(piece, comments=True)]
        return tokens, None
    except ValueError:
        pass
    try:
        whole = " ".join(p for _, p in pieces)
        return [Token(t, f"{name}:{pieces[0][0]}") for t in shlex.split(whole, comments=True)], None
    except ValueError as exc:
        return [], f"{name}:{pieces[0][0]}: cannot split into arguments ({exc}); check the quotes"


@dataclass
class _Reader:
    name: str
    env: Mapping[str, str]
    scalars: dict[str, Token] = field(default_factory=dict)
    arrays: dict[str, list[Token]] = field(default_factory=dict)
    array_order: list[str] = field(default_factory=list)

    def expand(self, token: Token) -> list[Token]:
        """`token` with the script's variables and the environment in: an array reference splices the
        array's tokens in; a whole-token `$VAR` whose value has spaces splits as the shell does."""
        whole = WHOLE_REF_RE.fullmatch(token.text)
        if whole and whole.group(2) and whole.group(1) in self.arrays:
            return list(self.arrays[whole.group(1)])
        if whole:
            var = whole.group(1) or whole.group(3)
            if var in self.scalars:
                value = self.scalars[var]
                if value.unresolved is None and len(value.text.split()) > 1:
                    return [Token(part, token.where) for part in value.text.split()]
        return [self._substitute(token)]

    def _substitute(self, token: Token) -> Token:
        if token.unresolved is not None:
            return token
        text = token.text
        if "$(" in text:
            kind = "an arithmetic expansion" if "$((" in text else "a command substitution"
            return Token(text, token.where, f"{kind} cannot be read without running the script")
        if re.search(r"\$[0-9#@*?!$-]", text):
            return Token(text, token.where, "the script's own arguments ($1, ...) are not known here")
        unresolved: list[str] = []

        def one(match: re.Match) -> str:
            var = match["array"] or match["braced"] or match["plain"]
            if match["array"]:
                if var in self.arrays:
                    return " ".join(t.text for t in self.arrays[var])
            elif var in self.scalars:
                value = self.scalars[var]
                if value.unresolved is not None:
                    unresolved.append(f"${var} (set at {value.where}): {value.unresolved}")
                    return match.group(0)
                return value.text
            elif var in self.env:
                return self.env[var]
            unresolved.append(f"${var} is not set in the script or the environment")
            return match.group(0)

        out = REF_RE.sub(one, text)
        if "${" in out and not unresolved:
            unresolved.append("only $VAR, ${VAR} and ${ARRAY[@]} are expanded")
        return Token(out, token.where, "; ".join(unresolved) or None)

    def expand_all(self, tokens: list[Token]) -> list[Token]:
        return [t for token in tokens for t in self.expand(token)]


def _is_launcher_array(tokens: list[Token]) -> bool:
    flags = [_flag_name(t.text) for t in tokens if t.text.startswith("-")]
    return bool(flags) and all(f in TORCHRUN_FLAGS for f in flags)


def read_script(text: str, env: Mapping[str, str], name: str) -> ScriptArgs:
    """The arguments `text` gives pretrain_gpt.py, each with its file:line (`name`); never raises."""
    reader = _Reader(name, env)
    problems: list[str] = []
    skipped: list[str] = []
    flag_lines: list[Token] = []
    commands: list[tuple[list[Token], list[Token]]] = []
    open_array: tuple[str, list[Token]] | None = None
    for pieces in _statements(text, name):
        tokens, problem = _split(pieces, name)
        if problem:
            problems.append(problem)
            continue
        if open_array is not None:
            array_name, body = open_array
            closing = next((i for i, t in enumerate(tokens) if t.text == ")" or t.text.endswith(")")), None)
            if closing is None:
                body += tokens
                continue
            last = tokens[closing]
            if last.text != ")":
                tokens[closing] = Token(last.text[:-1], last.where)
                body += tokens[: closing + 1]
            else:
                body += tokens[:closing]
            reader.arrays[array_name] = reader.expand_all(body)
            reader.array_order.append(array_name)
            open_array = None
            continue
        if not tokens:
            continue
        if tokens[0].text in DECLARERS:
            tokens = [t for t in tokens[1:] if not t.text.startswith("-")]  # export -x, declare -a
            if not tokens:
                continue
        start = ARRAY_START_RE.fullmatch(tokens[0].text)
        if start:
            first = [Token(start.group(2), tokens[0].where)] if start.group(2) else []
            rest = first + tokens[1:]
            if rest and (rest[-1].text == ")" or rest[-1].text.endswith(")")):
                last = rest[-1]
                rest = rest[:-1] + ([Token(last.text[:-1], last.where)] if last.text != ")" else [])
                reader.arrays[start.group(1)] = reader.expand_all(rest)
                reader.array_order.append(start.group(1))
            else:
                open_array = (start.group(1), rest)
            continue
        if all(ASSIGN_RE.fullmatch(t.text) for t in tokens):
            for t in tokens:
                var, value = ASSIGN_RE.fullmatch(t.text).groups()
                reader.scalars[var] = reader._substitute(Token(value, t.where))
            continue
        script = next((i for i, t in enumerate(tokens) if t.text.endswith(".py")), None)
        if script is not None:
            commands.append((tokens[:script], tokens[script + 1 :]))
        elif tokens[0].text.startswith("-"):
            flag_lines += tokens
        else:
            skipped.append(f"{tokens[0].where}: {' '.join(t.text for t in tokens)[:80]}")
    if open_array is not None:
        problems.append(f"{open_array[1][0].where if open_array[1] else name}: the array {open_array[0]}=( "
                        "is never closed; add its )")  # fmt: skip
    if len(commands) > 1:
        lines = ", ".join(c[1][0].where if c[1] else c[0][0].where for c in commands if c[0] or c[1])
        problems.append(f"{name}: more than one command runs a script ({lines}); keep the training one")
    if commands:
        before, after = commands[0]
        launcher = tuple(reader.expand_all(before))
        tokens = reader.expand_all(after)
    elif flag_lines:
        launcher, tokens = (), reader.expand_all(flag_lines)
    else:
        launcher = ()
        tokens = []
        for array in reader.array_order:
            body = reader.arrays[array]
            if _is_launcher_array(body):
                launcher += tuple(body)
            else:
                tokens += body
    if not tokens and not problems:
        problems.append(f"{name}: holds no arguments for pretrain_gpt.py (no flag, array or command line)")
    return ScriptArgs(tuple(tokens), launcher, tuple(skipped), tuple(problems))


def from_list(
    args: list[str], where: str = "megatron_args", lines: tuple[str, ...] | None = ()
) -> ScriptArgs:
    """The config's `megatron_args` list: each token named by its index, or by `lines` (the file:line each
    was read from) where they are given for every token."""
    lines = lines or ()
    named = lines if len(lines) == len(args) else [f"{where}[{i}]" for i in range(len(args))]
    return ScriptArgs(tuple(Token(str(a), w) for a, w in zip(args, named, strict=True)))
