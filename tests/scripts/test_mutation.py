"""`make mutation` (scripts/mutation.py): a module is run again exactly when what its figures
depend on changed, shards split the modules to run without overlap or gap, and the options
refuse what they cannot mean. On a small tree of its own (never this checkout's figures)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """scripts/mutation.py pointed at a tree in tmp_path: two modules, one test file each, a
    conftest and a helper module that one test imports (and that imports another)."""
    spec = importlib.util.spec_from_file_location("mutation_runner", ROOT / "scripts/mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_runner"] = module
    spec.loader.exec_module(module)
    files = {
        "pkg/a.py": "def a(x):\n    return x > 1\n",
        "pkg/b.py": "def b(x):\n    return x == 2\n",
        "tests/__init__.py": "",
        "tests/conftest.py": "import pytest\n",
        "tests/pkg/__init__.py": "",
        "tests/pkg/conftest.py": "X = 1\n",
        "tests/pkg/helper.py": "from tests.pkg.deeper import VALUE\n",
        "tests/pkg/deeper.py": "VALUE = 2\n",
        "tests/pkg/test_a.py": "from tests.pkg import helper\n\ndef test_a():\n    pass\n",
        "tests/pkg/test_b.py": "def test_b():\n    from pkg.b import b\n",
        "mutation/modules.toml": (
            '[[module]]\nname = "a"\npath = "pkg/a.py"\ntests = ["tests/pkg/test_a.py"]\n\n'
            '[[module]]\nname = "b"\npath = "pkg/b.py"\ntests = ["tests/pkg/test_b.py::test_b"]\n'
        ),
        "mutation/equivalent.toml": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "WORK", tmp_path / ".mutation")
    monkeypatch.setattr(module, "RECORD", tmp_path / "mutation/figures.json")
    yield module
    sys.modules.pop("mutation_runner", None)


def _module(runner: ModuleType, name: str) -> Any:
    modules, _ = runner.load()
    return next(m for m in modules if m.name == name)


def test_the_inputs_of_a_test_are_its_file_conftests_and_helpers(runner: ModuleType) -> None:
    root: Path = runner.ROOT
    found = [str(p.relative_to(root)) for p in runner.test_inputs(["tests/pkg/test_a.py"])]
    assert found == [
        "tests/conftest.py",
        "tests/pkg/__init__.py",
        "tests/pkg/conftest.py",
        "tests/pkg/deeper.py",
        "tests/pkg/helper.py",
        "tests/pkg/test_a.py",
    ]
    # a node id names its file; a test importing no helper brings only its conftests
    found = [str(p.relative_to(root)) for p in runner.test_inputs(["tests/pkg/test_b.py::test_b"])]
    assert found == ["tests/conftest.py", "tests/pkg/conftest.py", "tests/pkg/test_b.py"]


@pytest.mark.parametrize(
    ("change", "reruns"),
    [
        ("pkg/a.py", True),  # the module
        ("tests/pkg/test_a.py", True),  # its test
        ("tests/pkg/deeper.py", True),  # a helper of a helper of its test
        ("tests/pkg/conftest.py", True),  # a conftest above its test
        ("tests/conftest.py", True),
        ("pkg/b.py", False),  # another module
        ("tests/pkg/test_b.py", False),  # another module's test
    ],
)
def test_a_module_runs_again_exactly_when_its_inputs_change(
    runner: ModuleType, change: str, reruns: bool
) -> None:
    module = _module(runner, "a")
    _, equivalents = runner.load()
    before = runner.fingerprint(module, equivalents)
    runner.RECORD.write_text(json.dumps({"a": {"fingerprint": before, "date": "2026-12-03"}}))
    assert runner.reusable(module, equivalents) == "2026-12-03"
    path = runner.ROOT / change
    path.write_text(path.read_text() + "# changed\n")
    assert (runner.fingerprint(module, equivalents) != before) is reruns
    assert (runner.reusable(module, equivalents) is None) is reruns


def test_its_entry_and_its_equivalents_are_inputs(runner: ModuleType) -> None:
    _, none = runner.load()
    a = _module(runner, "a")
    before = runner.fingerprint(a, none)
    other = runner.Equivalent("b", "core/NumberReplacer", "return x == 2", "why")
    assert runner.fingerprint(a, [other]) == before
    own = runner.Equivalent("a", "core/NumberReplacer", "return x > 1", "why")
    assert runner.fingerprint(a, [own]) != before
    a.functions = ["a"]
    assert runner.fingerprint(a, none) != before


def test_local_figures_count_unless_sharding(runner: ModuleType) -> None:
    module = _module(runner, "a")
    _, equivalents = runner.load()
    runner.WORK.mkdir()
    local = {"fingerprint": runner.fingerprint(module, equivalents), "date": "2026-12-04"}
    (runner.WORK / "a.json").write_text(json.dumps(local))
    assert runner.reusable(module, equivalents) == "2026-12-04"
    # shards decide on the committed figures alone, so that every job sees the same work
    assert runner.reusable(module, equivalents, local=False) is None


def test_shards_split_the_modules_without_overlap_or_gap(runner: ModuleType) -> None:
    names = ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]
    seconds = {"m1": 900, "m2": 100, "m3": 300, "m4": 400, "m5": 60, "m6": 50}  # m7: never run
    runner.RECORD.write_text(json.dumps({n: {"seconds": s} for n, s in seconds.items()}))
    modules = [runner.Module(n, f"pkg/{n}.py", []) for n in names]
    for count in (1, 2, 3, 7, 9):
        parts = [[m.name for m in runner.shard(modules, i, count)] for i in range(1, count + 1)]
        assert sorted(n for part in parts for n in part) == names, count
        assert parts == [
            [m.name for m in runner.shard(list(modules), i, count)] for i in range(1, count + 1)
        ]
    # longest first to the least loaded (ties: the lower part): m1 900 | m7 600 (never run),
    # m2 100, m5 60 | m4 400, m3 300, m6 50
    assert [[m.name for m in runner.shard(modules, i, 3)] for i in (1, 2, 3)] == [
        ["m1"],
        ["m2", "m5", "m7"],
        ["m3", "m4", "m6"],
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "0/2"], "1 <= I <= N"),
        (["--shard", "3/2"], "1 <= I <= N"),
        (["--shard", "1"], "I/N"),
        (["--shard"], "needs a value"),
        (["--budget", "an hour"], "number of minutes"),
        (["--budget", "0"], "above 0"),
        (["--fast"], "unknown option --fast"),
    ],
)
def test_bad_options_are_refused(
    runner: ModuleType, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert runner.main(argv) == 2
    assert message in capsys.readouterr().err


def test_the_plan_leaves_out_the_modules_whose_figures_hold(
    runner: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    modules, equivalents = runner.load()
    print_a = runner.fingerprint(modules[0], equivalents)
    runner.RECORD.write_text(json.dumps({"a": {"fingerprint": print_a, "date": "2026-12-03"}}))
    assert runner.main(["--plan"]) == 0
    out = capsys.readouterr().out
    assert "a: unchanged since its run of 2026-12-03: figures reused" in out
    assert "would run b" in out and "would run a" not in out
    assert runner.main(["--plan", "--force", "a"]) == 0
    assert capsys.readouterr().out == "would run a (about 10 min)\n"
    assert runner.main(["--plan", "--shard", "2/2"]) == 0
    assert "shard 2/2: nothing to run" in capsys.readouterr().out
    assert runner.main(["--plan", "nope"]) == 2
    assert not runner.WORK.exists()  # a plan copies and runs nothing


def test_each_line_knows_the_definition_holding_it(runner: ModuleType) -> None:
    source = (
        "X = 1\n"
        "def f():\n"
        "    return 1\n"
        "class C:\n"
        "    y = 2\n"
        "    def m(self):\n"
        "        return 2\n"
        "async def g():\n"
        "    pass\n"
    )
    assert runner.definitions(source) == {
        2: "f",
        3: "f",
        4: "C",
        5: "C",
        6: "C.m",
        7: "C.m",
        8: "g",
        9: "g",
    }


def test_the_listed_definitions_are_found_async_ones_and_constants_too(runner: ModuleType) -> None:
    source = (
        "X = frozenset({1})\n"
        "async def handler():\n"
        "    return 1\n"
        "class C:\n"
        "    async def m(self):\n"
        "        return 2\n"
        "    def n(self):\n"
        "        return 3\n"
    )
    assert runner.spans(source, ["X", "handler", "C.m"]) == [(1, 1), (2, 3), (5, 6)]
    assert runner.spans(source, ["C"]) == [(4, 8)]


def test_a_field_at_its_default_is_no_input(runner: ModuleType) -> None:
    # a field the runner gains later leaves the fingerprints of entries without it as they were
    _, none = runner.load()
    a = _module(runner, "a")
    before = runner.fingerprint(a, none)
    a.timeout = 60.0
    a.select = None
    assert runner.fingerprint(a, none) == before
    a.select = "not slow"
    assert runner.fingerprint(a, none) != before
    plain = runner.Equivalent("a", "core/NumberReplacer", "return x > 1", "why")
    assert runner.fingerprint(a, [plain]) == runner.fingerprint(
        a, [runner.Equivalent("a", "core/NumberReplacer", "return x > 1", "why", index=None)]
    )
