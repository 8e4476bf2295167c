"""Scanner benchmark: host and image scans against their lower bounds; prints JSON.

Builds (once, cached under ~/.cache/gpuprov-bench) a host tree of 100,000 small files plus the
real nvidia-cudnn-cu12 9.x and nvidia-cublas-cu12 wheels installed into a site-packages and an
unowned copy of one cuDNN library, then a 3-layer gzip OCI archive and a docker-archive of it,
and a second image sharing the base and GPU layers. Targets are in issue 2 / docs/benchmarks.md.

What runs is the installed artifact: gpuprov's wheel, built from the files git tracks (their
contents in this checkout) and installed, byte-compiled, into a virtualenv of its own under the
cache (rebuilt when those files change; third-party packages come from this venv through a
``.pth`` line, as in tests/test_wheel.py). ``--checkout`` runs this venv's console script
instead (an editable install: its import hook and, unless written before, bytecode compiled
from source on every run); either way PYTHONDONTWRITEBYTECODE is dropped for the scans.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

CACHE = Path(os.environ.get("GPUPROV_BENCH_CACHE", Path.home() / ".cache" / "gpuprov-bench"))
WHEELS = ("nvidia-cudnn-cu12>=9,<10", "nvidia-cublas-cu12")
GPU_PREFIXES = ("libcudnn", "libcublas")
TREE_VERSION = "v1"
SMALL_VERSION = "v3"
SMALL_LIBS = (
    ("libcudnn.so.9.1.0", "libcudnn.so.9"),
    ("libcublas.so.12.4.5.8", "libcublas.so.12"),
    ("libcublasLt.so.12.4.5.8", "libcublasLt.so.12"),
    ("libcudart.so.12.4.127", "libcudart.so.12"),
    ("libnccl.so.2.21.5", "libnccl.so.2"),
)
# The console script users run (start-up included), else the module.
_SCRIPT = Path(sys.executable).parent / "gpuprov"
GPROV = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "gpuprov"]


CHECKOUT = Path(__file__).resolve().parents[1]
#: What the wheel is built from (as tests/test_wheel.py): a clean clone's build inputs.
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "alembic.ini")
WHEEL_TREES = ("gpuprov", "scanner", "app", "migrations")


def installed_gprov() -> list[str]:
    """The console script of gpuprov's wheel installed in a venv of its own (built once per
    content of the tracked files it is built from)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *WHEEL_SOURCES, *WHEEL_TREES],
        cwd=CHECKOUT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = sorted(n for n in listed.split("\0") if n)
    digest = hashlib.sha256(sys.version.encode())
    for name in names:
        digest.update(name.encode() + b"\0" + (CHECKOUT / name).read_bytes() + b"\0")
    home = CACHE / f"installed-{digest.hexdigest()[:16]}"
    script = home / "venv" / "bin" / "gpuprov"
    if (home / "done").exists():
        return [str(script)]
    for old in CACHE.glob("installed-*"):
        shutil.rmtree(old, ignore_errors=True)
    src, wheels, venv = home / "src", home / "wheels", home / "venv"
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CHECKOUT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    offline = ["-q", "--no-deps", "--no-index"]
    sh([*pip, "wheel", *offline, "--no-build-isolation", "-w", str(wheels), str(src)])
    sh([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    [wheel] = wheels.glob("gpuprov-*.whl")
    sh([*pip, "--python", str(python), "install", *offline, str(wheel)])
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    # third-party packages from this venv; .pth lines are not followed, so its editable
    # install of the checkout stays invisible
    (Path(site) / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.rmtree(src)
    (home / "done").write_text("ok")
    return [str(script)]


def sh(cmd: list[str], **kw: object) -> None:
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def fetch_wheels() -> list[Path]:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    have = sorted(dest.glob("*.whl"))
    names = {w.name.split("-")[0] for w in have}
    if not {"nvidia_cudnn_cu12", "nvidia_cublas_cu12"} <= names:
        sh(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux_2_27_x86_64",
                "--platform",
                "manylinux2014_x86_64",
                "--python-version",
                "3.11",
                "-d",
                str(dest),
                *WHEELS,
            ]
        )
        have = sorted(dest.glob("*.whl"))
    return [w for w in have if w.name.split("-")[0] in ("nvidia_cudnn_cu12", "nvidia_cublas_cu12")]


def _is_gpu(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(GPU_PREFIXES) and ".so" in base


def build_tree(wheels: list[Path]) -> Path:
    work = CACHE / f"tree-{TREE_VERSION}"
    root = work / "root"
    if (work / "done").exists():
        return work
    shutil.rmtree(work, ignore_errors=True)
    data = root / "srv" / "data"
    for d in range(1000):
        sub = data / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"f{f:02d}.txt").write_bytes(b"x" * (64 + (d * 100 + f) % 512))
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("bench-host\n")
    site = root / "usr" / "local" / "lib" / "python3.11" / "site-packages"
    sh(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-compile",
            "--target",
            str(site),
            *map(str, wheels),
        ]
    )
    graph = next(site.glob("nvidia/cudnn/lib/libcudnn_graph.so.*"))
    legacy = root / "opt" / "legacy" / "lib"
    legacy.mkdir(parents=True)
    shutil.copy2(graph, legacy / graph.name)
    build_images(work, root)
    (work / "done").write_text("ok")
    return work


def _layer_tar(root: Path, tops: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for top in tops:
            tar.add(root / top, arcname=top)
    return buf.getvalue()


def build_images(work: Path, root: Path) -> None:
    """A 3-layer image as a gzip OCI archive and a docker-archive, plus a second image."""
    layers_raw = [
        _layer_tar(root, ["etc", "srv"]),
        _layer_tar(root, ["usr"]),
        _layer_tar(root, ["opt"]),
    ]
    extra = io.BytesIO()
    with tarfile.open(fileobj=extra, mode="w") as tar:
        info = tarfile.TarInfo("srv/app/VERSION")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"2.0\n"))
    second_raw = [layers_raw[0], layers_raw[1], extra.getvalue()]
    gz_cache: dict[bytes, bytes] = {}

    def gz(raw: bytes) -> bytes:
        key = hashlib.sha256(raw).digest()
        if key not in gz_cache:
            gz_cache[key] = gzip.compress(raw, compresslevel=6, mtime=0)
        return gz_cache[key]

    for name, raws in (("image1", layers_raw), ("image2", second_raw)):
        blobs: dict[str, bytes] = {}
        descs, diff_ids = [], []
        for raw in raws:
            comp = gz(raw)
            dg = "sha256:" + hashlib.sha256(comp).hexdigest()
            blobs[dg] = comp
            diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
            descs.append(
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": dg,
                    "size": len(comp),
                }
            )
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Env": ["PATH=/usr/bin"]},
                "rootfs": {"type": "layers", "diff_ids": diff_ids},
            }
        ).encode()
        cdg = "sha256:" + hashlib.sha256(config).hexdigest()
        blobs[cdg] = config
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": cdg,
                    "size": len(config),
                },
                "layers": descs,
            }
        ).encode()
        mdg = "sha256:" + hashlib.sha256(manifest).hexdigest()
        blobs[mdg] = manifest
        index = json.dumps(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": mdg,
                        "size": len(manifest),
                        "annotations": {"org.opencontainers.image.ref.name": "bench"},
                    }
                ],
            }
        ).encode()
        with tarfile.open(work / f"{name}.oci.tar", "w") as tar:
            _add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            _add(tar, "index.json", index)
            for dg, blob in blobs.items():
                _add(tar, "blobs/sha256/" + dg.split(":")[1], blob)
        if name == "image1":
            # docker-archive (legacy `docker save` form): uncompressed layer.tar per layer
            with tarfile.open(work / "image1.docker.tar", "w") as tar:
                layer_paths = []
                for i, raw in enumerate(raws):
                    p = f"layer{i}/layer.tar"
                    _add(tar, p, raw)
                    layer_paths.append(p)
                _add(tar, cdg.split(":")[1] + ".json", config)
                _add(
                    tar,
                    "manifest.json",
                    json.dumps(
                        [
                            {
                                "Config": cdg.split(":")[1] + ".json",
                                "RepoTags": ["bench:latest"],
                                "Layers": layer_paths,
                            }
                        ]
                    ).encode(),
                )


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


#: The scans' environment: bytecode is read and written as on an ordinary install.
SCAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


#: Runs a command and prints its wall time, peak RSS and CPU time as JSON. The scans are started
#: from this small interpreter, not from the bench: a child's peak RSS counts the pages it shared
#: with its parent before exec, and the bench holds gigabytes after building the images (a first
#: run reported 4.8 GB for a scan that peaks at 125 MB).
_LAUNCHER = """
import json, os, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
wall = time.perf_counter() - t
print(json.dumps([wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime,
                  os.waitstatus_to_exitcode(status)]))
"""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run a command; return (wall seconds, peak RSS in MB, CPU seconds) of the child."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *cmd],
        env=env or SCAN_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    wall, rss, cpu, code = json.loads(out)
    if code not in (0, 1):
        raise SystemExit(f"command failed ({code}): {' '.join(cmd)}")
    return wall, rss, cpu


def host_lower_bound(root: Path) -> float:
    script = (
        f"find {root} -type f \\( -name 'libcudnn*.so*' -o -name 'libcublas*.so*' \\) -print0 "
        "| xargs -0 -n1 -P2 openssl dgst -sha256 >/dev/null"
    )
    t = time.perf_counter()
    sh(["bash", "-c", script])
    return time.perf_counter() - t


def _tar_hash_gpu(chunks: Iterator[bytes]) -> int:
    """Walk a tar stream with the least work possible, hashing only GPU library members."""
    buf = bytearray()
    hashed = 0
    it = iter(chunks)

    def fill(n: int) -> bool:
        while len(buf) < n:
            c = next(it, None)
            if c is None:
                return False
            buf.extend(c)
        return True

    long_name: str | None = None
    while fill(512):
        header = bytes(buf[:512])
        del buf[:512]
        if header == b"\0" * 512:
            break
        name = header[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
        prefix = header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace")
        if prefix:
            name = prefix + "/" + name
        size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        typeflag = header[156:157]
        padded = (size + 511) & ~511
        if typeflag in (b"x", b"L"):
            fill(padded)
            data = bytes(buf[:size])
            del buf[:padded]
            if typeflag == b"L":
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "replace")
            else:
                for rec in data.decode("utf-8", "replace").split("\n"):
                    if " path=" in rec:
                        long_name = rec.split(" path=", 1)[1]
            continue
        if long_name is not None:
            name, long_name = long_name, None
        h = hashlib.sha256() if typeflag in (b"0", b"\0") and _is_gpu(name) else None
        remaining = padded
        while remaining:
            if not buf and not fill(1):
                return hashed
            take = min(remaining, len(buf))
            if h is not None:
                body = min(take, max(size - (padded - remaining), 0))
                h.update(memoryview(buf)[:body])
                hashed += body
            del buf[:take]
            remaining -= take
    return hashed


def _blob_chunks(
    fh: BinaryIO, length: int, compressed: bool, verify: bool = False
) -> Iterator[bytes]:
    d = zlib.decompressobj(31) if compressed else None
    digest = hashlib.sha256() if verify else None
    left = length
    while left:
        raw = fh.read(min(1 << 20, left))
        if not raw:
            break
        left -= len(raw)
        if digest is not None:
            digest.update(raw)
        yield d.decompress(raw) if d is not None else raw
    if d is not None:
        yield d.flush()


def image_lower_bound(archive: Path, compressed: bool, verify: bool = False) -> float:
    """One sequential pass: decompress every layer, hash only the GPU files (zlib, 1 MiB reads).

    ``verify``: also hash each layer blob, the digest check a scanner owes its layer cache
    (`docker save` layers are uncompressed, so this doubles the hashing there)."""
    t = time.perf_counter()
    with tarfile.open(archive) as outer:
        members = [m for m in outer.getmembers() if m.isfile()]
    with open(archive, "rb") as fh:
        for m in members:
            if not (m.name.startswith("blobs/") or m.name.endswith("layer.tar")):
                continue
            fh.seek(m.offset_data)
            head = fh.read(2)
            fh.seek(m.offset_data)
            gz = head == b"\x1f\x8b"
            if not gz and not m.name.endswith("layer.tar"):
                continue
            _tar_hash_gpu(_blob_chunks(fh, m.size, compressed and gz, verify))
    return time.perf_counter() - t


def build_small_tree() -> Path:
    """A ~7,000-file host root: small text files plus a few compiled stand-in GPU libraries
    (shared objects built here with the C compiler, each with a soname and 32 MiB of data, the
    size of a mid-sized CUDA library): the cold scan hashes 160 MiB, the warm rescan reuses the
    listing and file-facts caches, so it is start-up and the report."""
    work = CACHE / f"small-{SMALL_VERSION}"
    root = work / "root"
    if (work / "done").exists():
        return root
    shutil.rmtree(work, ignore_errors=True)
    data = root / "srv" / "data"
    for d in range(70):
        sub = data / f"d{d:02d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"f{f:02d}.txt").write_bytes(b"x" * (64 + (d * 100 + f) % 512))
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    src = work / "stand_in.c"
    for name, soname in SMALL_LIBS:
        src.write_text(
            f'const char version_tag[] = "{name}";\n'
            "const char padding[32 << 20] = {1};\n"
            "int stand_in(void) { return (int)sizeof padding; }\n"
        )
        sh(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(lib / name), str(src)])
        (lib / soname).symlink_to(name)
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("bench-small\n")
    (work / "done").write_text("ok")
    return root


def bench_warm_host(best: Callable[..., Any], scan: Callable[..., Any], scratch: Path) -> dict:
    """Cold scan and warm rescan of the ~7,000-file root (start-up dominates the rescan)."""
    root = build_small_tree()
    files = sum(1 for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    cold = best(lambda: scan(str(root), scratch / "c-small", True))
    warm = best(lambda: scan(str(root), scratch / "c-small", False))
    return {
        "files": files,
        "cold_s": round(cold[0], 3),
        "warm_s": round(warm[0], 3),
        "warm_over_cold": round(warm[0] / cold[0], 3),
        # user + system CPU of the best run (load moves it less than wall time; the cold
        # scan's hashing threads make its CPU time exceed its wall time)
        "cold_cpu_s": round(cold[2], 3),
        "warm_cpu_s": round(warm[2], 3),
        "targets": {"warm_over_cold": 0.25},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1, help="take the best of N runs")
    parser.add_argument(
        "--only",
        choices=("host", "warm-host", "image"),
        action="append",
        help="run only these scenarios (repeatable): host = the 100,000-file root, warm-host ="
        " the ~7,000-file cold/warm pair (no download), image = the gzip OCI archive against"
        " its inflate-only bound; default: all, plus docker-archive and the second image",
    )
    parser.add_argument(
        "--checkout",
        action="store_true",
        help="run this venv's console script (the editable checkout), not the installed wheel",
    )
    args = parser.parse_args()
    gprov = GPROV if args.checkout else installed_gprov()
    only = set(args.only or ())
    everything = not only
    scratch = CACHE / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    out = scratch / "out.json"
    report = ["-f", "cyclonedx", "-o", str(out)]

    def best(fn):  # type: ignore[no-untyped-def]
        return min(
            (fn() for _ in range(args.repeat)), key=lambda r: r[0] if isinstance(r, tuple) else r
        )

    def scan(target: str, cache: Path, fresh: bool) -> tuple[float, float, float]:
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        out.unlink(missing_ok=True)
        figures = timed([*gprov, "scan", target, "--cache-dir", str(cache), "-q", *report])
        # Exit status 1 is a finding, but a crash exits 1 too: no report, no figure.
        if not out.exists():
            raise SystemExit(f"scan of {target} wrote no report")
        return figures

    res: dict[str, Any] = {
        "gpuprov": "checkout (editable)" if args.checkout else "installed wheel",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if everything or "warm-host" in only:
        res["warm_host_7k"] = bench_warm_host(best, scan, scratch)
    if not (everything or only & {"host", "image"}):
        print(json.dumps(res, indent=2))
        return
    wheels = fetch_wheels()
    work = build_tree(wheels)
    root = work / "root"
    # Warm the page cache once so every figure below reads from memory alike.
    host_lower_bound(root)
    if everything or "host" in only:
        lb_host = best(lambda: host_lower_bound(root))
        cold_host = best(lambda: scan(str(root), scratch / "c-host", True))
        warm_host = best(lambda: scan(str(root), scratch / "c-host", False))
        gpu_bytes = sum(
            p.stat().st_size for p in root.rglob("*") if p.is_file() and _is_gpu(p.name)
        )
        res["gpu_library_bytes"] = gpu_bytes
        res["host"] = {
            "lower_bound_s": round(lb_host, 3),
            "cold_s": round(cold_host[0], 3),
            "warm_s": round(warm_host[0], 3),
            "cold_over_lower_bound": round(cold_host[0] / lb_host, 3),
            "warm_over_cold": round(warm_host[0] / cold_host[0], 3),
            "targets": {"cold_over_lower_bound": 1.5, "warm_over_cold": 0.25},
        }
    if everything or "image" in only:
        oci_tar = work / "image1.oci.tar"
        lb_oci = best(lambda: image_lower_bound(oci_tar, True))
        lb_oci_v = best(lambda: image_lower_bound(oci_tar, True, True))
        oci = best(lambda: scan(f"oci-archive:{oci_tar}", scratch / "c-oci", True))
        image: dict[str, Any] = {
            "oci_archive": {
                "lower_bound_s": round(lb_oci, 3),
                "scan_s": round(oci[0], 3),
                "ratio": round(oci[0] / lb_oci, 3),
                "lower_bound_with_digest_check_s": round(lb_oci_v, 3),
                "ratio_with_digest_check": round(oci[0] / lb_oci_v, 3),
                "peak_rss_mb": round(oci[1], 1),
            },
            "targets": {"ratio": 1.15, "peak_rss_mb": 300, "second_over_first": 0.25},
        }
        if everything:
            docker_tar = work / "image1.docker.tar"
            lb_docker = best(lambda: image_lower_bound(docker_tar, False))
            lb_docker_v = best(lambda: image_lower_bound(docker_tar, False, True))
            docker = best(lambda: scan(f"docker-archive:{docker_tar}", scratch / "c-docker", True))
            second = best(
                lambda: (
                    scan(f"oci-archive:{oci_tar}", scratch / "c-2", True),
                    scan(f"oci-archive:{work / 'image2.oci.tar'}", scratch / "c-2", False),
                )[1]
            )
            image["docker_archive"] = {
                "lower_bound_s": round(lb_docker, 3),
                "scan_s": round(docker[0], 3),
                "ratio": round(docker[0] / lb_docker, 3),
                "lower_bound_with_digest_check_s": round(lb_docker_v, 3),
                "ratio_with_digest_check": round(docker[0] / lb_docker_v, 3),
                "peak_rss_mb": round(docker[1], 1),
            }
            image["second_image_s"] = round(second[0], 3)
            image["second_over_first"] = round(second[0] / oci[0], 3)
        res["image"] = image
    res["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
