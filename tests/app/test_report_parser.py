"""Parsing and checking reports: our vocabulary, other tools' shapes, and precise 422s."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from app.domain.report_parser import parse_report
from app.errors import InvalidReport
from scanner import vocabulary as v
from tests.app import boms


def _fails(document: Any) -> InvalidReport:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    with pytest.raises(InvalidReport) as caught:
        parse_report(data)
    assert caught.value.status == 422
    return caught.value


def test_gpuprov_image_report() -> None:
    bom = boms.gpuprov_bom(labels={"team": "vision"})
    report = parse_report(boms.encode(bom))
    assert report.producer == "gpuprov"
    assert report.asset.kind == "image"
    assert report.asset.identity == bom["metadata"]["component"]["version"]
    assert report.asset.labels == {"team": "vision"}
    assert report.dedup_key == f"{bom['serialNumber']}#v1"
    cudnn = [lib for lib in report.libraries if lib.family == "cudnn"]
    assert len(cudnn) == 8 and {lib.version for lib in cudnn} == {"9.1.0.70"}
    assert all(lib.kind == "file" and lib.sha256 and lib.path for lib in report.libraries)
    assert {p.purl for p in report.packages} == {o.purl for o in boms.cuda_wheels()} | {
        boms.cudnn_wheel().purl
    }


def test_gpuprov_host_report() -> None:
    report = parse_report(boms.encode(boms.gpuprov_bom(kind="host", name="gpu-node-7")))
    assert report.asset.kind == "host"
    assert report.asset.name == "gpu-node-7"
    assert report.asset.identity == report.asset.details["machine_id"]


def test_trivy_report() -> None:
    bom = boms.trivy_bom()
    report = parse_report(boms.encode(bom))
    assert report.producer == "trivy"
    digest = bom["metadata"]["component"]["purl"].split("@")[1].split("?")[0].replace("%3A", ":")
    assert report.asset.identity == digest
    found = {(lib.family, lib.version, lib.cuda_major, lib.kind) for lib in report.libraries}
    # the -dev package holds headers and numpy is not a GPU library: neither is listed
    assert found == {
        ("cudnn", "9.1.0.70", 12, "package"),
        ("nccl", "2.21.5", 12, "package"),
        ("cublas", "12.4.5.8", 12, "package"),
    }
    cublas = next(lib for lib in report.libraries if lib.family == "cublas")
    assert cublas.path and cublas.path.endswith("METADATA")


def test_source_packages_are_read_from_ours_and_trivys_properties() -> None:
    bom = boms.trivy_bom()
    (cudnn,) = [c for c in bom["components"] if c["name"] == "libcudnn9-cuda-12"]
    cudnn["properties"] += [
        {"name": "aquasecurity:trivy:SrcVersion", "value": "9.1.0.70"},
        {"name": "aquasecurity:trivy:SrcRelease", "value": "1"},
        {"name": "aquasecurity:trivy:SrcEpoch", "value": "1"},
    ]
    report = parse_report(boms.encode(bom))
    (pkg,) = [p for p in report.packages if p.name == "libcudnn9-cuda-12"]
    assert (pkg.source_name, pkg.source_version) == ("cudnn", "1:9.1.0.70-1")
    ours = boms.gpuprov_bom(owners=[boms.cudnn_wheel()])
    (wheel,) = [c for c in ours["components"] if c.get("type") == "library"]
    wheel["properties"] = [
        {"name": v.PACKAGE_SOURCE_NAME, "value": "cudnn-src"},
        {"name": v.PACKAGE_SOURCE_VERSION, "value": "9.1.0.70-2"},
    ]
    (pkg,) = parse_report(boms.encode(ours)).packages
    assert (pkg.source_name, pkg.source_version) == ("cudnn-src", "9.1.0.70-2")
    assert all(
        p.source_name is None for p in parse_report(boms.encode(boms.gpuprov_bom())).packages
    )


def test_syft_report() -> None:
    bom = boms.syft_bom()
    report = parse_report(boms.encode(bom))
    assert report.producer == "syft"
    assert report.asset.identity == bom["metadata"]["component"]["version"]
    files = [lib for lib in report.libraries if lib.kind == "file"]
    assert [(f.family, f.component, f.version, f.path) for f in files] == [
        ("cudnn", "cudnn_ops", "9.7.0", "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0")
    ]
    assert files[0].sha256 == bom["components"][1]["hashes"][1]["content"]
    package = next(lib for lib in report.libraries if lib.kind == "package")
    assert (package.family, package.version, package.layer) == (
        "cudnn",
        "9.7.0.66",
        bom["components"][0]["properties"][2]["value"],
    )


def test_cdxgen_17_report() -> None:
    bom = boms.cdxgen_bom()
    report = parse_report(boms.encode(bom))
    assert report.spec_version == "1.7" and report.producer == "cdxgen"
    assert report.asset.name == "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
    assert report.asset.identity.startswith("sha256:")
    assert {(lib.family, lib.version) for lib in report.libraries} == {
        ("cudnn", "9.1.0.70"),
        ("cudnn", "9.1.1.17"),
    }


@pytest.mark.parametrize("spec", ["1.4", "1.5", "1.6", "1.7"])
def test_accepted_spec_versions(spec: str) -> None:
    bom = boms.gpuprov_bom(spec_version=spec)
    if spec == "1.4":  # 1.4 has the tools array, not the object
        bom["metadata"]["tools"] = [{"vendor": "gpuprov", "name": "gpuprov", "version": "0.1"}]
    assert parse_report(boms.encode(bom)).spec_version == spec


def test_serial_less_report_is_keyed_by_content() -> None:
    bom = boms.gpuprov_bom()
    del bom["serialNumber"]
    report = parse_report(boms.encode(bom))
    assert report.dedup_key == f"sha256:{report.content_sha256}"


def test_malformed_json() -> None:
    error = _fails(b'{"bomFormat": "CycloneDX", ')
    assert "malformed JSON" in error.message and "line 1" in error.message


def test_not_utf8() -> None:
    assert "UTF-8" in _fails(b'{"a": "\xff\xfe"}').message


def test_not_cyclonedx() -> None:
    error = _fails({"hello": "world"})
    assert "not a CycloneDX BOM" in error.message
    assert error.details[0]["pointer"] == "/bomFormat"
    # an SPDX document is read as SPDX (issue 21): an incomplete one is refused as SPDX
    error = _fails({"spdxVersion": "SPDX-2.3"})
    assert error.message.startswith("SPDX ") and error.details[0]["spdx"]


@pytest.mark.parametrize("spec", ["1.2", "2.0", 1.6, None])
def test_unsupported_spec_version(spec: Any) -> None:
    bom = boms.gpuprov_bom()
    bom["specVersion"] = spec
    error = _fails(bom)
    assert "unsupported CycloneDX specVersion" in error.message
    assert "1.4, 1.5, 1.6, 1.7" in error.message


def test_schema_problems_have_pointers() -> None:
    bom = boms.gpuprov_bom()
    bom["components"][1]["hashes"][0]["alg"] = "sha-256"
    del bom["components"][0]["name"]
    error = _fails(bom)
    assert "CycloneDX 1.6 schema" in error.message
    pointers = {d["pointer"] for d in error.details}
    assert "/components/0" in pointers
    assert "/components/1/hashes/0/alg" in pointers


def test_file_without_hash() -> None:
    bom = boms.gpuprov_bom()
    del bom["components"][3]["hashes"]
    error = _fails(bom)
    assert "SHA-256" in error.message
    assert error.details[0]["pointer"] == "/components/3/hashes"


def test_duplicate_bom_refs() -> None:
    bom = boms.gpuprov_bom()
    bom["components"][5]["bom-ref"] = bom["components"][2]["bom-ref"]
    error = _fails(bom)
    assert error.message == "duplicate bom-ref values"
    assert error.details[0]["pointer"] == "/components/5/bom-ref"
    assert "/components/2/bom-ref" in error.details[0]["message"]


def test_duplicate_of_the_asset_ref() -> None:
    bom = boms.gpuprov_bom()
    bom["components"][0]["bom-ref"] = "asset"
    error = _fails(bom)
    assert "/metadata/component/bom-ref" in error.details[0]["message"]


def test_deep_nesting() -> None:
    bom = boms.gpuprov_bom()
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    bom["metadata"]["component"]["description"] = deep
    error = _fails(bom)
    assert "nesting deeper than 64" in error.message


def test_nesting_beyond_the_parser() -> None:
    error = _fails(b"[" * 200_000 + b"]" * 200_000)
    assert "nesting deeper than 64 levels" in error.message


def test_nul_and_surrogates_are_refused() -> None:
    bom = boms.gpuprov_bom()
    bom["components"][0]["name"] = "evil\x00name"
    error = _fails(bom)
    assert error.details[0]["pointer"] == "/components/0/name"
    text = boms.encode(boms.gpuprov_bom()).replace(b'"gpuprov"', b'"\\ud800"', 1)
    assert "surrogate" in _fails(text).message


@pytest.mark.parametrize(
    ("prop", "value", "fragment"),
    [
        (v.INTEGRITY, "probably-fine", "gpuprov:integrity must be one of"),
        (v.PROVENANCE, "trusted", "gpuprov:provenance must be one of"),
        (v.LIBRARY_CUDA_MAJOR, "twelve", "must be an integer"),
        (v.LIBRARY_FAMILY, "cu dnn; drop", "not a library family name"),
    ],
)
def test_bad_vocabulary_values(prop: str, value: str, fragment: str) -> None:
    bom = boms.gpuprov_bom()
    for p in bom["components"][1]["properties"]:
        if p["name"] == prop:
            p["value"] = value
    error = _fails(bom)
    assert fragment in error.message
    assert error.message.startswith("/components/1 ")


def test_missing_asset() -> None:
    bom = boms.gpuprov_bom()
    del bom["metadata"]["component"]
    error = _fails(bom)
    assert error.details[0]["pointer"] == "/metadata/component"


def test_long_bom_labels_are_dropped_not_fatal() -> None:
    bom = boms.gpuprov_bom(labels={"org.opencontainers.image.description": "x" * 5000, "a": "b"})
    assert parse_report(boms.encode(bom)).asset.labels == {"a": "b"}


def test_image_without_manifest_digest_is_keyed_by_config_digest() -> None:
    bom = boms.gpuprov_bom()
    component = bom["metadata"]["component"]
    config = "sha256:" + "c" * 64
    component["properties"] = [
        p for p in component["properties"] if p["name"] != v.IMAGE_DIGEST
    ] + [{"name": v.IMAGE_ID, "value": config}]
    del component["version"], component["purl"]
    report = parse_report(boms.encode(bom))
    assert report.asset.identity == f"config:{config}"


def test_the_reference_validator_loads_on_the_first_refused_report_only() -> None:
    """jsonschema compiles its format grammars at import (~1.5 s of CPU): a worker's start-up
    must not pay it, only the first report that jsonschema-rs refuses."""
    probe = (
        "import sys, app.main; print(sorted(m for m in ('jsonschema', 'lark') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
