"""Images on a node: a containerd store scan of an image against the same image's OCI-archive
scan, and a Docker data root scan against the image's docker-archive scan; prints JSON.

Builds (under ~/.cache/gpuprov-bench/node-stores) an image of three gzip layers: 20,000 small
files, GPU-library-named ELF files of 4-40 MB (a compiled shared library followed by
incompressible bytes) and a dpkg database. The containerd store is written by Debian's real
containerd (`ctr images import` into a private daemon, as the tests do); the Docker data root
is laid out like Docker's overlay2 (tests/fixtures/nodestores.py). Every scan is a cold
`gpuprov scan` (fresh layer cache) in a child process, best of --repeat runs, the scans of a
pair alternating; wall and CPU (user + system) time, the latter less sensitive to a loaded
machine. Target (issue 11): containerd scan / OCI-archive scan <= 1.1.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fixtures.images import Image, Layer  # noqa: E402
from tests.fixtures.nodestores import (  # noqa: E402
    containerd_missing,
    running_containerd,
    write_docker_root,
)

CACHE = Path(os.environ.get("GPUPROV_BENCH_CACHE", Path.home() / ".cache" / "gpuprov-bench"))
VERSION = "v1"
_SCRIPT = Path(sys.executable).parent / "gpuprov"
GPROV = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "gpuprov"]
NAME = "docker.io/bench/node:1"
LIBS = (
    ("usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0", 40),
    ("usr/lib/x86_64-linux-gnu/libcudnn_cnn.so.9.1.0", 24),
    ("usr/local/cuda/lib64/libcublasLt.so.12.4.5.8", 32),
    ("usr/local/cuda/lib64/libcudart.so.12.4.127", 4),
    ("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", 16),
)


def _elf(work: Path) -> bytes:
    source = work / "stub.c"
    source.write_text("int cudnnGetVersion(void){return 90100;}\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(work / "stub.so"), str(source)], check=True
    )
    return (work / "stub.so").read_bytes()


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name, data in members:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def build(work: Path) -> tuple[Image, Path]:
    """The image (three gzip layers) and its OCI archive, named for `ctr images import`."""
    from tests.fixtures.nodestores import write_named_oci_archive

    rng = random.Random(11)
    elf = _elf(work)
    small = [
        (f"srv/app/{i // 500:03d}/file{i:05d}.txt", rng.randbytes(rng.randint(200, 4000)))
        for i in range(20_000)
    ]
    libs = [(path, elf + rng.randbytes(mb * 1024 * 1024)) for path, mb in LIBS]
    status = b"".join(
        f"Package: pkg{i}\nStatus: install ok installed\nVersion: 1.{i}\n\n".encode()
        for i in range(800)
    )
    layers = [
        Layer(tar=_tar([("var/lib/dpkg/status", status), ("etc/os-release", b"ID=debian\n")])),
        Layer(tar=_tar(small)),
        Layer(tar=_tar(libs)),
    ]
    image = Image([Layer(tar=lay.tar, compression="gzip") for lay in layers])
    archive = work / "image.oci.tar"
    write_named_oci_archive(archive, image, NAME)
    return image, archive


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of a child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({status})")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each scan")
    args = parser.parse_args()
    missing = containerd_missing()
    if missing is not None:
        raise SystemExit(f"node_stores bench: {missing}")
    work = CACHE / f"node-stores-{VERSION}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    image, archive = build(work)
    docker_archive = work / "image.docker.tar"
    from tests.fixtures.images import write_docker_archive

    write_docker_archive(docker_archive, image, "bench/node:1")
    docker_root = work / "docker"
    write_docker_root(docker_root, {"bench/node:1": image})
    scratch = work / "scratch"

    def scan(target: str) -> tuple[float, float]:
        cache = scratch / "cache"
        shutil.rmtree(cache, ignore_errors=True)
        return timed(
            [
                *GPROV,
                "scan",
                target,
                "--cache-dir",
                str(cache),
                "-q",
                "-f",
                "json",
                "-o",
                str(scratch / "out.json"),
            ]
        )

    res: dict[str, object] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    res["image"] = {
        "layers": 3,
        "files": 20_000 + len(LIBS) + 2,
        "compressed_bytes": sum(len(lay.stored()) for lay in image.layers),
        "expanded_bytes": sum(len(lay.diff()) for lay in image.layers),
    }
    with running_containerd(work / "containerd") as daemon:
        daemon.import_archive(archive)
        pairs = {
            "containerd_over_oci_archive": (
                f"containerd:{daemon.root}/default:{NAME}",
                f"oci-archive:{archive}",
            ),
            "docker_root_over_docker_archive": (
                f"docker-root:{docker_root}:bench/node:1",
                f"docker-archive:{docker_archive}",
            ),
        }
        for key, (store, reference) in pairs.items():
            scratch.mkdir(parents=True, exist_ok=True)
            scan(reference)  # page cache warm for both alike
            scan(store)
            times: dict[str, list[tuple[float, float]]] = {"store": [], "archive": []}
            for _ in range(args.repeat):
                times["archive"].append(scan(reference))
                times["store"].append(scan(store))
            wall_store = min(t[0] for t in times["store"])
            wall_archive = min(t[0] for t in times["archive"])
            cpu_store = min(t[1] for t in times["store"])
            cpu_archive = min(t[1] for t in times["archive"])
            res[key] = {
                "store_s": round(wall_store, 3),
                "archive_s": round(wall_archive, 3),
                "ratio": round(wall_store / wall_archive, 3),
                "store_cpu_s": round(cpu_store, 3),
                "archive_cpu_s": round(cpu_archive, 3),
                "cpu_ratio": round(cpu_store / cpu_archive, 3),
            }
    res["targets"] = {"containerd_over_oci_archive": 1.1}
    res["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
