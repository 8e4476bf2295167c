"""Build the `make run` demo image: an OCI image layout made from GPU libraries on this machine.

Layer 1 installs the CUDA runtime the way pip does (site-packages + dist-info RECORD, copied
from this machine's CUDA toolkit wheels), layer 2 adds an unowned copy with a symlink alias,
layer 3 whites out a file from layer 2. Standard library only; no container engine needed.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

SITE = "usr/local/lib/python3.11/site-packages"


def _find_runtime() -> tuple[bytes, bytes | None, bytes | None, str]:
    """The real libcudart and its wheel metadata from this machine, or a compiled stand-in."""
    for lib in sorted(glob.glob("/usr/local/cuda*/lib*/libcudart.so.*")):
        if os.path.islink(lib):
            continue
        base = os.path.dirname(os.path.dirname(lib))
        for dist in glob.glob(f"{base}/dist-info/nvidia_cuda_runtime-*.dist-info"):
            with open(lib, "rb") as fh:
                data = fh.read()
            with open(f"{dist}/RECORD", "rb") as fh:
                record = fh.read()
            with open(f"{dist}/METADATA", "rb") as fh:
                metadata = fh.read()
            return data, record, metadata, os.path.basename(lib)
    # No CUDA toolkit here: compile a stand-in with the system compiler.
    src = tempfile.NamedTemporaryFile("w", suffix=".c", delete=False)
    src.write("int cudaRuntimeGetVersion(int *v) { *v = 12040; return 0; }\n")
    src.close()
    out = src.name + ".so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", out, src.name],
        check=True,
    )
    with open(out, "rb") as fh:
        return fh.read(), None, None, "libcudart.so.12"


def _tar(entries: list[tuple[str, bytes | None, str | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, link in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            if link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = link
                tar.addfile(info)
            else:
                assert data is not None
                info.size = len(data)
                info.mode = 0o755
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _blob(root: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(root, "blobs", "sha256", digest)
    with open(path, "wb") as fh:
        fh.write(data)
    return "sha256:" + digest


def build(root: str, tag: str = "demo") -> str:
    """Write the OCI layout at ``root`` and return the manifest digest."""
    data, record, metadata, soname_file = _find_runtime()
    os.makedirs(os.path.join(root, "blobs", "sha256"), exist_ok=True)
    layer1: list[tuple[str, bytes | None, str | None]] = []
    if record is not None and metadata is not None:
        dist = f"{SITE}/nvidia_cuda_runtime.dist-info"
        layer1 += [
            (f"{SITE}/nvidia/cu13/lib/{soname_file}", data, None),
            (f"{dist}/RECORD", record, None),
            (f"{dist}/METADATA", metadata, None),
        ]
    else:
        layer1 += [(f"usr/lib/x86_64-linux-gnu/{soname_file}", data, None)]
    layer2 = [
        (f"opt/app/lib/{soname_file}", data, None),
        ("opt/app/lib/libcudart.so", None, soname_file),
        ("opt/app/lib/libcudart-old.so.0", data, None),
    ]
    layer3 = [("opt/app/lib/.wh.libcudart-old.so.0", b"", None)]
    diff_ids, layers = [], []
    for entries in (layer1, layer2, layer3):
        raw = _tar(entries)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        gz = gzip.compress(raw, mtime=0)
        layers.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": _blob(root, gz),
                "size": len(gz),
            }
        )
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "CUDA_VERSION=13.0.96"],
            "Labels": {"org.opencontainers.image.title": "gpuprov demo"},
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _blob(root, config_bytes),
            "size": len(config_bytes),
        },
        "layers": layers,
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = _blob(root, manifest_bytes)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": len(manifest_bytes),
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    with open(os.path.join(root, "index.json"), "w") as fh:
        json.dump(index, fh)
    with open(os.path.join(root, "oci-layout"), "w") as fh:
        json.dump({"imageLayoutVersion": "1.0.0"}, fh)
    return manifest_digest


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "build/demo-oci"
    digest = build(target)
    print(f"demo image written to {target} ({digest})")
