"""The Dockerfile's stages produce a working service without a Docker daemon: the build stage's
instructions are read from the Dockerfile and run here as written (COPY from the files git
tracks, RUN through `sh -c`, ENV, WORKDIR), with the image's absolute paths moved under a
temporary root and pip pointed at `build/wheelhouse` (the locks' wheels, hash-checked, that
`make wheelhouse` downloads before the tests; pip's own configuration is ignored, as in a
container). Then the final stage: its virtualenv has no pip and no compiler, and its ENTRYPOINT
with `db upgrade` and with its CMD (loopback and a free port instead of 0.0.0.0:8000) migrates and
serves, and its HEALTHCHECK command fails before the migration and passes after it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.app.conftest import free_port
from tests.deploy.dockerfile import CHECKOUT, Instruction, Stage, parse

WHEELHOUSE = CHECKOUT / "build" / "wheelhouse"
IMAGE_PATHS = ("/opt/gpuprov", "/opt/build", "/wheels", "/src", "/var/lib/gpuprov")


@dataclass
class Image:
    root: Path  # the image's / for the paths the Dockerfile names
    env: dict[str, str]  # the final stage's environment
    entrypoint: list[str]
    cmd: list[str]
    healthcheck: list[str]

    def path(self, image_path: str) -> Path:
        return self.root / image_path.lstrip("/")


def _moved(text: str, root: Path) -> str:
    pattern = "|".join(re.escape(p) for p in IMAGE_PATHS)
    return re.sub(rf"(?<![\w./])({pattern})(?=[/\s'\"]|$)", lambda m: f"{root}{m[1]}", text)


def _set_env(instruction: Instruction, env: dict[str, str], root: Path) -> None:
    for pair in shlex.split(instruction.args):
        key, _, value = pair.partition("=")
        value = _moved(value, root).replace("$PATH", env.get("PATH", "")).replace("${PATH}", "")
        env[key] = value


def _tracked(source: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", source],
        cwd=CHECKOUT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [n for n in listed.split("\0") if n]


def _run_build_stage(stage: Stage, root: Path, env: dict[str, str]) -> None:
    cwd = root
    for instruction in stage.instructions:
        if instruction.keyword == "WORKDIR":
            cwd = Path(_moved(instruction.args, root))
            cwd.mkdir(parents=True, exist_ok=True)
        elif instruction.keyword == "ENV":
            _set_env(instruction, env, root)
        elif instruction.keyword == "COPY":
            *sources, destination = shlex.split(instruction.args)
            for source in sources:
                for name in _tracked(source):
                    relative = (
                        Path(name)
                        if destination != "./"
                        else Path(name).relative_to(Path(source).parent)
                    )
                    if destination not in ("./", "."):
                        relative = Path(destination) / Path(name).relative_to(source)
                    target = cwd / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(CHECKOUT / name, target)
        elif instruction.keyword == "RUN":
            done = subprocess.run(
                ["sh", "-c", _moved(instruction.args, root)],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"line {instruction.line}: {done.stdout}{done.stderr}"
        else:
            pytest.fail(f"line {instruction.line}: {instruction.keyword} is not run by this test")


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    if not list(WHEELHOUSE.glob("*.whl")):
        message = "build/wheelhouse is empty: `make wheelhouse` downloads the locks' wheels"
        pytest.fail(message)
    dockerfile = parse()
    build, final = dockerfile.stages[0], dockerfile.stages[-1]
    tmp = tmp_path_factory.mktemp("image")
    root = tmp / "root"
    tools = tmp / "bin"
    tools.mkdir()
    # `python` in the image is the base's interpreter: here, the one this venv was made from
    (tools / "python").symlink_to(Path(sys.executable).resolve())
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUPROV_", "PYTHON", "VIRTUAL", "PIP_", "XDG_"))
    }
    env.update(
        PATH=f"{tools}:/usr/bin:/bin",
        HOME=str(tmp / "home"),
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(WHEELHOUSE),
    )
    started = time.monotonic()
    _run_build_stage(build, root, dict(env))
    print(f"build stage ran in {time.monotonic() - started:.0f} s")

    final_env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    for instruction in final.all("ENV"):
        _set_env(instruction, final_env, root)
    [workdir] = final.all("WORKDIR")
    Path(_moved(workdir.args, root)).mkdir(parents=True, exist_ok=True)
    [entrypoint] = final.all("ENTRYPOINT")
    [cmd] = final.all("CMD")
    [health] = final.all("HEALTHCHECK")
    yield Image(
        root,
        final_env,
        entrypoint.exec_form() or [],
        cmd.exec_form() or [],
        health.exec_form() or [],
    )


def test_the_virtualenv_holds_gpuprov_and_its_locked_dependencies_only(image: Image) -> None:
    venv = image.path("/opt/gpuprov")
    assert (venv / "bin" / "gpuprov").exists()
    assert not list((venv / "bin").glob("pip*")), "the final virtualenv has a pip"
    version = subprocess.run(
        [str(venv / "bin" / "gpuprov"), "--version"], env=image.env, capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("gpuprov "), version
    check = subprocess.run(
        [str(image.path("/opt/build/bin/pip")), "--python", str(venv / "bin" / "python"), "check"],
        env={**image.env, "PIP_CONFIG_FILE": os.devnull},
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    listed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; "
            "print('\\n'.join(sorted(d.metadata['Name'].lower() for d in m.distributions())))",
        ],
        env=image.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    locked = re.findall(r"^([A-Za-z0-9_.-]+)==", (CHECKOUT / "requirements.lock").read_text(), re.M)
    norm = {re.sub(r"[-_.]+", "-", n).lower() for n in locked}
    assert {re.sub(r"[-_.]+", "-", n) for n in listed} == norm | {"gpuprov"}


def test_no_compiler_in_what_the_final_stage_copies(image: Image) -> None:
    venv = image.path("/opt/gpuprov")
    names = {p.name for p in venv.rglob("*") if p.is_file()}
    assert not names & {"gcc", "cc", "g++", "ld", "as", "clang"}


def _probe(image: Image, port: int) -> subprocess.CompletedProcess[str]:
    argv = [a.replace(":8000/", f":{port}/") for a in image.healthcheck]
    return subprocess.run(argv, env=image.env, capture_output=True, text=True, timeout=10)


def _healthcheck_on_served(image: Image, database_url: str) -> subprocess.CompletedProcess[str]:
    """Start the ENTRYPOINT with its CMD (on loopback, a free port), then run the HEALTHCHECK."""
    env = {**image.env, "GPUPROV_DATABASE_URL": database_url}
    port = free_port()
    cmd = [a.replace("0.0.0.0", "127.0.0.1") for a in image.cmd]
    cmd[cmd.index("--port") + 1] = str(port)
    server = subprocess.Popen(
        [*image.entrypoint, *cmd],
        env=env,
        cwd=image.path("/var/lib/gpuprov"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(150):
            assert server.poll() is None, server.communicate()[1]
            done = _probe(image, port)
            if "Connection refused" not in done.stderr:  # the service answered
                return done
            time.sleep(0.2)
        pytest.fail("the service never answered the healthcheck")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_healthcheck_fails_while_the_database_is_unreachable(image: Image) -> None:
    nowhere = f"postgresql+psycopg://gpuprov@127.0.0.1:{free_port()}/gpuprov"
    done = _healthcheck_on_served(image, nowhere)
    assert done.returncode != 0 and "503" in done.stderr, done


def test_entrypoint_migrates_serves_and_passes_the_healthcheck(
    image: Image, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'gpuprov.db'}"
    migrate = subprocess.run(
        [*image.entrypoint, "db", "upgrade"],
        env={**image.env, "GPUPROV_DATABASE_URL": url},
        cwd=image.path("/var/lib/gpuprov"),
        capture_output=True,
        text=True,
    )
    assert migrate.returncode == 0, migrate.stderr
    done = _healthcheck_on_served(image, url)
    assert done.returncode == 0, done.stderr
