"""The acceptance "world" of the end-to-end tests: a host tree and the same root as an image.

Built from real-looking inputs only: compiled fake cuDNN 9 sub-libraries and CUDA libraries
(tests/fixtures/elf.py), real ``.deb`` packages installed the dpkg way, a real RPM installed
into an sqlite rpmdb, a real wheel installed by pip, a conda prefix record. On top: a tampered
library per digest algorithm, unowned copies, a mixed cuDNN directory, symlink chains, symlinks
that point out of the root and a symlink loop. The image variant adds a base layer of libraries
that later layers delete (file whiteouts, a directory whiteout, an opaque directory).

`World.expected` is the exact answer, derived from the inputs (bytes on disk, package specs),
never from the scanner: every GPU library with its path, aliases, SHA-256, owner purl, family,
component, version, CUDA major and integrity verdict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scanner.model import ScanResult
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.fixtures import packages as pk

MULTIARCH = "/usr/lib/x86_64-linux-gnu"
CUDA_DIR = "/usr/local/cuda-12.4/lib64"
SITE = "/usr/local/lib/python3.11/dist-packages"
APP = "/opt/app/lib"
MIXED = "/opt/mixed/lib"
CONDA = "/opt/conda"
HOSTNAME = "gpu-node-7"
MACHINE_ID = "4c4c4544004e3510804bb7c04f4d3732"
DISTRO = "debian-12"

CUDNN_VERSION = (9, 1, 0)
CUDNN_BUILD = 70
CUDNN_DEB = "libcudnn9-cuda-12"
CUDNN_DEB_VERSION = "9.1.0.70-1"
CUDART_DEB = "cuda-cudart-12-4"
CUDART_VERSION = "12.4.127"
CUDART_DEB_VERSION = "12.4.127-1"
NCCL_RPM = "libnccl"
NCCL_VERSION = "2.21.5"
NCCL_RELEASE = "1+cuda12.4"
CUBLAS_WHEEL = "nvidia-cublas-cu12"
CUBLAS_VERSION = "12.4.5.8"
CURAND_CONDA = "libcurand"
CURAND_VERSION = "10.3.5.147"
NVML_VERSION = "535.309.01"
MIXED_OPS_VERSION = (9, 3, 0)
MIXED_OPS_BUILD = 75

#: The libraries of the image's base layer that upper layers delete: none may be reported.
DELETED = (
    f"{MULTIARCH}/libcudnn_ops_infer.so.8.9.7",
    f"{MULTIARCH}/libcudnn_ops_infer.so.8",
    "/opt/old/lib/libnccl.so.2.18.1",
    "/usr/local/cuda-11.8/lib64/libcudart.so.11.8.89",
)


@dataclass(frozen=True)
class Expected:
    """What the scan must report for one GPU library file."""

    path: str
    aliases: tuple[str, ...]
    sha256: str
    owner: str | None  # purl
    family: str
    component: str
    version: str
    cuda_major: int | None
    integrity: str
    layer: str | None = None  # digest of the image layer holding the final bytes (images)


@dataclass
class World:
    """A host root, the same root as a 3-layer image, and the expected scan answer."""

    base: Path
    root: Path
    outside: Path  # a real GPU library outside the root that symlinks point to
    expected: dict[str, Expected]
    image: im.Image
    layer_of: dict[str, int]  # library path -> layer index in `image`
    mixed_paths: tuple[str, ...]
    _targets: dict[str, tuple[str, im.Built]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def image_target(self, fmt: str) -> tuple[str, im.Built]:
        """The image written in ``fmt`` (one of `tests.fixtures.images.FORMATS`), once."""
        with self._lock:
            if fmt not in self._targets:
                directory = self.base / f"image-{fmt}"
                target = im.write_image(directory, self.image, fmt, tag="12.4-cudnn9")
                uncompressed = fmt in ("docker-archive", "docker25")
                built = (self.image.uncompressed() if uncompressed else self.image).build()
                self._targets[fmt] = (target, built)
            return self._targets[fmt]

    def expected_for_image(self, built: im.Built) -> dict[str, Expected]:
        """`expected` with each library's layer digest filled in for one written image."""
        digests = built.layer_digests
        return {p: _replace(e, layer=digests[self.layer_of[p]]) for p, e in self.expected.items()}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def flip_byte(data: bytes) -> bytes:
    """``data`` with one byte changed inside the compiler's ``.comment`` note (not loaded, so
    the library stays a valid ELF file with the same version facts)."""
    at = data.find(b"GCC: (")
    assert at > 0, "no .comment section to tamper with"
    pos = at + 2
    return data[:pos] + bytes([data[pos] ^ 0x20]) + data[pos + 1 :]


def _rel(path: str) -> str:
    return path.lstrip("/")


def _deb_purl(name: str, version: str) -> str:
    return f"pkg:deb/debian/{name}@{version}?arch=amd64&distro={DISTRO}"


def build_world(base: Path) -> World:
    """Build the host tree under ``base/root`` and describe the image; see the module doc."""
    base.mkdir(parents=True, exist_ok=True)
    work = base / "work"
    libs = base / "libs"
    root = base / "root"
    outside = base / "outside"
    for d in (work, libs, root, outside):
        d.mkdir(parents=True, exist_ok=True)
    expected: dict[str, Expected] = {}

    pk.make_usrmerge(root)
    pk.write_os_release(root, "debian", "12")
    (root / "etc" / "hostname").write_text(HOSTNAME + "\n")
    (root / "etc" / "machine-id").write_text(MACHINE_ID + "\n")

    # --- dpkg: cuDNN 9 (tarball-style names + symlink chains) and cudart ------------------
    cudnn = elf.build_cudnn_install(
        libs / "cudnn9", CUDNN_VERSION, build=CUDNN_BUILD, cudart=12040, symlinks=False
    )
    cudnn_bytes = {comp: path.read_bytes() for comp, path in cudnn.items()}
    ver = ".".join(map(str, CUDNN_VERSION))
    cudnn_files = {f"{MULTIARCH}/lib{c}.so.{ver}": b for c, b in cudnn_bytes.items()}
    cudnn_links: dict[str, str] = {}
    for comp in cudnn_bytes:
        cudnn_links[f"{MULTIARCH}/lib{comp}.so.9"] = f"lib{comp}.so.{ver}"
        cudnn_links[f"{MULTIARCH}/lib{comp}.so"] = f"lib{comp}.so.9"
    cudart = elf.build_cuda_library(libs / "cuda", "cudart", CUDART_VERSION).read_bytes()
    debs = [
        pk.DebSpec(
            name=CUDNN_DEB,
            version=CUDNN_DEB_VERSION,
            multi_arch="same",
            source="cudnn",
            files=cudnn_files,
            symlinks=cudnn_links,
        ),
        pk.DebSpec(
            name=CUDART_DEB,
            version=CUDART_DEB_VERSION,
            files={f"{CUDA_DIR}/libcudart.so.{CUDART_VERSION}": cudart},
            symlinks={f"{CUDA_DIR}/libcudart.so.12": f"libcudart.so.{CUDART_VERSION}"},
        ),
    ]
    pk.dpkg_install(root, debs, work)
    os.symlink("cuda-12.4", root / "usr/local/cuda")
    deb_owner = _deb_purl(CUDNN_DEB, CUDNN_DEB_VERSION)
    full = f"{ver}.{CUDNN_BUILD}"
    for comp, data in cudnn_bytes.items():
        path = f"{MULTIARCH}/lib{comp}.so.{ver}"
        aliases = [f"{MULTIARCH}/lib{comp}.so", f"{MULTIARCH}/lib{comp}.so.9"]
        if comp == "cudnn":
            # an absolute in-root link from elsewhere also lands on the real file
            aliases.append(f"{APP}/libcudnn.so.9")
        expected[path] = Expected(
            path,
            tuple(sorted(aliases)),
            sha256_hex(data),
            deb_owner,
            "cudnn",
            comp,
            full,
            12,
            "verified",
        )
    cudart_path = f"{CUDA_DIR}/libcudart.so.{CUDART_VERSION}"
    expected[cudart_path] = Expected(
        cudart_path,
        (f"{CUDA_DIR}/libcudart.so.12",),
        sha256_hex(cudart),
        _deb_purl(CUDART_DEB, CUDART_DEB_VERSION),
        "cudart",
        "cudart",
        CUDART_VERSION,
        12,
        "verified",
    )

    # tampered after installation (dpkg records MD5): one byte of libcudnn_ops
    ops_path = f"{MULTIARCH}/libcudnn_ops.so.{ver}"
    tampered_ops = flip_byte(cudnn_bytes["cudnn_ops"])
    (root / _rel(ops_path)).write_bytes(tampered_ops)
    expected[ops_path] = _replace(
        expected[ops_path], sha256=sha256_hex(tampered_ops), integrity="modified"
    )

    # --- rpm: NCCL into an sqlite rpmdb ------------------------------------------------------
    nccl = elf.build_cuda_library(
        libs / "cuda", "nccl", NCCL_VERSION, strings=("libcudart.so.12",)
    ).read_bytes()
    nccl_path = f"/usr/lib64/libnccl.so.{NCCL_VERSION}"
    rpm = pk.build_rpm(
        pk.RpmSpec(
            name=NCCL_RPM,
            version=NCCL_VERSION,
            release=NCCL_RELEASE,
            arch="x86_64",
            files={nccl_path: nccl},
            symlinks={"/usr/lib64/libnccl.so.2": f"libnccl.so.{NCCL_VERSION}"},
            vendor="NVIDIA Corporation",
        ),
        work,
    )
    pk.install_rpm(root, [rpm])
    expected[nccl_path] = Expected(
        nccl_path,
        ("/usr/lib64/libnccl.so.2",),
        sha256_hex(nccl),
        # the purl spec percent-encodes "+" in a version; the namespace is the distro ID
        f"pkg:rpm/debian/{NCCL_RPM}@{NCCL_VERSION}-{NCCL_RELEASE.replace('+', '%2B')}"
        f"?arch=x86_64&distro={DISTRO}",
        "nccl",
        "nccl",
        NCCL_VERSION,
        12,
        "verified",
    )

    # --- pip: a cuBLAS wheel; cublasLt tampered (pip records SHA-256) -------------------------
    cublaslt = elf.build_cuda_library(
        libs / "cuda", "cublasLt", CUBLAS_VERSION, filename="libcublasLt.so.12"
    )
    cublas = elf.build_cuda_library(
        libs / "cuda", "cublas", CUBLAS_VERSION, filename="libcublas.so.12", needed=[cublaslt]
    ).read_bytes()
    wheel = pk.build_wheel(
        work,
        CUBLAS_WHEEL,
        CUBLAS_VERSION,
        {
            "nvidia/__init__.py": b"",
            "nvidia/cublas/__init__.py": b"",
            "nvidia/cublas/lib/libcublas.so.12": cublas,
            "nvidia/cublas/lib/libcublasLt.so.12": cublaslt.read_bytes(),
        },
    )
    pk.pip_install(root / _rel(SITE), [wheel])
    pip_owner = f"pkg:pypi/{CUBLAS_WHEEL}@{CUBLAS_VERSION}"
    lib_dir = f"{SITE}/nvidia/cublas/lib"
    expected[f"{lib_dir}/libcublas.so.12"] = Expected(
        f"{lib_dir}/libcublas.so.12",
        (),
        sha256_hex(cublas),
        pip_owner,
        "cublas",
        "cublas",
        CUBLAS_VERSION,
        12,
        "verified",
    )
    tampered_lt = flip_byte(cublaslt.read_bytes())
    (root / _rel(f"{lib_dir}/libcublasLt.so.12")).write_bytes(tampered_lt)
    expected[f"{lib_dir}/libcublasLt.so.12"] = Expected(
        f"{lib_dir}/libcublasLt.so.12",
        (),
        sha256_hex(tampered_lt),
        pip_owner,
        "cublasLt",
        "cublasLt",
        CUBLAS_VERSION,
        12,
        "modified",
    )

    # --- conda: curand ----------------------------------------------------------------------
    curand = elf.build_cuda_library(libs / "cuda", "curand", CURAND_VERSION).read_bytes()
    curand_rel = f"lib/libcurand.so.{CURAND_VERSION}"
    pk.write_conda_package(
        root / _rel(CONDA),
        CURAND_CONDA,
        CURAND_VERSION,
        "h99ab3db_0",
        files={curand_rel: curand},
        softlinks={"lib/libcurand.so.10": f"libcurand.so.{CURAND_VERSION}"},
    )
    curand_path = f"{CONDA}/{curand_rel}"
    expected[curand_path] = Expected(
        curand_path,
        (f"{CONDA}/lib/libcurand.so.10",),
        sha256_hex(curand),
        f"pkg:conda/{CURAND_CONDA}@{CURAND_VERSION}?build=h99ab3db_0"
        "&channel=conda-forge&subdir=linux-64",
        "curand",
        "curand",
        CURAND_VERSION,
        None,
        "verified",
    )

    # --- unowned: copies, a driver library, a mixed cuDNN directory --------------------------
    app = root / _rel(APP)
    app.mkdir(parents=True)
    (app / "libcudnn_graph.so.9").write_bytes(cudnn_bytes["cudnn_graph"])
    (app / "libcudart.so.12").write_bytes(cudart)
    os.symlink(f"{MULTIARCH}/libcudnn.so.{ver}", app / "libcudnn.so.9")  # absolute, in root
    expected[f"{APP}/libcudnn_graph.so.9"] = Expected(
        f"{APP}/libcudnn_graph.so.9",
        (),
        sha256_hex(cudnn_bytes["cudnn_graph"]),
        None,
        "cudnn",
        "cudnn_graph",
        full,
        12,
        "unowned",
    )
    expected[f"{APP}/libcudart.so.12"] = Expected(
        f"{APP}/libcudart.so.12",
        (),
        sha256_hex(cudart),
        None,
        "cudart",
        "cudart",
        CUDART_VERSION,
        12,
        "unowned",
    )
    nvml = elf.build_driver_library(libs / "driver", "nvidia-ml", NVML_VERSION).read_bytes()
    nvml_path = f"{MULTIARCH}/libnvidia-ml.so.{NVML_VERSION}"
    (root / _rel(nvml_path)).write_bytes(nvml)
    os.symlink(f"libnvidia-ml.so.{NVML_VERSION}", root / _rel(f"{MULTIARCH}/libnvidia-ml.so.1"))
    expected[nvml_path] = Expected(
        nvml_path,
        (f"{MULTIARCH}/libnvidia-ml.so.1",),
        sha256_hex(nvml),
        None,
        "nvidia-ml",
        "nvidia-ml",
        NVML_VERSION,
        None,
        "unowned",
    )

    mixed = root / _rel(MIXED)
    mixed_specs = {
        "cudnn_graph": (CUDNN_VERSION, CUDNN_BUILD),
        "cudnn_ops": (MIXED_OPS_VERSION, MIXED_OPS_BUILD),
        "cudnn_cnn": (CUDNN_VERSION, CUDNN_BUILD),
    }
    for comp, (version, build) in mixed_specs.items():
        data = elf.build_cudnn_library(
            libs / "mixed", comp, version, build=build, filename=f"lib{comp}.so.9"
        ).read_bytes()
        (mixed / f"lib{comp}.so.9").parent.mkdir(parents=True, exist_ok=True)
        (mixed / f"lib{comp}.so.9").write_bytes(data)
        # only libcudnn_graph carries the build number (its marker string); the others carry
        # the version integers
        v = ".".join(map(str, version)) + (f".{build}" if comp == "cudnn_graph" else "")
        expected[f"{MIXED}/lib{comp}.so.9"] = Expected(
            f"{MIXED}/lib{comp}.so.9", (), sha256_hex(data), None, "cudnn", comp, v, 12, "unowned"
        )

    # --- hostile links: out of the root (absolute host path, climbing ..), a loop -----------
    outside_lib = elf.build_cudnn_library(outside, "cudnn_adv", (9, 9, 9), build=1)
    os.symlink(str(outside_lib), app / "libcudnn_adv.so.9")
    climb = os.path.relpath(outside_lib, app)
    assert climb.startswith("../../../../")
    os.symlink(climb, app / "libcudnn_engines_precompiled.so.9")
    os.symlink("../" * 12 + "etc/passwd", app / "libcudnn_heuristic.so.9")
    # a directory link to the outside, and a library link through it
    os.symlink(str(outside), root / "opt/ext")
    os.symlink(f"../../ext/{outside_lib.name}", app / "libcudnn_ops.so.9")
    os.symlink("libcudnn_cnn.so", app / "libcudnn_cnn.so.9")
    os.symlink("libcudnn_cnn.so.9", app / "libcudnn_cnn.so")

    # the tampered libcudnn_ops of the image comes from the application layer
    layer_of = {p: (1 if _in_layer1(p) and p != ops_path else 2) for p in expected}
    world = World(
        base=base,
        root=root,
        outside=outside_lib,
        expected=expected,
        image=_image(root, cudnn_bytes, libs),
        layer_of=layer_of,
        mixed_paths=tuple(f"{MIXED}/lib{c}.so.9" for c in mixed_specs),
    )
    return world


def _replace(e: Expected, **changes: object) -> Expected:
    return dataclasses.replace(e, **changes)  # type: ignore[arg-type]


# --- the image ---------------------------------------------------------------------------

_LAYER2_PREFIXES = (SITE, CONDA, "/opt/app", "/opt/mixed")


def _in_layer1(path: str) -> bool:
    return not path.startswith(_LAYER2_PREFIXES)


def _walk(root: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            host = Path(dirpath) / name
            yield "/" + host.relative_to(root).as_posix(), host, host.lstat()


def _member(path: str, host: Path, st: os.stat_result) -> im.Member:
    name = path.lstrip("/")
    if stat.S_ISLNK(st.st_mode):
        return im.symlink(name, os.readlink(host))
    if stat.S_ISDIR(st.st_mode):
        return im.directory(name)
    return im.file(name, host.read_bytes(), mode=stat.S_IMODE(st.st_mode))


def members_of(root: Path, keep: Callable[[str], bool] = lambda path: True) -> list[im.Member]:
    """Tar members (files, directories, symlinks) of the tree under ``root`` whose absolute
    path inside the root ``keep`` accepts, parents before children."""
    return [_member(path, host, st) for path, host, st in _walk(root) if keep(path)]


def _image(root: Path, cudnn_bytes: dict[str, bytes], libs: Path) -> im.Image:
    """The root as three layers: a base holding libraries later deleted (gzip), the system
    packages (zstd; the original libcudnn_ops), the application layer (plain; pip, conda,
    unowned copies, and the tampered libcudnn_ops overwriting layer 1's)."""
    old8 = elf.build_cudnn_library(libs / "old", "cudnn_ops_infer", (8, 9, 7), build=12)
    nccl_old = elf.build_cuda_library(libs / "old", "nccl", "2.18.1")
    cudart11 = elf.build_cuda_library(libs / "old", "cudart", "11.8.89")
    base = im.Layer(
        [
            im.directory("usr"),
            im.directory("usr/lib"),
            im.directory("usr/lib/x86_64-linux-gnu"),
            im.file(_rel(DELETED[0]), old8.read_bytes()),
            im.symlink(_rel(DELETED[1]), "libcudnn_ops_infer.so.8.9.7"),
            im.directory("opt"),
            im.directory("opt/old"),
            im.directory("opt/old/lib"),
            im.file(_rel(DELETED[2]), nccl_old.read_bytes()),
            im.directory("usr/local"),
            im.directory("usr/local/cuda-11.8"),
            im.directory("usr/local/cuda-11.8/lib64"),
            im.file(_rel(DELETED[3]), cudart11.read_bytes()),
        ],
        compression="gzip",
    )
    system: list[im.Member] = [
        im.whiteout(_rel(DELETED[0])),
        im.whiteout(_rel(DELETED[1])),
        im.whiteout("usr/local/cuda-11.8"),
        im.opaque("opt/old/lib"),
        im.file("opt/old/lib/README", "replaced\n"),
    ]
    app: list[im.Member] = []
    ops = f"{MULTIARCH}/libcudnn_ops.so.9.1.0"
    for path, host, st in _walk(root):
        if path in ("/opt", "/opt/old"):
            continue
        member = _member(path, host, st)
        if path == ops:
            system.append(im.file(member.name, cudnn_bytes["cudnn_ops"]))
            app.append(member)
        elif _in_layer1(path):
            system.append(member)
        else:
            app.append(member)
    return im.Image(
        [base, im.Layer(system, compression="zstd"), im.Layer(app, compression="none")],
        env=(
            "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
            "CUDA_VERSION=12.4.1",
            "NV_CUDNN_VERSION=9.1.0.70-1",
            "NV_CUDNN_PACKAGE_NAME=libcudnn9-cuda-12",
        ),
        labels={"com.nvidia.cudnn.version": "9.1.0.70-1", "maintainer": "gpuprov tests"},
    )


# --- shared helpers for the tests ----------------------------------------------------------

_worlds: dict[str, World] = {}
_worlds_lock = threading.Lock()


def world_at(base: Path) -> World:
    """The world built once per process under ``base`` (session-scoped across modules)."""
    key = str(base)
    with _worlds_lock:
        if key not in _worlds:
            if base.exists():
                shutil.rmtree(base)
            _worlds[key] = build_world(base)
        return _worlds[key]


def by_path(result: ScanResult) -> dict[str, Expected]:
    """The scan's libraries in the shape of `Expected`, keyed by path."""
    out: dict[str, Expected] = {}
    for lib in result.libraries:
        out[lib.ref.path] = Expected(
            path=lib.ref.path,
            aliases=tuple(sorted(lib.aliases)),
            sha256=lib.digests.sha256 if lib.digests else "",
            owner=lib.owner.purl if lib.owner else None,
            family=lib.ident.family,
            component=lib.ident.component,
            version=lib.ident.version or "",
            cuda_major=lib.ident.cuda_major,
            integrity=lib.integrity.value,
            layer=lib.ref.layer,
        )
    return out
