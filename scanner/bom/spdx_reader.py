"""Read an SPDX 2.2 / 2.3 document (JSON or tag-value) with spdx-tools, within limits, checked.

Wherever a BOM is accepted (the service's reports and gate, `gpuprov push`, `gpuprov gate
--bom`) an SPDX document is told from CycloneDX by its content (`tag_value`, `generation`),
parsed by spdx-tools and checked here; `scanner.bom.spdx_mapping` then gives it the reading of
another tool's CycloneDX BOM. Pure: text or JSON values in, the library's `Document` out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from msgspec import Struct

if TYPE_CHECKING:
    from spdx_tools.spdx.model import Document

#: the media types of the two forms read (IANA: application/spdx+json, text/spdx)
SPDX_JSON_MEDIA_TYPE: Final = "application/spdx+json"
SPDX_TAG_VALUE_MEDIA_TYPE: Final = "text/spdx"
SUPPORTED: Final = ("SPDX-2.2", "SPDX-2.3")
#: the answer to an SPDX 3 document (docs/bom-properties.md, "SPDX")
SPDX3_REFUSED: Final = (
    "SPDX 3.0 (JSON-LD) is not read: no maintained Python library reads it yet (spdx-tools "
    "0.8 only writes a draft of it); send SPDX 2.3 JSON or tag-value (`syft -o "
    "spdx-json@2.3`, `trivy --format spdx-json`) or CycloneDX"
)
MAX_MESSAGES: Final = 5

_TAG_VALUE: Final = re.compile(r"\A\ufeff?(?:[ \t]*(?:#[^\n]*)?\r?\n)*[ \t]*SPDXVersion:")
_TAG_VERSION: Final = re.compile(r"^[ \t]*SPDXVersion:[ \t]*(\S*)", re.MULTILINE)
#: the tag-value tags that open an element, a relationship, an annotation, an external reference
_TAG_COUNTS: Final = {
    "elements": re.compile(r"^[ \t]*(?:PackageName|FileName|SnippetSPDXID):", re.MULTILINE),
    "relationships": re.compile(r"^[ \t]*Relationship:", re.MULTILINE),
    "annotations": re.compile(r"^[ \t]*Annotator:", re.MULTILINE),
}


class SpdxRefused(ValueError):
    """An SPDX document gpuprov does not read; ``field`` names the SPDX field or rule that
    failed, ``too_large`` a document over a limit (the service answers 413, else 422)."""

    def __init__(self, message: str, field: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.too_large = too_large


class SpdxLimits(Struct, frozen=True):
    """What one SPDX document may hold: the service's CycloneDX limits, read the same way."""

    #: packages, files and snippets together (CycloneDX: components)
    max_elements: int = 100_000
    #: checksums, external references, files or annotations of one element (CycloneDX:
    #: properties of one component)
    max_per_element: int = 1_000

    @property
    def max_links(self) -> int:
        """Relationships, and annotations, each: ten per element allowed."""
        return 10 * self.max_elements


DEFAULT_LIMITS: Final = SpdxLimits()


def tag_value(text: str) -> bool:
    """Whether the text is an SPDX tag-value document (its first tag is ``SPDXVersion``)."""
    return _TAG_VALUE.match(text) is not None


def generation(document: Any) -> Literal["2", "3"] | None:
    """Which SPDX a parsed JSON document is: "2" (``spdxVersion``), "3" (a JSON-LD document
    in the SPDX 3 context), or None for anything else (CycloneDX, say)."""
    if not isinstance(document, dict):
        return None
    if "spdxVersion" in document:
        version = document["spdxVersion"]
        return "3" if isinstance(version, str) and version.startswith("SPDX-3") else "2"
    context = document.get("@context")
    contexts = context if isinstance(context, list) else [context]
    if any(isinstance(c, str) and "spdx.org/rdf/3" in c for c in contexts):
        return "3"
    return None


def media_type_of(data: bytes) -> str | None:
    """The SPDX media type of a document's bytes, by content; None when it is no SPDX 2."""
    head = data[:4096].decode("utf-8", "replace")
    if tag_value(head):
        return SPDX_TAG_VALUE_MEDIA_TYPE
    if head.lstrip("\ufeff \t\r\n").startswith("{") and re.search(r'"spdxVersion"\s*:', head):
        return SPDX_JSON_MEDIA_TYPE
    return None


def _version(version: object) -> str:
    if isinstance(version, str) and version.startswith("SPDX-3"):
        raise SpdxRefused(SPDX3_REFUSED, "spdxVersion")
    if version not in SUPPORTED:
        shown = repr(version)[:40]
        raise SpdxRefused(
            f"spdxVersion {shown} is not supported; supported: {', '.join(SUPPORTED)}",
            "spdxVersion",
        )
    assert isinstance(version, str)
    return version


def _too_many(what: str, count: int, limit: int, field: str, setting: str) -> SpdxRefused:
    return SpdxRefused(
        f"the SPDX document lists {count} {what}, more than the limit of {limit} ({setting})",
        field,
        too_large=True,
    )


def _check_json_counts(document: Mapping[str, Any], limits: SpdxLimits) -> None:
    # before spdx-tools builds its model: parsing and checking cost time per element
    elements = 0
    for key in ("packages", "files", "snippets"):
        items = document.get(key)
        if isinstance(items, list):
            elements += len(items)
    if elements > limits.max_elements:
        raise _too_many(
            "packages, files and snippets",
            elements,
            limits.max_elements,
            "packages",
            "GPUPROV_MAX_REPORT_COMPONENTS",
        )
    for key in ("relationships", "annotations"):
        items = document.get(key)
        if isinstance(items, list) and len(items) > limits.max_links:
            raise _too_many(
                key, len(items), limits.max_links, key, "10 x GPUPROV_MAX_REPORT_COMPONENTS"
            )
    for key in ("packages", "files", "snippets"):
        items = document.get(key)
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, dict):
                continue
            for field in ("checksums", "externalRefs", "annotations", "hasFiles"):
                values = item.get(field)
                if isinstance(values, list) and len(values) > limits.max_per_element:
                    raise _too_many(
                        field,
                        len(values),
                        limits.max_per_element,
                        f"{key}[{i}].{field}",
                        "GPUPROV_MAX_COMPONENT_PROPERTIES",
                    )


#: a relationship type -> its inverse, for the two that the shortcuts below stand for
_INVERSE: Final = {
    "DESCRIBES": "DESCRIBED_BY",
    "DESCRIBED_BY": "DESCRIBES",
    "CONTAINS": "CONTAINED_BY",
    "CONTAINED_BY": "CONTAINS",
}


def _ids(values: object, field: str) -> list[str]:
    if not isinstance(values, list):
        raise SpdxRefused(f"{field} is no list of SPDXIDs", field)
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise SpdxRefused(f"{field}[{i}] is no SPDXID string", f"{field}[{i}]")
    return list(dict.fromkeys(values))  # duplicates dropped, as spdx-tools does


def _shortcuts_as_relationships(document: Mapping[str, Any], limits: SpdxLimits) -> dict[str, Any]:
    """The document with ``documentDescribes`` and each package's ``hasFiles`` written as the
    DESCRIBES and CONTAINS relationships they stand for (SPDX 2.3 clauses 6.1, 7.x "hasFiles"),
    exactly as spdx-tools' parser adds them, each skipped when it or its inverse is listed; in
    linear time: spdx-tools looks each one up in the list of every relationship (8,000
    elements given as hasFiles: 50 s, spdx-tools 0.8.5; bench/spdx_ingest.py)."""
    relationships = document.get("relationships", [])
    packages = document.get("packages", [])
    if not isinstance(relationships, list) or not isinstance(packages, list):
        return dict(document)  # spdx-tools names the field
    described = _ids(document.get("documentDescribes", []), "documentDescribes")
    has_files = [
        (str(p.get("SPDXID")), _ids(p.get("hasFiles", []), f"packages[{i}].hasFiles"))
        for i, p in enumerate(packages)
        if isinstance(p, dict) and "hasFiles" in p
    ]
    added = len(described) + sum(len(files) for _, files in has_files)
    if len(relationships) + added > limits.max_links:
        raise _too_many(
            "relationships (with documentDescribes and hasFiles)",
            len(relationships) + added,
            limits.max_links,
            "relationships",
            "10 x GPUPROV_MAX_REPORT_COMPONENTS",
        )
    if not added and "documentDescribes" not in document:
        return dict(document)

    def key(a: object, kind: object, b: object) -> tuple[str, str, str]:
        return (str(a), str(kind).replace("-", "_").upper(), str(b))

    listed = {
        key(r.get("spdxElementId"), r.get("relationshipType"), r.get("relatedSpdxElement"))
        for r in relationships
        if isinstance(r, dict)
    }

    def new(a: str, kind: str, b: str, known: set[tuple[str, str, str]]) -> dict[str, str] | None:
        if (a, kind, b) in known or (b, _INVERSE[kind], a) in known:
            return None
        return {"spdxElementId": a, "relationshipType": kind, "relatedSpdxElement": b}

    doc_id = str(document.get("SPDXID"))
    out = list(relationships)
    for spdx_id in described:
        found = new(doc_id, "DESCRIBES", spdx_id, listed)
        if found:
            out.append(found)
    # spdx-tools checks hasFiles against the relationships and documentDescribes only
    listed |= {
        key(r["spdxElementId"], r["relationshipType"], r["relatedSpdxElement"])
        for r in out[len(relationships) :]
    }
    for package_id, files in has_files:
        for file_id in files:
            found = new(package_id, "CONTAINS", file_id, listed)
            if found:
                out.append(found)
    rewritten = {k: v for k, v in document.items() if k != "documentDescribes"}
    rewritten["packages"] = [
        {k: v for k, v in p.items() if k != "hasFiles"} if isinstance(p, dict) else p
        for p in packages
    ]
    rewritten["relationships"] = out
    return rewritten


def read_json(document: Mapping[str, Any], limits: SpdxLimits = DEFAULT_LIMITS) -> Document:
    """An SPDX 2.2 / 2.3 JSON document (already parsed, strictly: `scanner.loaders`) as the
    library's model, checked (`check`); raises `SpdxRefused` naming the field or rule."""
    _version(document.get("spdxVersion"))
    _check_json_counts(document, limits)
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser

    plain = _shortcuts_as_relationships(document, limits)
    parsed = _parse(lambda: JsonLikeDictParser().parse(plain))
    check(parsed, limits)
    return parsed


def read_tag_value(text: str, limits: SpdxLimits = DEFAULT_LIMITS) -> Document:
    """An SPDX 2.2 / 2.3 tag-value document as the library's model, checked (`check`)."""
    found = _TAG_VERSION.search(text)
    _version(found.group(1) if found else None)
    for what, pattern in _TAG_COUNTS.items():
        count = sum(1 for _ in pattern.finditer(text))
        limit = limits.max_elements if what == "elements" else limits.max_links
        if count > limit:
            raise _too_many(what, count, limit, what, "GPUPROV_MAX_REPORT_COMPONENTS")
    if "\x00" in text:
        raise SpdxRefused("the tag-value document holds a NUL character", "text")
    parsed = _parse(lambda: _tag_value_parser().parse(text))
    check(parsed, limits)
    return parsed


def _tag_value_parser() -> Any:
    """spdx-tools' tag-value parser, with the CONTAINS relationship of a file that follows its
    package (SPDX 2.3 clause 5.2.2) checked against the relationships so far in a set: the
    library looks it up in their list, once per file (quadratic; bench/spdx_ingest.py)."""
    from spdx_tools.spdx.model import Relationship, RelationshipType
    from spdx_tools.spdx.parser.tagvalue.parser import Parser

    class LinearParser(Parser):  # type: ignore[misc]
        def __init__(self) -> None:
            # the library's own LALR tables (the grammar is its own): PLY would otherwise
            # write new ones beside this module, at run time
            super().__init__(
                tabmodule="spdx_tools.spdx.parser.tagvalue.parsetab",
                write_tables=False,
                debug=False,
            )
            self._seen: set[tuple[Any, ...]] = set()
            self._indexed = 0

        def check_for_preceding_package_and_build_contains_relationship(self) -> None:
            # the library's method, the membership test through `_seen` (Relationship is an
            # unhashable dataclass: its fields are the key)
            file_spdx_id = self.current_element["spdx_id"]
            if "packages" not in self.elements_built:
                return
            if not self.elements_built["packages"]:
                self.logger.append(
                    f"Error while building contains relationship for file {file_spdx_id}, "
                    "preceding package was not parsed successfully."
                )
                return
            package_spdx_id = self.elements_built["packages"][-1].spdx_id
            built = self.elements_built.setdefault("relationships", [])
            for r in built[self._indexed :]:
                self._seen.add(
                    (r.spdx_element_id, r.relationship_type, r.related_spdx_element_id, r.comment)
                )
            self._indexed = len(built)
            key = (package_spdx_id, RelationshipType.CONTAINS, file_spdx_id, None)
            if key not in self._seen:
                built.append(Relationship(package_spdx_id, RelationshipType.CONTAINS, file_spdx_id))

    return LinearParser()


def _parse(parse: Any) -> Document:
    from spdx_tools.spdx.parser.error import SPDXParsingError

    try:
        return parse()
    except SPDXParsingError as e:
        messages = [str(m) for m in e.get_messages()]
        raise SpdxRefused(
            "the document is no valid SPDX 2: "
            + "; ".join(m[:300] for m in messages[:MAX_MESSAGES]),
            _field_of(messages[0]) if messages else "document",
        ) from None
    except (RecursionError, MemoryError):
        raise
    except Exception as e:  # spdx-tools on hostile input: a library error is the input's fault
        raise SpdxRefused(
            f"spdx-tools cannot read the document: {type(e).__name__}: {str(e)[:300]}",
            "document",
        ) from None


_PARSER_FIELD: Final = re.compile(r"(?:Error while (?:parsing|constructing) )?(\w+)")


def _field_of(message: str) -> str:
    found = _PARSER_FIELD.match(message)
    return found.group(1) if found else "document"


def check(document: Document, limits: SpdxLimits = DEFAULT_LIMITS) -> None:
    """The SPDX 2 rules, each element's by spdx-tools' own validators and the document-wide ones
    (unique SPDXIDs, relationship and annotation ends, what it describes) here, in linear time:
    spdx-tools' `validate_full_spdx_document` looks each reference up in a list of every
    SPDXID (2,000 packages: 3.7 s, measured with spdx-tools 0.8.5). Raises `SpdxRefused`."""
    from spdx_tools.spdx.validation.creation_info_validator import validate_creation_info
    from spdx_tools.spdx.validation.file_validator import validate_files
    from spdx_tools.spdx.validation.package_validator import validate_packages
    from spdx_tools.spdx.validation.snippet_validator import validate_snippets

    version = document.creation_info.spdx_version
    _version(version)
    messages = [
        *validate_creation_info(document.creation_info, version),
        *validate_packages(document.packages, version),
        *validate_files(document.files, version),
        *validate_snippets(document.snippets, version),
    ]
    if messages:
        raise SpdxRefused(
            "the document breaks SPDX rules (spdx-tools): "
            + "; ".join(
                f"{_where(m.context)}: {m.validation_message[:300]}"
                for m in messages[:MAX_MESSAGES]
            ),
            _where(messages[0].context),
        )
    ids = _unique_ids(document)
    _check_references(document, ids)
    for package in document.packages:
        if len(package.external_references) > limits.max_per_element:
            raise _too_many(
                "external references of one package",
                len(package.external_references),
                limits.max_per_element,
                f"{package.spdx_id}.externalRefs",
                "GPUPROV_MAX_COMPONENT_PROPERTIES",
            )


def _where(context: Any) -> str:
    """The element a validation message is about, and the part of it (``SPDXRef-File-1
    checksum``): spdx-tools gives a checksum or a reference its element as parent."""
    kind = context.element_type.name.lower() if context.element_type else ""
    if context.spdx_id:
        return str(context.spdx_id)
    if context.parent_id:
        return f"{context.parent_id} {kind}".strip()
    return kind or "document"


def _unique_ids(document: Document) -> set[str]:
    """Every SPDXID of the document, once; a second use refused (SPDX 2.3 clauses 6.3, 7.2,
    8.2, 9.1: an SPDX identifier is unique within its document)."""
    ids = {document.creation_info.spdx_id}
    elements: Iterable[Any] = (*document.packages, *document.files, *document.snippets)
    for element in elements:
        if element.spdx_id in ids:
            raise SpdxRefused(
                f"SPDXID {element.spdx_id[:120]!r} is used by more than one element; an SPDX "
                "identifier is unique within its document (SPDX 2.3 clauses 7.2, 8.2)",
                "SPDXID",
            )
        ids.add(element.spdx_id)
    return ids


def _check_references(document: Document, ids: set[str]) -> None:
    """Each relationship's and annotation's ends name an element of the document (or of an
    external document it declares); the document describes something (SPDX 2.3 clause 6.1)."""
    from spdx_tools.spdx.model import RelationshipType, SpdxNoAssertion, SpdxNone

    external = {r.document_ref_id for r in document.creation_info.external_document_refs}

    def known(spdx_id: object, field: str) -> None:
        if isinstance(spdx_id, SpdxNone | SpdxNoAssertion):
            return
        assert isinstance(spdx_id, str)
        prefix, _, local = spdx_id.rpartition(":")
        if prefix and prefix in external and local.startswith("SPDXRef-"):
            return
        if spdx_id not in ids:
            raise SpdxRefused(f"{field} {spdx_id[:120]!r} names no element of the document", field)

    for relationship in document.relationships:
        known(relationship.spdx_element_id, "relationships.spdxElementId")
        known(relationship.related_spdx_element_id, "relationships.relatedSpdxElement")
    for annotation in document.annotations:
        known(annotation.spdx_id, "annotations.SPDXID")
    doc_id = document.creation_info.spdx_id
    describes = [
        r
        for r in document.relationships
        if (r.relationship_type is RelationshipType.DESCRIBES and r.spdx_element_id == doc_id)
        or (
            r.relationship_type is RelationshipType.DESCRIBED_BY
            and r.related_spdx_element_id == doc_id
        )
    ]
    only_one = len(document.packages) == 1 and not document.files and not document.snippets
    if not describes and not only_one:
        raise SpdxRefused(
            f'the document describes nothing: it needs a relationship "{doc_id} DESCRIBES ..." '
            "(documentDescribes) naming the image or host (SPDX 2.3 clause 6.1)",
            "documentDescribes",
        )


def described(document: Document) -> Sequence[str]:
    """The SPDXIDs the document describes, in document order (its only package when it has
    one package and no DESCRIBES relationship)."""
    from spdx_tools.spdx.model import RelationshipType

    doc_id = document.creation_info.spdx_id
    out: list[str] = []
    for r in document.relationships:
        target: object = None
        if r.relationship_type is RelationshipType.DESCRIBES and r.spdx_element_id == doc_id:
            target = r.related_spdx_element_id
        elif (
            r.relationship_type is RelationshipType.DESCRIBED_BY
            and r.related_spdx_element_id == doc_id
        ):
            target = r.spdx_element_id
        if isinstance(target, str) and target not in out:
            out.append(target)
    if not out and len(document.packages) == 1:
        out.append(document.packages[0].spdx_id)
    return out
