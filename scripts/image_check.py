"""Build the service image with a Docker daemon and run it as deployed (`make image-check`).

`make test` checks the Dockerfile without a daemon (hadolint, the project's own rules, its stages
run outside a container: tests/deploy/); this is the check that needs one (``DOCKER_HOST`` is
honoured): `docker build`, then `gpuprov --version`, uid 10001, no compiler or pip in the image,
and, read-only with no capability and migrated, the image's HEALTHCHECK turns healthy. The base
is the Dockerfile's pinned one, or ``GPUPROV_TEST_PYTHON_IMAGE`` (a local stand-in where no
registry is reachable). Exit status: 0 passed, 1 a check failed, 2 no daemon or no base image.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def _docker(docker: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([docker, *args], capture_output=True, text=True, timeout=timeout)


def _base() -> str:
    chosen = os.environ.get("GPUPROV_TEST_PYTHON_IMAGE")
    if chosen:
        return chosen
    text = (CHECKOUT / "Dockerfile").read_text()
    found = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.MULTILINE)
    if found is None:
        raise SystemExit("image-check: the Dockerfile has no ARG PYTHON_IMAGE=... default")
    return found.group(1)


def _check(ok: bool, what: str, detail: object = "") -> None:
    if not ok:
        sys.stderr.write(f"image-check: FAILED: {what}\n{detail}\n")
        raise SystemExit(1)
    sys.stdout.write(f"image-check: ok: {what}\n")


def main() -> None:
    """Build, run and probe the image; exit as the docstring says."""
    docker = shutil.which("docker")
    probe = _docker(docker, "info", timeout=30) if docker else None
    if probe is None or probe.returncode != 0:
        lines = probe.stderr.strip().splitlines() if probe else []
        why = "no docker CLI" if probe is None else (lines[-1] if lines else "docker info failed")
        sys.stderr.write(f"image-check: no Docker daemon answers ({why})\n")
        raise SystemExit(2)
    assert docker is not None
    base = _base()
    if _docker(docker, "image", "inspect", base).returncode != 0:
        pulled = _docker(docker, "pull", base, timeout=600)
        if pulled.returncode != 0:
            sys.stderr.write(
                f"image-check: the base {base} is neither present nor pullable "
                f"({pulled.stderr.strip()[-160:]}); set GPUPROV_TEST_PYTHON_IMAGE to a local one\n"
            )
            raise SystemExit(2)
    tag = f"gpuprov-image-check:{os.getpid()}"
    name = f"gpuprov-image-check-{os.getpid()}"
    built = _docker(
        docker,
        *("build", "-q", "--network", "host", "--build-arg", f"PYTHON_IMAGE={base}"),
        *("-t", tag, str(CHECKOUT)),
        timeout=1800,
    )
    _check(built.returncode == 0, f"docker build on {base}", built.stderr)
    try:
        version = _docker(docker, "run", "--rm", "--network", "none", tag, "--version")
        _check(
            version.returncode == 0 and version.stdout.startswith("gpuprov "),
            "gpuprov --version",
            version,
        )
        user = _docker(docker, "run", "--rm", "--entrypoint", "id", tag, "-u")
        _check(user.stdout.strip() == "10001", "runs as uid 10001", user.stdout)
        tools = _docker(
            docker,
            *("run", "--rm", "--entrypoint", "sh", tag, "-c"),
            "command -v gcc cc g++ clang make; ls /opt/gpuprov/bin | grep '^pip' || true",
        )
        _check(tools.stdout.strip() == "", "no compiler or pip in the image", tools.stdout)
        # deployed as compose does (read-only, no capability), migrated: the HEALTHCHECK passes
        started = _docker(
            docker,
            *("run", "-d", "--name", name, "--network", "none", "--read-only"),
            *("--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"),
            *("--health-interval", "2s", "--health-start-period", "300s"),
            *("-e", "GPUPROV_DATABASE_URL=sqlite:////tmp/gpuprov.db"),
            *("--entrypoint", "sh", tag, "-c"),
            "gpuprov db upgrade && exec gpuprov serve --host 0.0.0.0 --port 8000 --workers 2",
        )
        _check(started.returncode == 0, "started read-only with no capability", started.stderr)
        status = ""
        for _ in range(150):
            status = _docker(docker, "inspect", "-f", "{{.State.Health.Status}}", name).stdout
            if status.strip() in ("healthy", "unhealthy"):
                break
            time.sleep(2)
        _check(
            status.strip() == "healthy",
            "HEALTHCHECK healthy",
            _docker(docker, "logs", name).stderr[-2000:],
        )
    finally:
        _docker(docker, "rm", "-f", name)
        _docker(docker, "rmi", "-f", tag)


if __name__ == "__main__":
    main()
