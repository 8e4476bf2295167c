"""Mutation testing of the security and decision modules with cosmic-ray (`make mutation`,
docs/mutation.md).

For each module of mutation/modules.toml: copy the working tree aside (the mutants are written
into files, so the checkout is never touched), `cosmic-ray init`, mark the mutants outside the
listed definitions and the known equivalent ones (mutation/equivalent.toml) as skipped,
`cosmic-ray exec` with the module's narrow test command, and print killed / survived counts and
each survivor. Figures go to .mutation/NAME.json and, without the survivors' diffs, to the
committed mutation/figures.json. Not a CI gate.

Incremental: a module whose fingerprint (its source, its test files and the test helpers and
conftest files they load, its entry in modules.toml and its equivalents) equals that of its last
figures is not run again; its figures are reused. Shardable: ``--shard I/N`` runs the I-th of N
parts of the modules that need a run, balanced by their last run times.

    python scripts/mutation.py [NAME ...]          # default: every module, smallest first
    python scripts/mutation.py --force NAME ...    # run even if unchanged since the last run
    python scripts/mutation.py --shard 2/3         # the second of three parts (CI jobs)
    python scripts/mutation.py --budget 60         # start no module that would end past 60 min
    python scripts/mutation.py --again NAME ...    # only the last run's survivors
    python scripts/mutation.py --plan              # what would run, and why, without running
    python scripts/mutation.py --report            # the last figures as a Markdown table
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The tree this script belongs to (never the current directory): the one copied and measured.
ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".mutation"
#: the committed figures of the last run of each module, with the fingerprint they were made on
RECORD = ROOT / "mutation/figures.json"
#: part of every fingerprint: bump when what a run counts changes (operators, skipping rules)
RUNNER_VERSION = 2
#: assumed run time of a module never run, for sharding and the budget (seconds)
UNKNOWN_COST = 600.0


@dataclass
class Module:
    name: str
    path: str
    tests: list[str]
    functions: list[str] = field(default_factory=list)
    line_regex: str | None = None
    timeout: float = 60.0
    #: a pytest -k expression narrowing the tests (e.g. "not postgresql": one backend per mutant)
    select: str | None = None


@dataclass(frozen=True)
class Equivalent:
    module: str
    operator: str
    code: str  # the mutated line, stripped
    reason: str
    #: which of this operator's mutants on that line (0 = first), when only some are equivalent
    index: int | None = None
    #: the definition holding the line (`f`, `Class.method`), when the same line is elsewhere too
    function: str | None = None


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


def _module_file(root: Path, name: str) -> Path | None:
    """The file of a dotted module name inside the tree, if it is one of ours."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_inputs(tests: list[str], root: Path | None = None) -> list[Path]:
    """The test files, the conftest files above them, and the test helpers they import
    (``tests.*`` modules, followed through the helpers): what decides a test's outcome besides
    the code it tests."""
    root = root or ROOT
    found: set[Path] = set()
    todo = [root / t.split("::", 1)[0] for t in tests]
    for path in list(todo):
        for parent in path.parents:
            if parent == root.parent:
                break
            if (parent / "conftest.py").is_file():
                todo.append(parent / "conftest.py")
    while todo:
        path = todo.pop()
        if path in found or not path.is_file():
            continue
        found.add(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                if name == "tests" or name.startswith("tests."):
                    helper = _module_file(root, name)
                    if helper is not None:
                        todo.append(helper)
    return sorted(found)


def _set(entry: Module | Equivalent) -> dict[str, Any]:
    """An entry's fields, less those at their defaults: a field the runner gains later leaves
    the fingerprints of the entries that do not set it as they were."""
    out: dict[str, Any] = {}
    for f in fields(entry):
        value = getattr(entry, f.name)
        if f.default is not MISSING:
            default: Any = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            out[f.name] = value
            continue
        if value != default:
            out[f.name] = value
    return out


def fingerprint(module: Module, equivalents: list[Equivalent], root: Path | None = None) -> str:
    """What a module's figures depend on: its source, its tests and their helpers, its entry in
    modules.toml, its listed equivalents, the runner and cosmic-ray versions (in ``root``: the
    checkout, or the copy a run measures)."""
    from importlib.metadata import PackageNotFoundError, version

    try:  # `make mutation` installs it; `make test` (the runner's own tests) need not
        cosmic_ray = version("cosmic-ray")
    except PackageNotFoundError:
        cosmic_ray = "not installed"
    root = root or ROOT
    files = [root / module.path, *test_inputs(module.tests, root)]
    doc = {
        "runner": RUNNER_VERSION,
        "cosmic-ray": cosmic_ray,
        "module": _set(module),
        "equivalents": sorted(
            json.dumps(_set(e), sort_keys=True) for e in equivalents if e.module == module.name
        ),
        "files": {
            str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
        },
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_record() -> dict[str, dict[str, Any]]:
    """The committed figures (mutation/figures.json), by module name."""
    if not RECORD.is_file():
        return {}
    doc: dict[str, dict[str, Any]] = json.loads(RECORD.read_text())
    return doc


def write_record(figures: dict[str, Any]) -> None:
    """Record one module's figures (not its survivors' diffs) in mutation/figures.json."""
    record = read_record()
    keep = ("fingerprint", "date", "seconds", "killed", "survived", "equivalent", "incompetent")
    entry = {k: figures[k] for k in keep}
    entry["killed_percent"] = figures["killed_percent"]
    entry["survivors"] = [f"{s['line']} {s['operator']}: {s['code']}" for s in figures["survivors"]]
    record[figures["module"]] = entry
    RECORD.write_text(json.dumps(dict(sorted(record.items())), indent=2) + "\n")


def last_figures(module: Module, local: bool = True) -> dict[str, Any] | None:
    """The module's last figures: its .mutation/NAME.json (with ``local``), else its entry in
    the committed record."""
    path = WORK / f"{module.name}.json"
    if local and path.is_file():
        doc: dict[str, Any] = json.loads(path.read_text())
        if "fingerprint" in doc:
            return doc
    return read_record().get(module.name)


def reusable(module: Module, equivalents: list[Equivalent], local: bool = True) -> str | None:
    """When the module's last figures were made on what it is now: their date; else None."""
    last = last_figures(module, local)
    if last is None or last.get("fingerprint") != fingerprint(module, equivalents):
        return None
    return str(last.get("date", "an earlier run"))


def cost(module: Module) -> float:
    """Seconds the module's last run took (committed figures only, so every shard agrees)."""
    entry = read_record().get(module.name)
    return float(entry["seconds"]) if entry and "seconds" in entry else UNKNOWN_COST


def shard(modules: list[Module], index: int, count: int) -> list[Module]:
    """The index-th (1-based) of count parts of modules, balanced by cost: the longest module
    first to the part with the least work so far (ties: the lower part). The same input gives
    every shard the same partition."""
    loads = [0.0] * count
    parts: list[list[str]] = [[] for _ in range(count)]
    for m in sorted(modules, key=lambda m: (-cost(m), m.name)):
        least = min(range(count), key=lambda i: (loads[i], i))
        loads[least] += cost(m)
        parts[least].append(m.name)
    mine = set(parts[index - 1])
    return [m for m in modules if m.name in mine]


def spans(source: str, names: list[str]) -> list[tuple[int, int]]:
    """Line ranges of the named top-level definitions (`f`, `Class`, `Class.method`, and
    `CONSTANT` of an assignment)."""
    tree = ast.parse(source)
    out: list[tuple[int, int]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                out.append((node.lineno, node.end_lineno or node.lineno))
            continue
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if node.name in names:
            out.append((node.lineno, node.end_lineno or node.lineno))
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if (
                    isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                    and f"{node.name}.{child.name}" in names
                ):
                    out.append((child.lineno, child.end_lineno or child.lineno))
    return out


def definitions(source: str) -> dict[int, str]:
    """The innermost top-level function, class or method (`f`, `Class.method`) of each line."""
    out: dict[int, str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            out[n] = node.name
        if isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    for n in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                        out[n] = f"{node.name}.{child.name}"
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
        *(["-k", module.select] if module.select else []),
        *module.tests,
    ]
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module.path)}\n"
        f"timeout = {module.timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(pytest))}\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    started = time.monotonic()
    print_id = fingerprint(module, equivalents, tree)  # what this run measures
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
    known = [e for e in equivalents if e.module == module.name]
    holder = definitions(source)
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
            reason = next(
                (
                    e.reason
                    for e in known
                    if (e.operator, e.code) == (mutation.operator_name, code)
                    and e.index in (None, index)
                    and e.function in (None, holder.get(line))
                ),
                None,
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
        "fingerprint": print_id,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        # an --again run adds its time to the full run's: the cost of the figures, for shards
        "seconds": round(time.monotonic() - started + float(previous.get("seconds", 0)), 1),
        "survivors": survivors,
        "equivalents": equivalent,
    }
    (WORK / f"{module.name}.json").write_text(json.dumps(figures, indent=2) + "\n")
    write_record(figures)
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


def report(modules: list[Module], equivalents: list[Equivalent]) -> str:
    """The figures of the last run of each module, as the Markdown table of docs/mutation.md;
    a module changed since its figures were made says so."""
    rows = [
        "| module | mutants run | killed | survived | equivalent (skipped) | killed % | minutes |",
        "|---|---|---|---|---|---|---|",
    ]
    for module in modules:
        f = last_figures(module)
        session = WORK / f"{module.name}.sqlite"
        if f is None and session.is_file():
            rows.append(f"| {module.name} | {partial(session)} | | | | | |")
            continue
        if f is None:
            rows.append(f"| {module.name} | not run | | | | | |")
            continue
        run_count = f["killed"] + f["survived"]
        name = module.name
        if f.get("fingerprint") != fingerprint(module, equivalents):
            name += " (changed since: run again)"
        minutes = f"{float(f['seconds']) / 60:.1f}" if "seconds" in f else ""
        rows.append(
            f"| {name} | {run_count} | {f['killed']} | {f['survived']} | "
            f"{f['equivalent']} | {f['killed_percent']} | {minutes} |"
        )
    return "\n".join(rows) + "\n"


USAGE = (
    "usage: mutation.py [--force] [--again] [--shard I/N] [--budget MINUTES] [--plan] "
    "[NAME ...] | --report\n"
)


def _options(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Flags and their values, and the module names."""
    options: dict[str, Any] = {"force": False, "again": False, "plan": False}
    names: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("--force", "--again", "--plan"):
            options[arg[2:]] = True
        elif arg in ("--shard", "--budget"):
            value = next(args, None)
            if value is None:
                raise ValueError(f"{arg} needs a value")
            options[arg[2:]] = value
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg}")
        else:
            names.append(arg)
    if "shard" in options:
        m = re.fullmatch(r"([0-9]+)/([0-9]+)", options["shard"])
        if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise ValueError("--shard is I/N with 1 <= I <= N (e.g. 2/3)")
        options["shard"] = (int(m.group(1)), int(m.group(2)))
    if "budget" in options:
        try:
            options["budget"] = float(options["budget"]) * 60
        except ValueError:
            raise ValueError("--budget is a number of minutes") from None
        if options["budget"] <= 0:
            raise ValueError("--budget is a number of minutes above 0")
    return options, names


def main(argv: list[str]) -> int:
    if hasattr(sys.stdout, "reconfigure"):  # a log file shows each module as it ends
        sys.stdout.reconfigure(line_buffering=True)
    modules, equivalents = load()
    if argv == ["--report"]:
        sys.stdout.write(report(modules, equivalents))
        return 0
    try:
        options, names = _options(argv)
    except ValueError as e:
        sys.stderr.write(f"{e}\n{USAGE}")
        return 2
    unknown = set(names) - {m.name for m in modules}
    if unknown:
        sys.stderr.write(f"unknown module(s): {', '.join(sorted(unknown))}\n")
        return 2
    chosen = [m for m in modules if not names or m.name in names]
    todo: list[Module] = []
    for module in chosen:
        # shards decide on the committed figures only: every job then sees the same modules
        when = None if options["force"] else reusable(module, equivalents, "shard" not in options)
        if when is not None and not options["again"]:
            sys.stdout.write(f"{module.name}: unchanged since its run of {when}: figures reused\n")
        else:
            todo.append(module)
    if "shard" in options:
        index, count = options["shard"]
        todo = shard(todo, index, count)
        sys.stdout.write(
            f"shard {index}/{count}: {', '.join(m.name for m in todo) or 'nothing to run'}\n"
        )
        # within the shard, what this machine ran before on the same inputs is reused too
        if not options["force"] and not options["again"]:
            todo = [m for m in todo if reusable(m, equivalents) is None]
    if options["plan"]:
        for module in todo:
            sys.stdout.write(f"would run {module.name} (about {cost(module) / 60:.0f} min)\n")
        return 0
    WORK.mkdir(exist_ok=True)
    tree = WORK / "tree"
    copy_tree(tree)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    # the copy holds no ignored build outputs: the SSO tests' OpenID Provider (node modules
    # that `make oidc-provider` installs) is the checkout's
    os.environ.setdefault("GPUPROV_OIDC_PROVIDER_MODULES", str(ROOT / "build" / "oidc-provider"))
    failed = False
    started = time.monotonic()
    for n, module in enumerate(todo):
        budget = options.get("budget")
        if budget is not None and time.monotonic() - started + cost(module) > budget:
            left = ", ".join(m.name for m in todo[n:])
            sys.stdout.write(f"budget: not started (they run next time): {left}\n")
            return 3 if not failed else 1
        figures = mutate(module, equivalents, tree, options["again"])
        sys.stdout.write(
            f"{module.name}: {figures['killed']} killed, {figures['survived']} survived, "
            f"{figures['equivalent']} equivalent, {figures['incompetent']} incompetent "
            f"({figures['killed_percent']}% killed, {float(figures['seconds']) / 60:.1f} min)\n"
        )
        for s in figures["survivors"]:  # type: ignore[attr-defined]
            sys.stdout.write(f"  survivor {module.path}:{s['line']} {s['operator']}: {s['code']}\n")
        failed = failed or bool(figures["survived"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
