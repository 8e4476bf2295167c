"""VEX out and in (scanner/advisories/vex_out.py, vex_in.py): documents valid against the
OpenVEX v0.2.0 schema and the CycloneDX 1.6 schema for every status and justification, the
mapping table applied both ways, a document read back giving the statements it was written
from, each malformed document refused by name, and the reader fuzzed at its boundary."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.advisories.match import Finding
from scanner.advisories.vex_in import VexDocument, VexRefused, read_vex
from scanner.advisories.vex_out import (
    VexSubject,
    VulnInfo,
    build_cyclonedx,
    build_openvex,
    openvex_json,
)
from scanner.advisories.vex_terms import (
    CDX_JUSTIFICATIONS,
    JUSTIFICATION_FROM_CDX,
    JUSTIFICATION_TO_CDX,
    OPENVEX_JUSTIFICATIONS,
    STATE_FROM_CDX,
    STATE_TO_CDX,
)
from scanner.bom.cyclonedx import validate_json
from scanner.imageref import oci_purl

SHA = "ab" * 32
IMAGE = VexSubject(
    kind="image",
    name="registry.example/ml/train:1",
    purl=oci_purl("registry.example/ml/train:1", "sha256:" + "cd" * 32).to_string(),
    sha256="cd" * 32,
)
WHEN = datetime(2025, 10, 9, 12, 0, tzinfo=UTC)
INFO = {
    "CVE-2023-0193": VulnInfo(
        title="cuobjdump heap overflow",
        bulletin="5446",
        publisher="NVIDIA",
        severity="MEDIUM",
        cvss=5.5,
    )
}


@cache
def _validator() -> Any:
    text = (
        resources.files("scanner.advisories")
        .joinpath("schemas", "openvex_json_schema_0.2.0.json")
        .read_text("utf-8")
    )
    return jsonschema_rs.validator_for(json.loads(text))


def openvex_errors(doc: Any) -> list[str]:
    """The vendored OpenVEX v0.2.0 schema's complaints about ``doc`` (empty: valid)."""
    return [f"{list(e.instance_path)}: {e.message}" for e in _validator().iter_errors(doc)]


def _tool(cve: str, status: str, **kw: Any) -> Finding:
    evidence = {
        "product": "cuobjdump",
        "version": "11.8.86",
        "compared_as": "11.8.0",
        "paths": ["/usr/local/cuda-11.8/bin/cuobjdump"],
        "sha256": SHA,
    }
    return Finding(
        cve=cve,
        status=status,  # type: ignore[arg-type]
        product="cuda-toolkit",
        component="cuobjdump",
        installed="11.8.86 (toolkit 11.8.0)",
        evidence=evidence,
        **kw,
    )


#: one finding of every status, and every justification the matcher or a CSAF flag gives
FINDINGS = [
    _tool("CVE-2023-0193", "affected", affected_text="All versions prior to 12.1", fixed_in="12.1"),
    _tool(
        "CVE-2024-0072", "affected", review="12.4 GA has no status", affected_text="prior to 12.4"
    ),
    _tool("CVE-2025-0001", "affected", conditions_unevaluated=("cdi_mode",)),
    _tool("CVE-2022-34667", "fixed", fixed_in="11.8", affected_text="prior to 11.8"),
    _tool("CVE-2025-0002", "under_investigation"),
    *(
        _tool(f"CVE-2025-10{i}", "not_affected", justification=j)
        for i, j in enumerate(OPENVEX_JUSTIFICATIONS)
    ),
    Finding(
        cve="CVE-2024-0123",
        status="not_affected",
        product="cuda-toolkit",
        component="nvdisasm",
        installed="11.8.0",
        justification="component_not_present",
        evidence={"component": ["nvdisasm"], "toolkit_products": ["cuda-toolkit 11.8.0"]},
    ),
    Finding(
        cve="CVE-2025-23280",
        status="affected",
        product="driver",
        installed="535.129.03",
        fixed_in="535.274.02",
        inferred=True,
        evidence={"product": "driver", "version": "535.129.03", "branch": "R535"},
    ),
    Finding(
        cve="CVE-2025-23266",
        status="affected",
        product="container-toolkit",
        installed="1.17.3",
        conditions_unevaluated=("cdi_mode",),
        evidence={"product": "container-toolkit", "version": "1.17.3"},
    ),
    # a product key a newer scanner wrote, with a version no purl writes as it is
    Finding(
        cve="CVE-2026-0002",
        status="under_investigation",
        product="future-thing",
        installed="2.0 beta/1",
        evidence={"product": "future-thing", "version": "2.0 beta/1"},
    ),
]


def _openvex(findings: list[Finding] = FINDINGS, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"author": "gpuprov", "timestamp": WHEN, "tooling": "gpuprov test"}
    args.update(kw)
    return build_openvex(IMAGE, findings, INFO, **args)


def _cdx(findings: list[Finding] = FINDINGS, **kw: Any) -> str:
    args: dict[str, Any] = {"author": "gpuprov", "timestamp": WHEN}
    args.update(kw)
    return build_cyclonedx(IMAGE, findings, INFO, **args)


def _neutral(doc: VexDocument) -> list[Any]:
    return sorted(
        (
            msgspec.structs.replace(s, format="openvex", source_state="", source_justification=None)
            for s in doc.statements
        ),
        key=repr,
    )


# -- out --------------------------------------------------------------------------------------


def test_openvex_states_every_status_as_the_spec_requires() -> None:
    doc = _openvex()
    assert openvex_errors(doc) == []
    assert doc["@context"] == "https://openvex.dev/ns/v0.2.0"
    assert doc["timestamp"] == "2025-10-09T12:00:00Z" and doc["version"] == 1
    by = {s["vulnerability"]["name"]: s for s in doc["statements"]}
    assert len(by) == len(FINDINGS)
    affected = by["CVE-2023-0193"]
    assert affected["action_statement"] == (
        "Update cuobjdump to a fixed version (12.1) or remove it."
    )
    assert affected["vulnerability"]["description"] == "cuobjdump heap overflow"
    (product,) = affected["products"]
    assert product["@id"] == IMAGE.purl and product["hashes"] == {"sha-256": "cd" * 32}
    assert product["identifiers"] == {"purl": IMAGE.purl}
    (sub,) = product["subcomponents"]
    assert sub == {
        "@id": "pkg:generic/nvidia/cuobjdump@11.8.86",
        "identifiers": {
            "purl": "pkg:generic/nvidia/cuobjdump@11.8.86",
            # a toolkit tool is named by its toolkit release's CPE
            "cpe23": "cpe:2.3:a:nvidia:cuda_toolkit:11.8.0:*:*:*:*:*:*:*",
        },
        "hashes": {"sha-256": SHA},
    }
    assert "bulletin 5446" in affected["status_notes"]
    assert "/usr/local/cuda-11.8/bin/cuobjdump" in affected["status_notes"]
    assert "A person must review" in by["CVE-2024-0072"]["action_statement"]
    assert "needs review: 12.4 GA has no status" in by["CVE-2024-0072"]["status_notes"]
    assert "No fixed version is listed" in by["CVE-2025-0001"]["action_statement"]
    assert "conditions not evaluated: cdi_mode" in by["CVE-2025-0001"]["status_notes"]
    assert "inferred by a rule" in by["CVE-2025-23280"]["status_notes"]
    assert "action_statement" not in by["CVE-2022-34667"]
    assert by["CVE-2025-0002"]["status"] == "under_investigation"
    for i, j in enumerate(OPENVEX_JUSTIFICATIONS):
        assert by[f"CVE-2025-10{i}"]["justification"] == j
    (toolkit,) = by["CVE-2025-23266"]["products"][0]["subcomponents"]
    assert toolkit["@id"] == "pkg:golang/github.com/NVIDIA/nvidia-container-toolkit@1.17.3"
    (future,) = by["CVE-2026-0002"]["products"][0]["subcomponents"]
    assert future["@id"] == "pkg:generic/nvidia/future-thing@2.0%20beta/1"  # packageurl's form
    missing = by["CVE-2024-0123"]
    assert missing["justification"] == "component_not_present"
    assert "subcomponents" not in missing["products"][0]  # nothing of nvdisasm is there


def test_a_justification_outside_the_five_is_said_in_words() -> None:
    odd = _tool("CVE-2025-9999", "not_affected", justification="vendor_says_so")
    doc = _openvex([odd])
    assert openvex_errors(doc) == []
    (s,) = doc["statements"]
    assert "justification" not in s
    assert s["impact_statement"] == "not affected: vendor_says_so"


def test_the_same_facts_give_the_same_document() -> None:
    a = openvex_json(_openvex())
    assert openvex_json(_openvex(list(reversed(FINDINGS)))) == a
    assert openvex_json(_openvex(FINDINGS + FINDINGS[:2])) == a  # duplicates stated once
    later = _openvex(timestamp=datetime(2025, 10, 10, tzinfo=UTC))
    assert later["@id"] != json.loads(a)["@id"]
    assert _openvex(author="Example PSIRT")["@id"] != json.loads(a)["@id"]
    assert _cdx() == _cdx(list(reversed(FINDINGS)))
    assert json.loads(_cdx())["serialNumber"] != json.loads(_cdx(author="x"))["serialNumber"]


def test_openvex_needs_a_statement() -> None:
    with pytest.raises(ValueError, match="needs a statement"):
        _openvex([])


def test_cyclonedx_is_valid_and_follows_the_mapping_table() -> None:
    text = _cdx()
    assert validate_json(text) is None
    bom = json.loads(text)
    assert bom["specVersion"] == "1.6" and bom["serialNumber"].startswith("urn:uuid:")
    assert bom["metadata"]["authors"] == [{"name": "gpuprov"}]
    assert bom["metadata"]["component"]["purl"] == IMAGE.purl
    vulns = {v["id"]: v for v in bom["vulnerabilities"]}
    for f in FINDINGS:
        v = vulns[f.cve]
        assert v["analysis"]["state"] == STATE_TO_CDX[f.status]
        if f.status == "not_affected":
            assert v["analysis"]["justification"] == JUSTIFICATION_TO_CDX[str(f.justification)]
            assert v["properties"] == [
                {"name": "gpuprov:vex:justification", "value": f.justification}
            ]
    assert vulns["CVE-2023-0193"]["analysis"]["response"] == ["update"]
    assert vulns["CVE-2023-0193"]["affects"] == [{"ref": "pkg:generic/nvidia/cuobjdump@11.8.86"}]
    assert vulns["CVE-2023-0193"]["ratings"] == [{"score": 5.5, "severity": "medium"}]
    assert vulns["CVE-2024-0123"]["affects"] == [{"ref": IMAGE.purl}]
    assert "recommendation" in vulns["CVE-2025-0001"]
    assert "response" not in vulns["CVE-2025-0001"]["analysis"]  # no fix to update to


def test_an_empty_cyclonedx_vex_is_valid() -> None:
    text = _cdx([])
    assert validate_json(text) is None and "vulnerabilities" not in json.loads(text)


def test_the_mapping_table_is_complete_and_reads_back() -> None:
    assert set(STATE_TO_CDX) == {"affected", "not_affected", "fixed", "under_investigation"}
    assert all(STATE_FROM_CDX[STATE_TO_CDX[s]] == s for s in STATE_TO_CDX)
    assert set(JUSTIFICATION_TO_CDX) == set(OPENVEX_JUSTIFICATIONS)
    assert set(JUSTIFICATION_FROM_CDX) == set(CDX_JUSTIFICATIONS)
    assert set(JUSTIFICATION_FROM_CDX.values()) == set(OPENVEX_JUSTIFICATIONS)


# -- round trip -------------------------------------------------------------------------------


def test_out_then_in_gives_the_statements_written() -> None:
    openvex = read_vex(openvex_json(_openvex()).encode())
    cdx = read_vex(_cdx().encode())
    assert openvex.format == "openvex" and cdx.format == "cyclonedx"
    assert _neutral(openvex) == _neutral(cdx)
    got = {(s.cve, s.state, s.justification) for s in openvex.statements}
    assert got == {
        (f.cve, f.status, f.justification if f.status == "not_affected" else None) for f in FINDINGS
    }
    for s in openvex.statements:
        assert s.author == "gpuprov" and s.timestamp == "2025-10-09T12:00:00Z"
        assert s.product.purl == IMAGE.purl and s.product.sha256 == "cd" * 32
        if s.cve == "CVE-2023-0193":
            assert s.component is not None
            assert s.component.purl == "pkg:generic/nvidia/cuobjdump@11.8.86"
            assert s.component.sha256 == SHA
            assert s.action == "Update cuobjdump to a fixed version (12.1) or remove it."
            assert s.detail and "bulletin 5446" in s.detail
        if s.cve == "CVE-2024-0123":
            assert s.component is None


# -- in: other tools' CycloneDX ---------------------------------------------------------------


def _foreign_cdx(**analysis: Any) -> dict[str, Any]:
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {"timestamp": "2025-01-02T03:04:05+01:00", "authors": [{"name": "Acme"}]},
        "components": [
            {"type": "library", "name": "nvjpeg", "bom-ref": "c1", "purl": "pkg:pypi/x@1"}
        ],
        "vulnerabilities": [{"id": "CVE-2025-1", "analysis": analysis, "affects": [{"ref": "c1"}]}],
    }


@pytest.mark.parametrize(
    ("analysis", "state", "justification", "impact"),
    [
        (
            {"state": "not_affected", "justification": "code_not_present"},
            "not_affected",
            "vulnerable_code_not_present",
            None,
        ),
        (
            {"state": "not_affected", "justification": "requires_dependency"},
            "not_affected",
            "component_not_present",
            None,
        ),
        (
            {"state": "not_affected", "justification": "protected_at_runtime"},
            "not_affected",
            "inline_mitigations_already_exist",
            None,
        ),
        (
            {"state": "false_positive", "detail": "scanner misread"},
            "not_affected",
            None,
            "false positive (CycloneDX analysis state false_positive)",
        ),
        ({"state": "resolved_with_pedigree"}, "fixed", None, None),
        ({"state": "exploitable", "response": ["will_not_fix"]}, "affected", None, None),
        ({"state": "in_triage"}, "under_investigation", None, None),
    ],
)
def test_other_tools_cyclonedx_states_are_mapped(
    analysis: dict[str, Any], state: str, justification: str | None, impact: str | None
) -> None:
    doc = read_vex(json.dumps(_foreign_cdx(**analysis)).encode())
    (s,) = doc.statements
    assert (s.state, s.justification, s.impact) == (state, justification, impact)
    assert s.source_state == analysis["state"]
    assert s.author == "Acme" and s.timestamp == "2025-01-02T02:04:05Z"
    assert s.product.purl == "pkg:pypi/x@1" and s.component is None


def test_a_disagreeing_justification_property_is_not_believed() -> None:
    doc = _foreign_cdx(state="not_affected", justification="code_not_reachable")
    doc["vulnerabilities"][0]["properties"] = [
        {"name": "gpuprov:vex:justification", "value": "component_not_present"}
    ]
    (s,) = read_vex(json.dumps(doc).encode()).statements
    assert s.justification == "vulnerable_code_not_in_execute_path"


# -- in: refusals -----------------------------------------------------------------------------


def _openvex_with(change: Any) -> bytes:
    doc = copy.deepcopy(_openvex(FINDINGS[:1]))
    change(doc)
    return json.dumps(doc).encode()


def _set(path: list[Any], value: Any) -> Any:
    def change(doc: Any) -> None:
        for p in path[:-1]:
            doc = doc[p]
        if value is _DELETE:
            del doc[path[-1]]
        else:
            doc[path[-1]] = value

    return change


_DELETE = object()
ST = ["statements", 0]


@pytest.mark.parametrize(
    ("data", "reason", "message"),
    [
        (b"", "not_json", "not JSON"),
        (b'{"a": "\xc3\x28"}', "not_json", "not UTF-8"),
        (b'{"a": 1, "a": 2}', "not_json", "appears twice"),
        (b'{"a": NaN}', "not_json", "NaN is not a JSON number"),
        (b"[]", "unknown_format", "neither OpenVEX"),
        (b"[" * 40 + b"]" * 40, "too_deep", "deeper than 32"),
        (
            _openvex_with(_set(["@context"], "https://openvex.dev/ns")),
            "not_openvex",
            "gpuprov reads OpenVEX v0.2.0",
        ),
        (
            _openvex_with(_set([*ST, "status"], "exploitable")),
            "unknown_status",
            "'exploitable' is not an OpenVEX status",
        ),
        (
            _openvex_with(_set([*ST, "justification"], "code_not_present")),
            "unknown_justification",
            "'code_not_present' is not an OpenVEX justification",
        ),
        (
            _openvex_with(_set([*ST, "action_statement"], _DELETE)),
            "not_openvex",
            "not valid OpenVEX v0.2.0: /statements/0",
        ),
        (_openvex_with(_set(["author"], _DELETE)), "not_openvex", '"author" is a required'),
        (_openvex_with(_set([*ST, "products"], [])), "invalid", "statements[0]: names no product"),
        (
            _openvex_with(_set([*ST, "products", 0, "hashes", "sha-256"], "xyz")),
            "invalid",
            "hashes.sha-256: not a SHA-256 digest",
        ),
        (
            _openvex_with(_set(["timestamp"], "yesterday")),
            "invalid",
            "'yesterday' is not an RFC 3339 date-time",
        ),
        (_openvex_with(_set(["timestamp"], "2025-01-01T00:00:00")), "invalid", "no time zone"),
        (
            _openvex_with(_set([*ST, "vulnerability", "name"], "C" * 300)),
            "invalid",
            "longer than 256 characters",
        ),
        (
            _openvex_with(_set([*ST, "status_notes"], "n" * 70_000)),
            "too_large",
            "status_notes: 70000 characters",
        ),
    ],
)
def test_malformed_documents_are_refused_by_name(data: bytes, reason: str, message: str) -> None:
    with pytest.raises(VexRefused) as refused:
        read_vex(data)
    assert refused.value.reason == reason
    assert message in refused.value.message


def test_size_and_count_limits() -> None:
    data = openvex_json(_openvex()).encode()
    with pytest.raises(VexRefused, match="more than the 100-byte limit") as e:
        read_vex(data, max_bytes=100)
    assert e.value.reason == "too_large"
    with pytest.raises(VexRefused, match="more than 3 statements") as e:
        read_vex(data, max_statements=3)
    assert e.value.reason == "too_many"


def _cdx_with(change: Any) -> bytes:
    doc = json.loads(_cdx(FINDINGS[:1]))
    change(doc)
    return json.dumps(doc).encode()


V = ["vulnerabilities", 0]


@pytest.mark.parametrize(
    ("data", "reason", "message"),
    [
        (_cdx_with(_set(["specVersion"], "1.2")), "not_cyclonedx", "specVersion '1.2'"),
        (
            _cdx_with(_set([*V, "analysis", "state"], "bogus")),
            "unknown_status",
            "'bogus' is not a CycloneDX analysis state",
        ),
        (
            _cdx_with(_set([*V, "analysis", "justification"], "bogus")),
            "unknown_justification",
            "'bogus' is not a CycloneDX justification",
        ),
        (
            _cdx_with(_set([*V, "analysis", "state"], _DELETE)),
            "invalid",
            "vulnerabilities[0].analysis.state: missing",
        ),
        (_cdx_with(_set(["vulnerabilities"], [])), "invalid", "no vulnerabilities"),
        (
            _cdx_with(_set([*V, "affects"], [{"ref": "nowhere"}])),
            "invalid",
            "'nowhere' names no component of this BOM",
        ),
        (_cdx_with(_set([*V, "id"], 5)), "not_cyclonedx", "not valid CycloneDX 1.6"),
        (_cdx_with(_set(["metadata", "timestamp"], _DELETE)), "invalid", "no time"),
        (_cdx_with(_set([*V, "id"], _DELETE)), "invalid", "vulnerabilities[0].id: missing"),
        (_cdx_with(_set([*V, "affects"], _DELETE)), "invalid", "affects: names no component"),
    ],
)
def test_malformed_cyclonedx_is_refused_by_name(data: bytes, reason: str, message: str) -> None:
    with pytest.raises(VexRefused) as refused:
        read_vex(data)
    assert refused.value.reason == reason
    assert message in refused.value.message


def test_not_affected_without_a_reason_is_refused() -> None:
    doc = _foreign_cdx(state="not_affected")
    with pytest.raises(VexRefused, match="not_affected without a justification or a detail"):
        read_vex(json.dumps(doc).encode())


# -- fuzz -------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_SEEDS = [_openvex(FINDINGS), json.loads(_cdx(FINDINGS))]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _read_or_refuse(data: bytes) -> None:
    try:
        doc = read_vex(data)
    except VexRefused as e:
        assert e.message and e.reason
    else:
        assert isinstance(doc, VexDocument)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_bytes(data: bytes) -> None:
    _read_or_refuse(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([0, 1]), st.data(), _JSON)
def test_fuzz_mutated_documents(seed: int, data: st.DataObject, value: Any) -> None:
    doc = copy.deepcopy(_SEEDS[seed])
    paths = _paths(doc)[1:]
    path = data.draw(st.sampled_from(paths))
    target = doc
    for p in path[:-1]:
        target = target[p]
    if data.draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = value
    _read_or_refuse(json.dumps(doc).encode())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_JSON, st.sampled_from(["openvex", "cyclonedx"]))
def test_fuzz_json_values_of_either_shape(value: Any, shape: str) -> None:
    doc: Any = value
    if isinstance(value, dict):
        doc = dict(value)
        if shape == "openvex":
            doc["@context"] = "https://openvex.dev/ns/v0.2.0"
        else:
            doc.update(bomFormat="CycloneDX", specVersion="1.6")
    _read_or_refuse(json.dumps(doc).encode())
