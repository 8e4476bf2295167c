"""Sibling inference: cuDNN sub-libraries without a version of their own."""

from __future__ import annotations

from scanner.detect import fill_from_siblings, find_mixed_cudnn
from scanner.model import Identification


def _ident(component: str, version: str | None, cuda: int | None = None) -> Identification:
    return Identification(
        family="cudnn",
        component=component,
        version=version,
        cuda_major=cuda,
        arch="x86_64",
        soname=f"lib{component}.so.9",
    )


def test_versionless_siblings_take_the_agreed_version() -> None:
    libs = [
        ("/opt/cudnn/lib/libcudnn_graph.so.9", _ident("cudnn_graph", "9.28.0.42", 12)),
        ("/opt/cudnn/lib/libcudnn_ops.so.9", _ident("cudnn_ops", "9.28.0")),
        ("/opt/cudnn/lib/libcudnn_cnn.so.9", _ident("cudnn_cnn", None)),
        ("/other/libcudnn_cnn.so.9", _ident("cudnn_cnn", None)),
    ]
    out = fill_from_siblings(libs)
    assert out[2].version == "9.28.0.42"
    assert out[2].cuda_major == 12
    assert any("sibling libcudnn_graph.so.9" in e.source for e in out[2].evidence)
    assert out[1].version == "9.28.0"  # own evidence is never overwritten
    assert out[3].version is None  # another directory: no siblings


def test_mixed_directory_guesses_nothing() -> None:
    libs = [
        ("/d/libcudnn_graph.so.9", _ident("cudnn_graph", "9.1.0.70")),
        ("/d/libcudnn_ops.so.9", _ident("cudnn_ops", "9.28.0")),
        ("/d/libcudnn_cnn.so.9", _ident("cudnn_cnn", None)),
    ]
    out = fill_from_siblings(libs)
    assert out[2].version is None
    assert [
        f.kind for f in find_mixed_cudnn(list(zip([p for p, _ in libs], out, strict=True)))
    ] == ["mixed"]


def test_identical_bytes_share_the_version() -> None:
    from scanner.detect import fill_from_identical

    cudart = Identification(
        family="cudart", component="cudart", version="13.0.96", cuda_major=13, arch="x86_64"
    )
    copy = Identification(
        family="cudart", component="cudart", version=None, cuda_major=None, arch="x86_64"
    )
    out = fill_from_identical(
        [
            ("/site/libcudart.so.13", "ab" * 32, cudart),
            ("/opt/libcudart.so.13", "ab" * 32, copy),
            ("/x/libcudart.so.13", "cd" * 32, copy),
        ]
    )
    assert out[1].version == "13.0.96" and out[1].cuda_major == 13
    assert out[1].evidence[-1].method == "hash-comparison"
    assert out[2].version is None
