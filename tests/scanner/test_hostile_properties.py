"""Property tests of the scanner's parsers of untrusted bytes (issue 12 §2): whatever a hostile
image or host holds, each parser returns or raises its own documented error, never another
exception (which would end a scan with a traceback). Seeds are real inputs, mutated by byte
edits, truncations and splices; the number of examples follows the hypothesis profile (``ci``
short, ``long`` 20,000 a property: docs/limits.md).

Targets: the dpkg status / md5sums / list parsers, pip RECORD, conda prefix records, RPM header
blobs, the layer tar reader (plain and gzip), the ELF reader, DSSE envelopes and Sigstore
bundles.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import struct
import tarfile
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scanner.catalog import conda, dpkg, pip, rpm
from scanner.catalog.interface import CatalogParseError, Distro
from scanner.errors import ScannerError
from scanner.model import OciDigest
from scanner.source.layerstream import LayerSpec
from scanner.source.limits import Limits
from scanner.source.tarlayer import read_layer
from scanner.verify.dsse import Envelope
from scanner.verify.errors import Rejected
from scanner.verify.sigstore_bundles import parse_bundle
from tests.fixtures.images import hashing_selector


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """`seed` after a few byte edits, a truncation, a duplication or a splice of random bytes."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4), label="edits")):
        how = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup", "splice"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)), label="at")
        if how == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif how == "truncate":
            del data[at:]
        elif how == "dup":
            data[at:at] = data[at : at + draw(st.integers(1, 64))]
        else:
            data[at : at + 4] = draw(
                st.sampled_from([b"\xff" * 4, b"\x00" * 4, b"\x7f\xff\xff\xff"])
            )
    return bytes(data)


def _nested(depth: int, opener: str) -> bytes:
    closer = "]" if opener == "[" else "}"
    return (opener * depth + "1" + closer * depth).encode()


#: JSON nested past the interpreter's recursion limit (json.loads raised RecursionError through
#: every parser below until issue 12)
_deep = st.builds(_nested, st.integers(900, 200_000), st.sampled_from(["[", '{"a":']))


DPKG_STATUS = b"""Package: libcudnn9-cuda-12
Status: install ok installed
Architecture: amd64
Version: 9.1.0.70-1
Description: cuDNN
 runtime libraries
Conffiles:
 /etc/x.conf 0123456789abcdef0123456789abcdef

Package: other
Status: install ok installed
Version: 1
"""
MD5SUMS = b"0123456789abcdef0123456789abcdef  usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0\n"


@given(data=st.one_of(mutated(DPKG_STATUS), st.binary(max_size=512)))
def test_dpkg_status(data: bytes) -> None:
    for stanza in dpkg.parse_stanzas(data):
        assert isinstance(stanza, dpkg._Stanza | dpkg._BadStanza)


@given(data=st.one_of(mutated(MD5SUMS), st.binary(max_size=256)))
def test_dpkg_md5sums_and_list(data: bytes) -> None:
    digests, bad = dpkg._parse_md5sums(data)
    assert bad >= 0
    for path, digest in digests.items():
        assert path.startswith("/") and "/../" not in path + "/"
        assert len(digest) == 32 and set(digest) <= set("0123456789abcdef")
    for path in dpkg._parse_list(data):
        assert path.startswith("/") and "/../" not in path + "/"


_B64 = base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).rstrip(b"=")
RECORD = (
    b"nvidia/cudnn/lib/libcudnn.so.9,sha256=" + _B64 + b",123\n"
    b"nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD,,\n"
    b'"quoted, name",sha256=' + b"ab" * 32 + b",1\n"
)


@given(data=st.one_of(mutated(RECORD), st.binary(max_size=256)))
def test_pip_record(data: bytes) -> None:
    files, bad = pip.parse_record(data, "/usr/lib/python3/site-packages")
    assert bad >= 0
    for owned in files:
        assert owned.path.startswith("/") and "/../" not in owned.path + "/"
        if owned.algorithm is not None:
            assert owned.digest is not None and len(owned.digest) in (32, 40, 64, 96, 128)


CONDA = json.dumps(
    {
        "name": "cudnn",
        "version": "9.1.0.70",
        "build": "h1",
        "channel": "https://conda.anaconda.org/nvidia/linux-64",
        "files": ["lib/libcudnn.so.9"],
        "paths_data": {
            "paths": [{"_path": "lib/libcudnn.so.9", "sha256": "ab" * 32, "size_in_bytes": 1}]
        },
    }
).encode()
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
    max_leaves=12,
)


@st.composite
def conda_records(draw: st.DrawFn) -> bytes:
    """A real record with one field replaced by any JSON value, or mutated bytes."""
    if draw(st.booleans()):
        return draw(mutated(CONDA))
    record: dict[str, Any] = json.loads(CONDA)
    key = draw(st.sampled_from([*record, "paths_data.paths", "files.0", "new"]))
    value = draw(_json)
    if key == "paths_data.paths":
        record["paths_data"]["paths"] = value
    elif key == "files.0":
        record["files"] = [value]
    else:
        record[key] = value
    return json.dumps(record).encode()


@given(data=st.one_of(conda_records(), _deep))
def test_conda_record(data: bytes) -> None:
    try:
        record = conda.load_record(data)
        conda.package_from_record(record, "/opt/conda/conda-meta/cudnn.json", "/opt/conda")
    except CatalogParseError:
        pass


def _rpm_header() -> bytes:
    """A header blob with a name, a version and a string array (rpm's on-disk layout)."""
    data = b"libcudnn9\x00" + b"9.1.0\x00" + b"/usr/lib64/a\x00/usr/lib64/b\x00"
    entries = [(1000, 6, 0, 1), (1001, 6, 10, 1), (1117, 8, 16, 2)]  # NAME, VERSION, BASENAMES
    index = b"".join(struct.pack(">IIII", *e) for e in entries)
    return struct.pack(">II", len(entries), len(data)) + index + data


@given(data=st.one_of(mutated(_rpm_header()), st.binary(max_size=128)))
def test_rpm_header(data: bytes) -> None:
    try:
        values = rpm.parse_header(data)
        rpm.package_from_header(values, "rpmdb.sqlite", _distro())
    except CatalogParseError:  # HeaderError: the package is skipped with this reason
        pass


def _distro() -> Distro:
    return Distro("rhel", "9", "rhel")


def _tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in (("usr/lib/libcudnn.so.9", b"\x7fELF" + b"x" * 600), ("etc/os", b"a")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("usr/lib/libcudnn.so")
        link.type, link.linkname = tarfile.SYMTYPE, "libcudnn.so.9"
        tar.addfile(link)
        long = tarfile.TarInfo("d/" + "n" * 150)
        tar.addfile(long, io.BytesIO(b""))
    return out.getvalue()


TAR = _tar()


@given(data=st.one_of(mutated(TAR), mutated(gzip.compress(TAR, mtime=0))), verify=st.booleans())
def test_tar_reader(data: bytes, verify: bool) -> None:
    digest = hashlib.sha256(data if verify else b"other").hexdigest()
    spec = LayerSpec(OciDigest("sha256:" + digest), len(data), lambda: io.BytesIO(data))
    try:
        got = read_layer(spec, hashing_selector(), Limits())
    except ScannerError:  # a digest mismatch, a limit: a clear message
        return
    for path, *_ in got.entries:
        assert not path.startswith("../") and "/../" not in path


ENVELOPE = json.dumps(
    {
        "payloadType": "application/vnd.in-toto+json",
        "payload": base64.b64encode(b'{"_type": "https://in-toto.io/Statement/v1"}').decode(),
        "signatures": [{"keyid": "k", "sig": base64.b64encode(b"s" * 64).decode()}],
    }
).encode()


@given(data=st.one_of(mutated(ENVELOPE), st.builds(json.dumps, _json).map(str.encode), _deep))
def test_dsse_envelope(data: bytes) -> None:
    try:
        envelope = Envelope.from_json(data)
    except Rejected:
        return
    assert envelope.signatures and envelope.payload_type
    envelope.pae()


BUNDLE = json.dumps(
    {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {"publicKey": {"hint": "x"}, "tlogEntries": []},
        "dsseEnvelope": json.loads(ENVELOPE),
    }
).encode()


@given(data=st.one_of(mutated(BUNDLE), st.binary(max_size=64), _deep))
def test_sigstore_bundle(data: bytes) -> None:
    try:
        assert isinstance(parse_bundle(data), dict)
    except Rejected:
        pass
