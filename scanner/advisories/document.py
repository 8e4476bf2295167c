"""The advisory documents this project reads, and how one is refused: by name.

Every reader takes the raw bytes of one document, refuses what is too large, not JSON or not
of its format (``DocumentRefused`` with a short ``reason`` code and a precise message), and
returns format-neutral values (``Advisory``, ``Vulnerability``, ``ProductStatus``) that the
service stores and the matcher reads. Nothing here touches a filesystem or a database.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any, Literal

import jsonschema_rs
from msgspec import Struct

#: the default cap on one document (the issue asks for at least 15 MB; NVIDIA's largest is 0.2 MB)
DEFAULT_MAX_BYTES = 32 * 1024 * 1024

Reason = Literal[
    "too_large", "not_json", "not_csaf", "not_osv", "not_cve_record", "unknown_format", "invalid"
]
Format = Literal["csaf", "osv", "cve_record"]

#: every ``product_status`` list of CSAF 2.0 §3.2.3.9, in the spec's order
CSAF_STATUSES = (
    "first_affected",
    "first_fixed",
    "fixed",
    "known_affected",
    "known_not_affected",
    "last_affected",
    "recommended",
    "under_investigation",
)


class DocumentRefused(Exception):
    """A document that cannot be imported, with a ``reason`` code and a message naming why."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class Score(Struct, frozen=True, kw_only=True):
    """A CVSS score as published (v3.x or v2; v4 where a publisher gives one)."""

    version: str
    #: None where the publisher gives only a vector (OSV)
    base_score: float | None
    severity: str | None
    vector: str | None


class ProductStatus(Struct, frozen=True, kw_only=True):
    """One product's status for one vulnerability, with its version text parsed (or not)."""

    product_id: str
    status: str
    #: the product as people name it ("GeForce", "CUDA Toolkit"; the OSV package name)
    product: str
    #: the version text as the publisher wrote it (CSAF product name, CVE Record text) or None
    version_text: str | None = None
    #: a CSAF ``architecture`` / CVE Record platform ("Linux(R580)")
    platform: str | None = None
    #: ``ParsedVersion.as_dict()`` of the text; None when there is no text to parse
    parsed: dict[str, Any] | None = None
    #: ``vers:`` ranges given by the publisher (CSAF product_version_range, OSV ranges)
    vers: tuple[str, ...] = ()
    cpe: str | None = None
    purls: tuple[str, ...] = ()
    #: (algorithm, value, filename) of the product's file hashes (CSAF §3.1.3.3.2)
    hashes: tuple[tuple[str, str, str], ...] = ()
    #: the CSAF flag label of a known_not_affected product (its VEX justification)
    justification: str | None = None
    #: CSAF remediations for this product: {category, details, url, date}
    remediations: tuple[dict[str, Any], ...] = ()
    score: Score | None = None

    @property
    def needs_review(self) -> bool:
        """A text that did not parse or parsed with a review reason is for a person."""
        p = self.parsed
        return p is not None and (not p.get("parsed") or p.get("review") is not None)


class Vulnerability(Struct, frozen=True, kw_only=True):
    """One vulnerability of a document (a CVE, or an OSV id with its aliases)."""

    id: str
    aliases: tuple[str, ...] = ()
    title: str | None = None
    description: str | None = None
    published: str | None = None
    cwe: str | None = None
    scores: tuple[Score, ...] = ()
    statuses: tuple[ProductStatus, ...] = ()
    notes: tuple[dict[str, str], ...] = ()


class Advisory(Struct, frozen=True, kw_only=True):
    """One document: who published it, which revision, and its vulnerabilities."""

    format: Format
    publisher_namespace: str
    publisher_name: str
    tracking_id: str
    version: str
    status: str
    title: str | None
    published: str | None
    updated: str | None
    vulnerabilities: tuple[Vulnerability, ...]


def load_json(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str) -> Any:
    """The JSON value of ``data``, refused when larger than ``max_bytes`` or not JSON."""
    if len(data) > max_bytes:
        raise DocumentRefused(
            "too_large", f"{len(data)} bytes is more than the {max_bytes}-byte limit of {what}"
        )
    try:
        return json.loads(data, object_pairs_hook=_unique, parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise DocumentRefused("not_json", f"not UTF-8 text: {e.reason} at byte {e.start}") from e
    except json.JSONDecodeError as e:
        raise DocumentRefused("not_json", f"not JSON: {e.msg} (line {e.lineno})") from e
    except ValueError as e:
        # a duplicate key, NaN/Infinity (not JSON), an integer past Python's 4,300 digits
        raise DocumentRefused("not_json", f"not JSON: {e}") from e
    except RecursionError as e:
        raise DocumentRefused("not_json", "not JSON: nested too deeply") from e


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 leaves a repeated name's meaning open: two readers could see two documents
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _schema(name: str) -> Any:
    return json.loads(resources.files("scanner.advisories").joinpath("schemas", name).read_text())


@cache
def _validator(kind: str) -> Any:
    if kind == "csaf":
        # the CSAF schema names FIRST's CVSS schemas by URL: resolved from the packaged copies
        registry = jsonschema_rs.Registry(
            [
                (f"https://www.first.org/cvss/cvss-v{v}.json", _schema(f"cvss-v{v}.json"))
                for v in ("2.0", "3.0", "3.1")
            ]
        )
        return jsonschema_rs.validator_for(_schema("csaf_2.0.json"), registry=registry)
    return jsonschema_rs.validator_for(_schema("osv.json"))


def schema_errors(kind: Literal["csaf", "osv"], doc: Any, limit: int = 5) -> list[str]:
    """The first ``limit`` schema violations of ``doc`` (JSON pointer: message); empty if valid."""
    out = []
    for err in _validator(kind).iter_errors(doc):
        where = "/" + "/".join(str(p) for p in err.instance_path)
        out.append(f"{where}: {err.message}"[:300])
        if len(out) >= limit:
            break
    return out
