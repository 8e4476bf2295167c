"""Asset facts from other tools' CycloneDX BOMs: GPU libraries recognized, verdicts None."""

from __future__ import annotations

import json

import pytest

from scanner.model import AssetKind
from scanner.policy.bom_facts import BomError, facts_from_bom

DIGEST = "sha256:" + "c" * 64


def _bom(components: list[dict[str, object]], **component: object) -> bytes:
    return json.dumps(
        {
            "bomFormat": "CycloneDX",
            "specVersion": "1.5",
            "metadata": {
                "timestamp": "2026-11-30T10:00:00Z",
                "tools": [{"vendor": "aquasecurity", "name": "trivy", "version": "0.57.0"}],
                "component": component,
            },
            "components": components,
        }
    ).encode()


def test_trivy_packages_become_libraries_without_verdicts() -> None:
    raw = _bom(
        [
            {
                "type": "library",
                "name": "nvidia-cudnn-cu12",
                "version": "9.1.0.70",
                "purl": "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70",
                "properties": [
                    {"name": "aquasecurity:trivy:FilePath", "value": "usr/lib/python3/x/METADATA"},
                    {"name": "aquasecurity:trivy:LayerDigest", "value": DIGEST},
                ],
            },
            {"type": "library", "name": "libcudnn9-dev-cuda-12", "version": "9.1.0.70-1"},
            {"type": "library", "name": "requests", "version": "2.32.0"},
        ],
        type="container",
        name="ml/train:1",
        purl=f"pkg:oci/train@{DIGEST.replace(':', '%3A')}",
    )
    facts = facts_from_bom(raw)
    assert facts.kind is AssetKind.IMAGE and facts.digest == DIGEST
    assert facts.producer == "trivy 0.57.0"
    assert facts.scanned_at is not None and facts.scanned_at.year == 2026
    (lib,) = facts.files
    assert (lib.family, lib.version, lib.cuda_major, lib.layer) == ("cudnn", "9.1.0.70", 12, DIGEST)
    assert lib.integrity is None and lib.provenance is None
    assert facts.image_trust is None


def test_syft_files_get_versions_only_from_complete_names() -> None:
    sha = "d" * 64
    raw = _bom(
        [
            {
                "type": "file",
                "name": "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0",
                "hashes": [{"alg": "SHA-256", "content": sha}],
            },
            {
                "type": "file",
                "name": "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9",
                "hashes": [{"alg": "SHA-256", "content": "e" * 64}],
            },
            {
                "type": "file",
                "name": "/usr/local/cuda/lib64/libcudart.so.12.4.127",
                "hashes": [{"alg": "SHA-256", "content": "f" * 64}],
            },
            # as the service's ingest: a GPU library file without a SHA-256 is no library
            {"type": "file", "name": "/usr/local/cuda/lib64/libcublas.so.12.4.5.8"},
            {"type": "file", "name": "/etc/passwd"},
        ],
        type="container",
        name="ml/train",
        version=DIGEST,
    )
    facts = facts_from_bom(raw)
    assert facts.digest == DIGEST
    by_path = {f.path: f for f in facts.files}
    assert by_path["/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0"].version == "9.7.0"
    assert by_path["/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0"].sha256 == sha
    assert by_path["/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9"].version is None
    assert by_path["/usr/local/cuda/lib64/libcudart.so.12.4.127"].cuda_major == 12
    assert set(by_path) == {
        "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0",
        "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9",
        "/usr/local/cuda/lib64/libcudart.so.12.4.127",
    }


def test_an_absurd_number_in_a_purl_is_an_error_naming_the_component() -> None:
    raw = _bom(
        [{"type": "library", "name": "x", "purl": "pkg:deb/debian/libcudnn9-cuda-99999999999@9"}],
        type="container",
        name="ml/train",
    )
    with pytest.raises(BomError, match="/components/0: the number 99999999999"):
        facts_from_bom(raw)


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"bomFormat": "SPDX"}'])
def test_not_a_bom(raw: bytes) -> None:
    with pytest.raises(BomError):
        facts_from_bom(raw)


def test_a_key_given_twice_is_no_bom() -> None:
    """The service refuses it (422): the offline gate must not decide on one of the two."""
    raw = b'{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [], "components": []}'
    with pytest.raises(BomError, match="duplicate key 'components'"):
        facts_from_bom(raw)


def _ours(*props: tuple[str, str], name: str = "libcudnn.so.9") -> dict[str, object]:
    """A file component in our vocabulary (gpuprov: properties)."""
    listed = [("gpuprov:library:family", "cudnn"), *props]
    return {
        "type": "file",
        "name": name,
        "hashes": [{"alg": "SHA-256", "content": "a" * 64}],
        "properties": [{"name": k, "value": v} for k, v in listed],
    }


def test_a_file_in_our_vocabulary_is_at_its_stated_path_else_at_its_name() -> None:
    raw = _bom(
        [
            _ours(("gpuprov:file:path", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9")),
            _ours(name="/opt/cudnn/libcudnn.so.9"),
        ],
        type="container",
        name="ml/train",
    )
    paths = [f.path for f in facts_from_bom(raw).files]
    assert paths == ["/usr/lib/x86_64-linux-gnu/libcudnn.so.9", "/opt/cudnn/libcudnn.so.9"]


def test_the_processes_a_file_names_are_counted_by_pid() -> None:
    process = json.dumps({"pid": 7, "exe": "/usr/bin/python3"})
    raw = _bom(
        [
            _ours(
                ("gpuprov:runtime:process", process),
                ("gpuprov:runtime:process", json.dumps({"pid": 8})),
                ("gpuprov:runtime:process", process),
            )
        ],
        type="operating-system",
        name="node-1",
    )
    (lib,) = facts_from_bom(raw).files
    assert lib.loaded_processes == 2


def test_a_process_that_is_no_object_with_a_pid_is_an_error_quoting_its_start() -> None:
    value = "p" * 59 + "Q" + "r" * 40
    raw = _bom([_ours(("gpuprov:runtime:process", value))], type="operating-system", name="node-1")
    with pytest.raises(BomError) as caught:
        facts_from_bom(raw)
    # the first 60 characters, quoted: neither one more nor one less
    assert f"not {value[:60]!r}" in str(caught.value)
    assert str(caught.value).endswith("Q'")


def test_numbers_that_are_no_integers_are_unknown_not_errors() -> None:
    raw = _bom(
        [_ours(("gpuprov:library:cuda-major", "twelve"))],
        type="container",
        name="ml/train",
        properties=[{"name": "gpuprov:slsa:build-level", "value": "high"}],
    )
    facts = facts_from_bom(raw)
    assert facts.files[0].cuda_major is None
    assert facts.image_trust is None  # no level, no signer, no builder: no trust outcome


def test_a_bom_of_an_application_is_no_asset_to_gate() -> None:
    raw = _bom([], type="application", name="gpuprov")
    with pytest.raises(BomError, match="the BOM describes neither an image nor a host"):
        facts_from_bom(raw)


@pytest.mark.parametrize("bom_format", ["SPDX", "Acme", "cyclonedx"])
def test_only_the_cyclonedx_format_is_read(bom_format: str) -> None:
    """Formats sorting before and after "CycloneDX", and its name in other case."""
    doc = json.loads(_bom([], type="container", name="ml/train"))
    doc["bomFormat"] = bom_format
    with pytest.raises(BomError, match='no "bomFormat": "CycloneDX"'):
        facts_from_bom(json.dumps(doc).encode())


@pytest.mark.parametrize(("pad", "told"), [(0, "SPDX tag-value: not UTF-8"), (1, "not a JSON")])
def test_an_spdx_tag_value_bom_is_told_by_its_first_4096_bytes(pad: int, told: str) -> None:
    """A first tag `SPDXVersion:` ending at byte 4096 makes a tag-value document, one a byte
    later does not (then it is read as JSON); a tag-value document must be UTF-8 throughout."""
    head = "SPDXVersion:"
    comment = "#" + "x" * (4096 - 2 - len(head) + pad) + "\n"
    raw = (comment + head + " SPDX-2.3\n").encode() + b"\xff"
    assert len(comment) + len(head) == 4096 + pad
    with pytest.raises(BomError, match=told):
        facts_from_bom(raw)


def test_an_spdx_document_refused_is_no_bom() -> None:
    with pytest.raises(BomError, match="^SPDX spdxVersion: "):
        facts_from_bom(b'{"spdxVersion": "SPDX-2.1"}')
