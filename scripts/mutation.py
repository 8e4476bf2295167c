"""Mutation testing of the security modules with cosmic-ray (`make mutation`, docs/mutation.md).

For each module of mutation/modules.toml: copy the working tree aside (the mutants are written
into files, so the checkout is never touched), `cosmic-ray init`, mark the mutants outside the
listed definitions and the known equivalent ones (mutation/equivalent.toml) as skipped,
`cosmic-ray exec` with the module's narrow test command, and print killed / survived counts and
each survivor. Figures go to .mutation/NAME.json; the summary to stdout. Not a CI gate.

    python scripts/mutation.py [NAME ...]          # default: every module, smallest first
    python scripts/mutation.py --again NAME ...    # only the last run's survivors
    python scripts/mutation.py --report            # the last figures as a Markdown table
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutation"


@dataclass
class Module:
    name: str
    path: str
    tests: list[str]
    functions: list[str] = field(default_factory=list)
    line_regex: str | None = None
    timeout: float = 60.0


@dataclass(frozen=True)
class Equivalent:
    module: str
    operator: str
    code: str  # the mutated line, stripped
    reason: str
    #: which of this operator's mutants on that line (0 = first), when only some are equivalent
    index: int | None = None


def _line_index(item_mutation: Any, seen: dict[tuple[str, int], int]) -> int:
    """The mutant's rank among the same operator's mutants on its line (work items come in
    source order), a key that survives edits elsewhere in the module."""
    key = (item_mutation.operator_name, item_mutation.start_pos[0])
    seen[key] = seen.get(key, -1) + 1
    return seen[key]


def load() -> tuple[list[Module], list[Equivalent]]:
    modules = tomllib.loads((ROOT / "mutation/modules.toml").read_text())["module"]
    equivalents = tomllib.loads((ROOT / "mutation/equivalent.toml").read_text()).get(
        "equivalent", []
    )
    return [Module(**m) for m in modules], [Equivalent(**e) for e in equivalents]


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored), never .venv."""
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        name = raw.decode()
        source = ROOT / name
        if not source.is_file():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (dest.parent / "shared").exists():
        (dest.parent / "shared").symlink_to(shared)


def spans(source: str, names: list[str]) -> list[tuple[int, int]]:
    """Line ranges of the named top-level definitions (`f`, `Class`, `Class.method`)."""
    tree = ast.parse(source)
    out: list[tuple[int, int]] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        if node.name in names:
            out.append((node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef) and f"{node.name}.{child.name}" in names:
                    out.append((child.lineno, child.end_lineno or child.lineno))
    return out


def annotations(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every type annotation: with `from __future__ import
    annotations` they are strings never evaluated, so a mutant there is equivalent."""
    out = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for a in found:
            if a is not None:
                end = (a.end_lineno or a.lineno, a.end_col_offset or 0)
                out.append(((a.lineno, a.col_offset), end))
    return out


def run(cmd: list[str], cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True)


def cosmic_ray(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "cosmic-ray"), *args]


def mutate(
    module: Module, equivalents: list[Equivalent], tree: Path, again: bool
) -> dict[str, object]:
    """Run the module's mutants; with `again`, only the survivors of the last run (the module
    unchanged, new tests added): its killed count carries over."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    session = WORK / f"{module.name}.sqlite"
    config = WORK / f"{module.name}.toml"
    python = Path(sys.executable)
    # No plugin autoload: the hypothesis and schemathesis plugins cost seconds of start-up per
    # mutant, and none of these tests uses a plugin.
    pytest = [
        "env",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
        str(python),
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        *module.tests,
    ]
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module.path}"\n'
        f"timeout = {module.timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{" ".join(pytest)}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    session.unlink(missing_ok=True)
    # Baseline: the unmutated tree must pass, or every mutant would count as killed.
    run(pytest, tree)
    run(cosmic_ray("init", str(config), str(session)), tree)
    source = (tree / module.path).read_text()
    lines = source.splitlines()
    ranges = spans(source, module.functions) if module.functions else [(1, len(lines))]
    if module.functions and len(ranges) < len(module.functions):
        raise SystemExit(f"{module.name}: some of {module.functions} are not in {module.path}")
    pattern = re.compile(module.line_regex) if module.line_regex else None
    known = {
        (e.operator, e.code, e.index): e.reason for e in equivalents if e.module == module.name
    }
    seen: dict[tuple[str, int], int] = {}
    typed = annotations(source) if "from __future__ import annotations" in source else []
    equivalent: list[dict[str, object]] = []
    previous: dict[str, Any] = {}
    if again:
        previous = json.loads((WORK / f"{module.name}.json").read_text())
        if previous.get("source_sha256") != hashlib.sha256(source.encode()).hexdigest():
            raise SystemExit(f"{module.path} changed since the last run: run it in full")
    retry = {(s["operator"], s["occurrence"]) for s in previous.get("survivors", [])}
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            (mutation,) = item.mutations
            line = mutation.start_pos[0]
            code = lines[line - 1].strip()
            inside = any(a <= line <= b for a, b in ranges)
            if inside and pattern is not None:
                inside = pattern.search(code) is not None
            index = _line_index(mutation, seen)
            reason = known.get((mutation.operator_name, code, None)) or known.get(
                (mutation.operator_name, code, index)
            )
            start = tuple(mutation.start_pos)
            if any(a <= start < b for a, b in typed):
                reason = (
                    "in a type annotation, never evaluated (from __future__ import annotations)"
                )
            if again and inside and reason is None:
                if (mutation.operator_name, mutation.occurrence) in retry:
                    continue
                reason = "killed in the previous run"
            elif inside and reason is None:
                continue
            if inside and reason != "killed in the previous run":
                equivalent.append({"line": line, "operator": mutation.operator_name, "why": reason})
            db.set_result(
                item.job_id,
                WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=reason or "outside"),
            )
    run(cosmic_ray("exec", str(config), str(session)), tree)
    indices: dict[str, int] = {}
    seen = {}
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            indices[item.job_id] = _line_index(item.mutations[0], seen)
    killed: int = previous.get("killed", 0)
    incompetent: int = previous.get("incompetent", 0)
    survivors: list[dict[str, Any]] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            (mutation,) = item.mutations
            if result.test_outcome == TestOutcome.KILLED:
                killed += 1
            elif result.test_outcome == TestOutcome.INCOMPETENT:
                incompetent += 1
            else:
                survivors.append(
                    {
                        "line": mutation.start_pos[0],
                        "operator": mutation.operator_name,
                        "occurrence": mutation.occurrence,
                        "index": indices[item.job_id],
                        "code": lines[mutation.start_pos[0] - 1].strip(),
                        "diff": result.diff,
                    }
                )
    tested = killed + len(survivors)
    figures: dict[str, object] = {
        "module": module.name,
        "path": module.path,
        "tests": module.tests,
        "killed": killed,
        "survived": len(survivors),
        "incompetent": incompetent,
        "equivalent": len(equivalent),
        "killed_percent": round(100 * killed / tested, 1) if tested else None,
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "survivors": survivors,
        "equivalents": equivalent,
    }
    (WORK / f"{module.name}.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def partial(session: Path) -> str:
    """Counts of a run that did not finish (interrupted, or still going)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    killed = survived = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = sum(1 for _ in db.pending_work_items)
        for _item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.test_outcome == TestOutcome.KILLED:
                killed += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                survived += 1
    return f"unfinished: {killed} killed, {survived} survived, {pending} not run"


def report(modules: list[Module]) -> str:
    """The figures of the last run of each module, as the Markdown table of docs/mutation.md."""
    rows = [
        "| module | mutants run | killed | survived | equivalent (skipped) | killed % |",
        "|---|---|---|---|---|---|",
    ]
    for module in modules:
        path = WORK / f"{module.name}.json"
        session = WORK / f"{module.name}.sqlite"
        if not path.is_file() and session.is_file():
            rows.append(f"| {module.name} | {partial(session)} | | | | |")
            continue
        if not path.is_file():
            rows.append(f"| {module.name} | not run | | | | |")
            continue
        f = json.loads(path.read_text())
        run_count = f["killed"] + f["survived"]
        rows.append(
            f"| {module.name} | {run_count} | {f['killed']} | {f['survived']} | "
            f"{f['equivalent']} | {f['killed_percent']} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    modules, equivalents = load()
    if argv == ["--report"]:
        sys.stdout.write(report(modules))
        return 0
    unknown = set(argv) - {m.name for m in modules} - {"--again"}
    if unknown:
        sys.stderr.write(f"unknown module(s): {', '.join(sorted(unknown))}\n")
        return 2
    again = "--again" in argv
    argv = [a for a in argv if a != "--again"]
    chosen = [m for m in modules if not argv or m.name in argv]
    WORK.mkdir(exist_ok=True)
    tree = WORK / "tree"
    copy_tree(tree)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    failed = False
    for module in chosen:
        figures = mutate(module, equivalents, tree, again)
        sys.stdout.write(
            f"{module.name}: {figures['killed']} killed, {figures['survived']} survived, "
            f"{figures['equivalent']} equivalent, {figures['incompetent']} incompetent "
            f"({figures['killed_percent']}% killed)\n"
        )
        for s in figures["survivors"]:  # type: ignore[attr-defined]
            sys.stdout.write(f"  survivor {module.path}:{s['line']} {s['operator']}: {s['code']}\n")
        failed = failed or bool(figures["survived"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
