"""A rich sample image shared by the source tests: three layers (gzip, zstd, plain) with file
and opaque whiteouts, hard links, symlink chains, links out of the root and loops."""

from __future__ import annotations

from tests.fixtures.images import (
    Image,
    Layer,
    directory,
    file,
    hardlink,
    opaque,
    symlink,
    whiteout,
)

CUDNN = b"\x7fELF cudnn 9.1.0 " + bytes(range(256)) * 400
CUDNN_OLD = b"\x7fELF cudnn 8.9.7 " * 1000
CUDART = b"\x7fELF cudart 12.4 " * 300
NCCL = b"\x7fELF nccl " * 50
STATUS = b"Package: libcudnn9\nVersion: 9.1.0.70-1\n"


def rich_image(middle_compression: str = "zstd") -> Image:
    """Three layers (gzip, zstd, plain) exercising whiteouts, links and metadata."""
    base = Layer(
        [
            directory("usr"),
            directory("usr/lib"),
            directory("usr/lib/x86_64-linux-gnu"),
            file("usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7", CUDNN_OLD),
            symlink("usr/lib/x86_64-linux-gnu/libcudnn.so.8", "libcudnn.so.8.9.7"),
            file("usr/lib/x86_64-linux-gnu/libcublas.so.12", b"cublas"),
            directory("opt/old"),
            file("opt/old/libnccl.so.2", NCCL),
            file("opt/old/keep.txt", "k"),
            file("var/lib/dpkg/status", STATUS),
            file("var/lib/dpkg/info/libcudnn8.list", "/usr/lib/x\n"),
            file("etc/passwd", "root:x:0:0\n"),
            symlink("lib", "usr/lib"),
        ],
        compression="gzip",
    )
    middle = Layer(
        [
            whiteout("usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7"),
            whiteout("usr/lib/x86_64-linux-gnu/libcudnn.so.8"),
            whiteout("var/lib/dpkg/info/libcudnn8.list"),
            opaque("opt/old"),
            file("opt/old/new.txt", "n"),
            file("usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", CUDNN),
            symlink("usr/lib/x86_64-linux-gnu/libcudnn.so.9", "libcudnn.so.9.1.0"),
            symlink("usr/lib/x86_64-linux-gnu/libcudnn.so", "libcudnn.so.9"),
            hardlink("opt/libcudnn_copy.so.9", "usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0"),
            file("usr/local/cuda-12.4/lib64/libcudart.so.12.4.127", CUDART),
            symlink("usr/local/cuda", "cuda-12.4"),
            symlink("usr/local/cuda-12.4/lib64/libcudart.so.12", "libcudart.so.12.4.127"),
            # a link that climbs out of the root lands inside it
            symlink(
                "usr/lib/libcudart.so", "../../../../../../usr/local/cuda/lib64/libcudart.so.12"
            ),
            symlink("usr/lib/libcudnn_abs.so", "/usr/lib/x86_64-linux-gnu/libcudnn.so"),
            symlink("usr/lib/libcudnn_out.so", "/../../../etc/passwd"),
            symlink("usr/lib/libcudnn_dangling.so", "/nonexistent/libcudnn.so"),
            symlink("usr/lib/libcudnn_loop_a.so", "libcudnn_loop_b.so"),
            symlink("usr/lib/libcudnn_loop_b.so", "libcudnn_loop_a.so"),
        ],
        compression=middle_compression,
    )
    top = Layer(
        [
            file("var/lib/dpkg/info/libcudnn9.list", "/usr/lib/x86_64-linux-gnu/x\n"),
            whiteout("usr/lib/x86_64-linux-gnu/libcublas.so.12"),
            # file replaces a directory of a lower layer
            file("opt/old", "now a file"),
        ],
        compression="none",
    )
    return Image(
        [base, middle, top],
        env=("PATH=/usr/local/cuda/bin:/usr/bin", "CUDA_VERSION=12.4.1", "EMPTY="),
        labels={"com.nvidia.cudnn.version": "9.1.0.70-1", "maintainer": "test"},
    )
