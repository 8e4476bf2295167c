"""A small Dockerfile reader for the deployment tests: instructions with their line, arguments
joined across continuations, grouped into stages (enough for this project's Dockerfile)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
DOCKERFILE = CHECKOUT / "Dockerfile"


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str  # upper case
    args: str  # continuation lines joined, comments inside them dropped

    def exec_form(self) -> list[str] | None:
        """The JSON-array (exec) form of the arguments, or None for the shell form."""
        text = self.args
        if self.keyword == "HEALTHCHECK":  # HEALTHCHECK [--option=...] CMD [...]
            text = text.partition("CMD ")[2]
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass(frozen=True)
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    def resolve(self, text: str) -> str:
        """``text`` with the global ARGs' defaults substituted (``${X}`` and ``$X``)."""
        for name, value in self.global_args.items():
            text = text.replace("${" + name + "}", value)
            text = re.sub(rf"\${name}\b", value, text)
        return text


def parse(path: Path = DOCKERFILE) -> Dockerfile:
    """Read ``path``: the ARGs before the first FROM, then each stage's instructions."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue  # a comment line, also inside a continuation (as Docker reads it)
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        keyword, _, args = " ".join(p for p in pending if p).partition(" ")
        instructions.append(Instruction(start, keyword.upper(), args.strip()))
        pending = []
    assert not pending, f"{path}: the file ends inside a continuation"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            words = shlex.split(instruction.args)
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif not stages:
            assert instruction.keyword == "ARG", f"line {instruction.line}: before any FROM"
            key, _, value = instruction.args.partition("=")
            global_args[key.strip()] = value.strip()
        else:
            stages[-1].instructions.append(instruction)
    return Dockerfile(global_args, stages)


def gpuprov_help(argv: list[str]) -> None:
    """``gpuprov ARGV --help`` succeeds: the (sub)command and every option given to it exist."""
    from typer.testing import CliRunner

    from gpuprov.cli import app

    result = CliRunner().invoke(app, [*argv, "--help"])
    assert result.exit_code == 0, (argv, result.output)
    assert "Usage:" in result.output, (argv, result.output)
