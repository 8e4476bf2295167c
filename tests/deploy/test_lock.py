"""requirements.lock pins, with hashes, exactly the service's dependency closure: every runtime
requirement of pyproject.toml (extras included, followed through the installed distributions'
metadata) at a version its specifiers allow, nothing else; and the virtualenv the tests run in
has those very versions (`make` installs with the lock as constraints), so the tests exercise
what the image ships. requirements-build.lock pins the build backend the same way.
A failure here after a pyproject.toml change: run `make lock` (docs/deploy.md)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
import tomllib
from collections import deque
from dataclasses import dataclass

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.dockerfile import CHECKOUT

ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s*\\\n\s+--hash=\S+)+)", re.M)


@dataclass(frozen=True)
class Pin:
    version: Version
    hashes: tuple[str, ...]


def _lock(name: str) -> dict[str, Pin]:
    text = (CHECKOUT / name).read_text()
    pins = {
        canonicalize_name(m[1]): Pin(Version(m[2]), tuple(re.findall(r"--hash=(\S+)", m[3])))
        for m in ENTRY.finditer(text)
    }
    # every requirement line was understood (none without hashes, none in another form)
    assert len(pins) == len(re.findall(r"^[A-Za-z0-9]", text, re.M)), f"{name}: unparsed lines"
    assert "make lock" in text.splitlines()[1], f"{name} was not written by `make lock`"
    return pins


def _pyproject() -> dict[str, object]:
    return tomllib.loads((CHECKOUT / "pyproject.toml").read_text())


def _closure(roots: list[Requirement]) -> dict[str, list[Requirement]]:
    """Every distribution ``roots`` need, with the requirements that asked for it."""
    needed: dict[str, list[Requirement]] = {}
    queue = deque((r, "") for r in roots)
    seen_extras: set[tuple[str, str]] = set()
    while queue:
        requirement, extra = queue.popleft()
        if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        needed.setdefault(name, []).append(requirement)
        for wanted in {""} | requirement.extras:
            if (name, wanted) in seen_extras:
                continue
            seen_extras.add((name, wanted))
            for line in _installed(name).requires or []:
                queue.append((Requirement(line), wanted))
    return needed


def _installed(name: str) -> metadata.Distribution:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} is not installed in this virtualenv: `make` reinstalls it")


def test_every_pin_is_hashed() -> None:
    for name in ("requirements.lock", "requirements-build.lock"):
        for package, pin in _lock(name).items():
            assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), package
            assert all(len(h) == len("sha256:") + 64 for h in pin.hashes), package


def test_the_lock_is_the_runtime_closure_of_pyproject() -> None:
    pins = _lock("requirements.lock")
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    roots = [Requirement(r) for r in project["dependencies"]]
    needed = _closure(roots)
    missing = sorted(set(needed) - set(pins))
    assert not missing, f"not in requirements.lock (run `make lock`): {missing}"
    extra = sorted(set(pins) - set(needed))
    assert not extra, f"requirements.lock pins what nothing needs (run `make lock`): {extra}"
    for name, requirements in needed.items():
        for requirement in requirements:
            assert requirement.specifier.contains(pins[name].version, prereleases=True), (
                f"{name}=={pins[name].version} does not satisfy {requirement}"
            )


def test_the_tests_run_the_locked_versions() -> None:
    pins = _lock("requirements.lock")
    stale = {
        name: (str(pin.version), _installed(name).version)
        for name, pin in pins.items()
        if Version(_installed(name).version) != pin.version
    }
    assert not stale, f"locked vs installed (`make` reinstalls .venv with the lock): {stale}"


def test_the_build_lock_pins_the_build_backend() -> None:
    pins = _lock("requirements-build.lock")
    system = _pyproject()["build-system"]
    assert isinstance(system, dict)
    for line in system["requires"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements-build.lock (run `make lock`)"
        assert requirement.specifier.contains(pins[name].version), requirement


@pytest.mark.parametrize("name", ["requirements.lock", "requirements-build.lock"])
def test_the_lock_names_no_local_index(name: str) -> None:
    text = (CHECKOUT / name).read_text()
    assert "file://" not in text and "--index-url" not in text and "--find-links" not in text
