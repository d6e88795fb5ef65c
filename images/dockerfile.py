"""Read the metadata a Dockerfile declares (FROM, ARG, ENV, LABEL) without building it.

Only what the catalog needs is interpreted: line continuations, comments, quoting, and variable
substitution (``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR:+alternative}``) with Docker's scoping:
ARGs declared before the first FROM are visible to FROM lines, and inside a stage only after they are
re-declared; ENV wins over ARG of the same name. Labels and environment are inherited from an earlier
stage named in FROM, as Docker does. Labels inherited from an external parent image are not visible
here: :mod:`images.catalog` resolves those between our own Dockerfiles. Heredocs are refused rather than
misread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


class DockerfileError(ValueError):
    """A Dockerfile the parser cannot read; the message is one line naming the file."""


@dataclass(frozen=True)
class ParsedDockerfile:
    """The final stage of a Dockerfile as the catalog sees it."""

    base_image: str
    labels: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    exposed_ports: tuple[str, ...] = ()


@dataclass
class _Stage:
    base_image: str
    labels: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)

    def scope(self) -> dict[str, str]:
        return {**self.args, **self.env}


_VARIABLE = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:[-+])?(?P<word>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines and drop comments; returns (first line number, instruction text)."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        # Docker drops comment lines and blank lines even in the middle of a continuation.
        if not stripped or stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        result.append((start, " ".join(part for part in pending if part)))
        pending = []
    if pending:
        result.append((start, " ".join(part for part in pending if part)))
    return result


def _substitute(text: str, scope: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("bare")
        value = scope.get(name, "")
        op = match.group("op")
        if op == ":-":
            return value or match.group("word")
        if op == ":+":
            return match.group("word") if value else ""
        if match.group("braced") and match.group("word"):
            raise DockerfileError(f"unsupported substitution {match.group(0)!r}")
        return value

    return _VARIABLE.sub(replace, text)


def words(text: str, scope: Mapping[str, str]) -> list[str]:
    """Split on unquoted whitespace, remove quotes, substitute variables (not inside single quotes)."""
    result: list[str] = []
    current: list[str] = []
    has_word = False
    quote = ""
    chunk: list[str] = []  # characters awaiting substitution

    def flush_chunk() -> None:
        if chunk:
            current.append(_substitute("".join(chunk), scope))
            chunk.clear()

    index = 0
    while index < len(text):
        char = text[index]
        if quote == "'":
            if char == "'":
                quote = ""
            else:
                current.append(char)
        elif char == "\\" and index + 1 < len(text):
            # An escaped character is literal, including a "$" that must not be substituted.
            flush_chunk()
            index += 1
            current.append(text[index])
            has_word = True
        elif quote == '"':
            if char == '"':
                flush_chunk()
                quote = ""
            else:
                chunk.append(char)
        elif char in "\"'":
            flush_chunk()
            quote = char
            has_word = True
        elif char.isspace():
            flush_chunk()
            if has_word or current:
                result.append("".join(current))
            current, has_word = [], False
        else:
            chunk.append(char)
            has_word = True
        index += 1
    if quote:
        raise DockerfileError(f"unterminated {quote} quote in {text!r}")
    flush_chunk()
    if has_word or current:
        result.append("".join(current))
    return result


def _pairs(instruction: str, rest: str, scope: Mapping[str, str]) -> list[tuple[str, str]]:
    tokens = words(rest, scope)
    if instruction == "ENV" and tokens and "=" not in tokens[0]:
        # Legacy form: ENV NAME value with spaces
        return [(tokens[0], " ".join(tokens[1:]))]
    pairs = []
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise DockerfileError(f"{instruction} expects key=value, got {token!r}")
        pairs.append((key, value))
    return pairs


def parse_dockerfile(text: str, *, build_args: Mapping[str, str] | None = None) -> ParsedDockerfile:
    """Parse ``text``; ``build_args`` override ARG defaults as ``docker build --build-arg`` would.

    Raises :class:`DockerfileError` for a file without FROM, a heredoc, bad quoting or a malformed
    ARG/ENV/LABEL. The result describes the final stage.
    """
    overrides = dict(build_args or {})
    global_args: dict[str, str] = {}
    stages: dict[str, _Stage] = {}
    stage: _Stage | None = None
    for number, line in logical_lines(text):
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        rest = rest.strip()
        try:
            if "<<" in rest and instruction in {"RUN", "COPY", "ADD"}:
                raise DockerfileError("heredocs are not supported by the catalog parser")
            if instruction == "ARG":
                target = global_args if stage is None else stage.args
                scope = global_args if stage is None else stage.scope()
                for token in words(rest, scope):
                    name, sep, default = token.partition("=")
                    if name in overrides:
                        target[name] = overrides[name]
                    elif sep:
                        target[name] = default
                    elif stage is not None and name in global_args:
                        target[name] = global_args[name]
                    else:
                        target[name] = ""
            elif instruction == "FROM":
                tokens = [t for t in words(rest, global_args) if not t.startswith("--")]
                if not tokens:
                    raise DockerfileError("FROM without an image")
                image = tokens[0]
                parent = stages.get(image.lower())
                stage = (
                    _Stage(parent.base_image, dict(parent.labels), {}, dict(parent.env), list(parent.exposed))
                    if parent
                    else _Stage(image)
                )
                if len(tokens) >= 3 and tokens[1].lower() == "as":
                    stages[tokens[2].lower()] = stage
            elif instruction in {"LABEL", "ENV", "EXPOSE"}:
                if stage is None:
                    raise DockerfileError(f"{instruction} before the first FROM")
                if instruction == "EXPOSE":
                    stage.exposed.extend(words(rest, stage.scope()))
                else:
                    target = stage.labels if instruction == "LABEL" else stage.env
                    for key, value in _pairs(instruction, rest, stage.scope()):
                        target[key] = value
        except DockerfileError as exc:
            raise DockerfileError(f"line {number}: {exc}") from None
    if stage is None:
        raise DockerfileError("no FROM instruction")
    return ParsedDockerfile(
        base_image=stage.base_image,
        labels=dict(stage.labels),
        args=dict(stage.args),
        env=dict(stage.env),
        exposed_ports=tuple(stage.exposed),
    )
