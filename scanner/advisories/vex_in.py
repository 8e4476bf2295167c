"""VEX documents read: OpenVEX v0.2.0 and CycloneDX VEX (a BOM with
``vulnerabilities[].analysis`` and ``affects``), each checked against its schema and refused by
name when malformed or hostile, then flattened into format-neutral statements (one per CVE,
product and subcomponent) in OpenVEX's vocabulary (vex_terms.py holds the mapping).

Pure: bytes in, statements out. Who may import them and what they change is the service's
business (analyses, docs/vex.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Literal

from msgspec import Struct

from scanner.advisories.document import DocumentRefused, load_json
from scanner.advisories.vex_terms import (
    CDX_JUSTIFICATIONS,
    CDX_STATES,
    JUSTIFICATION_FROM_CDX,
    JUSTIFICATION_PROPERTY,
    JUSTIFICATION_TO_CDX,
    OPENVEX_CONTEXT,
    OPENVEX_JUSTIFICATIONS,
    OPENVEX_STATUSES,
    STATE_FROM_CDX,
    State,
)

#: the default cap on one VEX document
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: deepest nesting of arrays and objects accepted (OpenVEX needs 6, CycloneDX VEX about 10)
MAX_DEPTH = 32
#: most statements one document may flatten to (statements x products x subcomponents)
MAX_STATEMENTS = 10_000
#: longest free text kept from one field (notes, details, statements)
MAX_TEXT = 64 * 1024
#: CycloneDX versions with ``vulnerabilities[].analysis`` that cyclonedx-python-lib validates
CDX_VERSIONS = ("1.4", "1.5", "1.6", "1.7")

Reason = Literal[
    "too_large",
    "not_json",
    "too_deep",
    "too_many",
    "unknown_format",
    "not_openvex",
    "not_cyclonedx",
    "invalid",
    "unknown_status",
    "unknown_justification",
]

_SHA256 = re.compile(r"[0-9a-f]{64}")


class VexRefused(Exception):
    """A VEX document that cannot be read, with a ``reason`` code and a message naming why."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class ProductRef(Struct, frozen=True):
    """A product as a VEX document names it: its IRI / bom-ref, purl and SHA-256 (hex)."""

    iri: str | None
    purl: str | None = None
    sha256: str | None = None


class VexStatement(Struct, frozen=True, kw_only=True):
    """One statement: a CVE's state on one product (and subcomponent), in OpenVEX's words."""

    cve: str
    product: ProductRef
    #: the part of the product the statement is about (OpenVEX subcomponent; the CycloneDX
    #: component ``affects`` names inside the BOM's subject)
    component: ProductRef | None
    state: State
    justification: str | None
    #: how the state was determined (OpenVEX status_notes, CycloneDX analysis.detail)
    detail: str | None
    #: what to do (OpenVEX action_statement, CycloneDX recommendation)
    action: str | None
    #: why not affected, in words (OpenVEX impact_statement; CycloneDX false_positive)
    impact: str | None
    author: str | None
    #: RFC 3339 UTC, to the second
    timestamp: str
    format: Literal["openvex", "cyclonedx"]
    #: the state and justification as the document wrote them
    source_state: str
    source_justification: str | None


class VexDocument(Struct, frozen=True, kw_only=True):
    """A read VEX document: its id, author, time and statements."""

    format: Literal["openvex", "cyclonedx"]
    id: str | None
    author: str | None
    timestamp: str | None
    statements: tuple[VexStatement, ...]


def read_vex(
    data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, max_statements: int = MAX_STATEMENTS
) -> VexDocument:
    """The statements of an OpenVEX v0.2.0 or CycloneDX VEX document; ``VexRefused`` names
    why a document is not one."""
    try:
        doc = load_json(data, max_bytes=max_bytes, what="a VEX document")
    except DocumentRefused as e:
        reason: Reason = "too_large" if e.reason == "too_large" else "not_json"
        raise VexRefused(reason, e.message) from None
    _check_depth(doc)
    if isinstance(doc, dict) and "@context" in doc:
        return _openvex(doc, max_statements)
    if isinstance(doc, dict) and doc.get("bomFormat") == "CycloneDX":
        return _cyclonedx(data, doc, max_statements)
    raise VexRefused(
        "unknown_format",
        "neither OpenVEX (an @context) nor CycloneDX (bomFormat: CycloneDX), by its top level",
    )


def _check_depth(doc: Any) -> None:
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise VexRefused("too_deep", f"nested deeper than {MAX_DEPTH} levels")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items if isinstance(v, dict | list))


def _text(value: Any, where: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise VexRefused("invalid", f"{where}: missing")
        return None
    if not isinstance(value, str):
        raise VexRefused("invalid", f"{where}: not a string")
    if len(value) > MAX_TEXT:
        raise VexRefused("too_large", f"{where}: {len(value)} characters, more than {MAX_TEXT}")
    if required and not value.strip():
        raise VexRefused("invalid", f"{where}: empty")
    return value


def _time(value: Any, where: str) -> str:
    text = _text(value, where, required=True) or ""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise VexRefused(
            "invalid", f"{where}: {text[:64]!r} is not an RFC 3339 date-time"
        ) from None
    if when.tzinfo is None:
        raise VexRefused("invalid", f"{where}: {text[:64]!r} has no time zone")
    return when.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _sha256(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.fullmatch(value.lower()):
        raise VexRefused("invalid", f"{where}: not a SHA-256 digest (64 hex digits)")
    return value.lower()


def _schema_errors(validator: Any, doc: Any) -> list[str]:
    out = []
    for err in validator.iter_errors(doc):
        where = "/" + "/".join(str(p) for p in err.instance_path)
        out.append(f"{where}: {err.message}"[:300])
        if len(out) >= 5:
            break
    return out


# -- OpenVEX ----------------------------------------------------------------------------------


@cache
def _openvex_validator() -> Any:
    import jsonschema_rs

    text = (
        resources.files("scanner.advisories")
        .joinpath("schemas", "openvex_json_schema_0.2.0.json")
        .read_text("utf-8")
    )
    return jsonschema_rs.validator_for(json.loads(text))


def _openvex(doc: dict[str, Any], max_statements: int) -> VexDocument:
    context = doc.get("@context")
    if context != OPENVEX_CONTEXT:
        raise VexRefused(
            "not_openvex",
            f"@context {str(context)[:100]!r}: gpuprov reads OpenVEX v0.2.0 ({OPENVEX_CONTEXT})",
        )
    statements = doc.get("statements")
    # the words first, so an unknown status is named as such rather than as a schema error
    for i, st in enumerate(statements if isinstance(statements, list) else []):
        if not isinstance(st, dict):
            continue
        status = st.get("status")
        if isinstance(status, str) and status not in OPENVEX_STATUSES:
            raise VexRefused(
                "unknown_status",
                f"statements[{i}].status: {status[:64]!r} is not an OpenVEX status "
                f"({', '.join(OPENVEX_STATUSES)})",
            )
        just = st.get("justification")
        if isinstance(just, str) and just not in OPENVEX_JUSTIFICATIONS:
            raise VexRefused(
                "unknown_justification",
                f"statements[{i}].justification: {just[:64]!r} is not an OpenVEX justification "
                f"({', '.join(OPENVEX_JUSTIFICATIONS)})",
            )
    errors = _schema_errors(_openvex_validator(), doc)
    if errors:
        raise VexRefused("not_openvex", "not valid OpenVEX v0.2.0: " + "; ".join(errors))
    author = _text(doc["author"], "author", required=True)
    doc_time = _time(doc.get("last_updated") or doc["timestamp"], "timestamp")
    out: list[VexStatement] = []
    for i, st in enumerate(doc["statements"]):
        where = f"statements[{i}]"
        cve = _text(st["vulnerability"]["name"], f"{where}.vulnerability.name", required=True)
        if len(cve or "") > 256:
            raise VexRefused("invalid", f"{where}.vulnerability.name: longer than 256 characters")
        products = st.get("products") or []
        if not products:
            raise VexRefused("invalid", f"{where}: names no product")
        when = doc_time
        for key in ("last_updated", "timestamp"):
            if st.get(key):
                when = _time(st[key], f"{where}.{key}")
                break
        for j, prod in enumerate(products):
            ref = _openvex_ref(prod, f"{where}.products[{j}]")
            subs = prod.get("subcomponents") or [None]
            for k, sub in enumerate(subs):
                part = (
                    _openvex_ref(sub, f"{where}.products[{j}].subcomponents[{k}]") if sub else None
                )
                out.append(
                    VexStatement(
                        cve=str(cve),
                        product=ref,
                        component=part,
                        state=st["status"],
                        justification=st.get("justification")
                        if st["status"] == "not_affected"
                        else None,
                        detail=_text(st.get("status_notes"), f"{where}.status_notes"),
                        action=_text(st.get("action_statement"), f"{where}.action_statement"),
                        impact=_text(st.get("impact_statement"), f"{where}.impact_statement"),
                        author=author,
                        timestamp=when,
                        format="openvex",
                        source_state=st["status"],
                        source_justification=st.get("justification"),
                    )
                )
                if len(out) > max_statements:
                    raise VexRefused(
                        "too_many", f"more than {max_statements} statements (products included)"
                    )
    return VexDocument(
        format="openvex",
        id=_text(doc["@id"], "@id"),
        author=author,
        timestamp=doc_time,
        statements=tuple(out),
    )


def _openvex_ref(prod: dict[str, Any], where: str) -> ProductRef:
    iri = _text(prod.get("@id"), f"{where}.@id")
    ids = prod.get("identifiers") or {}
    purl = _text(ids.get("purl"), f"{where}.identifiers.purl")
    if purl is None and iri and iri.startswith("pkg:"):
        purl = iri
    sha = _sha256((prod.get("hashes") or {}).get("sha-256"), f"{where}.hashes.sha-256")
    return ProductRef(iri=iri, purl=purl, sha256=sha)


# -- CycloneDX --------------------------------------------------------------------------------


def _cyclonedx(data: bytes, doc: dict[str, Any], max_statements: int) -> VexDocument:
    spec = doc.get("specVersion")
    if spec not in CDX_VERSIONS:
        raise VexRefused(
            "not_cyclonedx",
            f"specVersion {str(spec)[:20]!r}: gpuprov reads CycloneDX VEX of "
            f"{', '.join(CDX_VERSIONS)}",
        )
    vulns = doc.get("vulnerabilities")
    if not isinstance(vulns, list) or not vulns:
        raise VexRefused("invalid", "no vulnerabilities: a CycloneDX VEX states at least one")
    for i, v in enumerate(vulns):
        analysis = v.get("analysis") if isinstance(v, dict) else None
        if not isinstance(analysis, dict):
            continue
        state = analysis.get("state")
        if isinstance(state, str) and state not in CDX_STATES:
            raise VexRefused(
                "unknown_status",
                f"vulnerabilities[{i}].analysis.state: {state[:64]!r} is not a CycloneDX "
                f"analysis state ({', '.join(CDX_STATES)})",
            )
        just = analysis.get("justification")
        if isinstance(just, str) and just not in CDX_JUSTIFICATIONS:
            raise VexRefused(
                "unknown_justification",
                f"vulnerabilities[{i}].analysis.justification: {just[:64]!r} is not a "
                f"CycloneDX justification ({', '.join(CDX_JUSTIFICATIONS)})",
            )
    error = _cdx_schema_error(data, str(spec))
    if error:
        raise VexRefused("not_cyclonedx", f"not valid CycloneDX {spec}: {error}")
    meta = doc.get("metadata") or {}
    subject = meta.get("component")
    index: dict[str, dict[str, Any]] = {}
    for comp in _components(doc):
        ref = comp.get("bom-ref")
        if isinstance(ref, str):
            index.setdefault(ref, comp)
    author = _cdx_author(meta)
    doc_time = _time(meta["timestamp"], "metadata.timestamp") if meta.get("timestamp") else None
    out: list[VexStatement] = []
    for i, v in enumerate(vulns):
        where = f"vulnerabilities[{i}]"
        cve = _text(v.get("id"), f"{where}.id", required=True)
        if len(cve or "") > 256:
            raise VexRefused("invalid", f"{where}.id: longer than 256 characters")
        analysis = v.get("analysis") or {}
        source_state = analysis.get("state")
        if source_state is None:
            raise VexRefused("invalid", f"{where}.analysis.state: missing (a VEX states one)")
        state = STATE_FROM_CDX[source_state]
        cdx_just = analysis.get("justification")
        justification = _cdx_justification(v, cdx_just) if state == "not_affected" else None
        detail = _text(analysis.get("detail"), f"{where}.analysis.detail")
        impact = None
        if source_state == "false_positive":
            impact = "false positive (CycloneDX analysis state false_positive)"
        if state == "not_affected" and justification is None and impact is None and not detail:
            raise VexRefused(
                "invalid", f"{where}: not_affected without a justification or a detail"
            )
        when = _cdx_time(analysis, v, where) or doc_time
        if when is None:
            raise VexRefused(
                "invalid",
                f"{where}: no time (analysis.lastUpdated, analysis.firstIssued, updated, "
                "published or metadata.timestamp)",
            )
        affects = v.get("affects") or []
        if not affects:
            raise VexRefused("invalid", f"{where}.affects: names no component")
        for j, target in enumerate(affects):
            product, part = _cdx_target(target.get("ref"), subject, index, f"{where}.affects[{j}]")
            out.append(
                VexStatement(
                    cve=str(cve),
                    product=product,
                    component=part,
                    state=state,
                    justification=justification,
                    detail=detail,
                    action=_text(v.get("recommendation"), f"{where}.recommendation"),
                    impact=impact,
                    author=author,
                    timestamp=when,
                    format="cyclonedx",
                    source_state=source_state,
                    source_justification=cdx_just,
                )
            )
            if len(out) > max_statements:
                raise VexRefused(
                    "too_many", f"more than {max_statements} statements (affects included)"
                )
    serial = doc.get("serialNumber")
    return VexDocument(
        format="cyclonedx",
        id=serial if isinstance(serial, str) else None,
        author=author,
        timestamp=doc_time,
        statements=tuple(out),
    )


@cache
def _cdx_validator(spec: str) -> Any:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    return JsonStrictValidator(SchemaVersion.from_version(spec))


def _cdx_schema_error(data: bytes, spec: str) -> str | None:
    try:
        error = _cdx_validator(spec).validate_str(data.decode("utf-8"))
    except Exception as e:  # the library's own failure on a hostile document: refused, not raised
        return f"the CycloneDX validator could not check it ({type(e).__name__})"
    return None if error is None else str(error)[:500]


def _components(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every component of the BOM, the subject and nested ones included."""
    meta = doc.get("metadata") or {}
    stack = [meta["component"]] if isinstance(meta.get("component"), dict) else []
    stack += list(doc.get("components") or [])
    while stack:
        comp = stack.pop()
        if isinstance(comp, dict):
            yield comp
            stack.extend(comp.get("components") or [])


def _cdx_author(meta: dict[str, Any]) -> str | None:
    for author in meta.get("authors") or []:
        if isinstance(author, dict) and author.get("name"):
            return _text(author["name"], "metadata.authors[].name")
    for key in ("manufacturer", "supplier"):
        who = meta.get(key)
        if isinstance(who, dict) and who.get("name"):
            return _text(who["name"], f"metadata.{key}.name")
    return None


def _cdx_time(analysis: dict[str, Any], v: dict[str, Any], where: str) -> str | None:
    for holder, key, name in (
        (analysis, "lastUpdated", "analysis.lastUpdated"),
        (analysis, "firstIssued", "analysis.firstIssued"),
        (v, "updated", "updated"),
        (v, "published", "published"),
    ):
        if holder.get(key):
            return _time(holder[key], f"{where}.{name}")
    return None


def _cdx_justification(v: dict[str, Any], cdx_just: str | None) -> str | None:
    """The OpenVEX justification of a CycloneDX one: the exact label gpuprov wrote beside it
    when it agrees with it, else the mapping table's."""
    if cdx_just is None:
        return None
    for prop in v.get("properties") or []:
        if isinstance(prop, dict) and prop.get("name") == JUSTIFICATION_PROPERTY:
            exact = prop.get("value")
            if exact in JUSTIFICATION_TO_CDX and JUSTIFICATION_TO_CDX[exact] == cdx_just:
                return str(exact)
    return JUSTIFICATION_FROM_CDX[cdx_just]


def _cdx_ref(comp: dict[str, Any], where: str) -> ProductRef:
    sha = None
    for h in comp.get("hashes") or []:
        if isinstance(h, dict) and h.get("alg") == "SHA-256":
            sha = _sha256(h.get("content"), f"{where}.hashes")
            break
    return ProductRef(
        iri=_text(comp.get("bom-ref"), f"{where}.bom-ref"),
        purl=_text(comp.get("purl"), f"{where}.purl"),
        sha256=sha,
    )


def _cdx_target(
    ref: Any, subject: Any, index: dict[str, dict[str, Any]], where: str
) -> tuple[ProductRef, ProductRef | None]:
    """(product, component) of one ``affects`` entry: a component inside the BOM's subject is
    the subject's component; the subject itself, or a purl or BOM-Link outside the BOM, is the
    product."""
    ref = _text(ref, f"{where}.ref", required=True) or ""
    comp = index.get(ref)
    if comp is None:
        if ref.startswith("pkg:"):
            return ProductRef(iri=ref, purl=ref), None
        if ref.startswith("urn:cdx:"):
            return ProductRef(iri=ref), None
        raise VexRefused("invalid", f"{where}.ref: {ref[:100]!r} names no component of this BOM")
    found = _cdx_ref(comp, where)
    if isinstance(subject, dict) and comp is not subject:
        return _cdx_ref(subject, "metadata.component"), found
    return found, None
