"""in-toto Statement parsing and subject matching (in-toto attestation framework v1).

Kept to plain JSON: the upstream in-toto-attestation package drops empty predicates and
sigstore's `Statement` insists on subject names, which cosign statements lack.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from scanner.loaders import load_json
from scanner.verify.errors import Rejected

STATEMENT_V1 = "https://in-toto.io/Statement/v1"
STATEMENT_V01 = "https://in-toto.io/Statement/v0.1"


class Subject(Struct, frozen=True):
    name: str
    digests: tuple[tuple[str, str], ...]  # (algorithm, lowercase hex), sorted

    def digest(self, algorithm: str) -> str | None:
        return dict(self.digests).get(algorithm)


class Statement(Struct, frozen=True):
    """A parsed in-toto statement; `predicate` is left as JSON."""

    type: str
    subjects: tuple[Subject, ...]
    predicate_type: str
    predicate: dict[str, Any]

    @classmethod
    def from_bytes(cls, payload: bytes, *, allow_v01: bool = False) -> Statement:
        """Parse a statement; v0.1 only where the caller opts in (old cosign attestations)."""
        try:
            doc = load_json(payload)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise Rejected(f"in-toto statement is not JSON: {e}") from e
        if not isinstance(doc, dict):
            raise Rejected("in-toto statement is not a JSON object")
        kind = str(doc.get("_type"))
        allowed = (STATEMENT_V1, STATEMENT_V01) if allow_v01 else (STATEMENT_V1,)
        if kind not in allowed:
            raise Rejected(f"unsupported in-toto statement type {kind!r}")
        raw_subjects = doc.get("subject")
        if not isinstance(raw_subjects, list) or not raw_subjects:
            raise Rejected("in-toto statement has no subject")
        subjects = []
        for item in raw_subjects:
            digest = item.get("digest") if isinstance(item, dict) else None
            if not isinstance(digest, dict) or not digest:
                raise Rejected("in-toto subject has no digest")
            pairs = tuple(sorted((str(k).lower(), str(v).lower()) for k, v in digest.items()))
            name = item.get("name", "")
            subjects.append(Subject(name if isinstance(name, str) else "", pairs))
        predicate_type = doc.get("predicateType")
        if not isinstance(predicate_type, str) or not predicate_type:
            raise Rejected("in-toto statement has no predicateType")
        predicate = doc.get("predicate", {})
        if not isinstance(predicate, dict):
            raise Rejected("in-toto predicate is not a JSON object")
        return cls(kind, tuple(subjects), predicate_type, predicate)

    def require_subject(self, sha256_hex: str) -> Subject:
        """The subject whose SHA-256 equals `sha256_hex`; reject when none does."""
        wanted = sha256_hex.lower().removeprefix("sha256:")
        for subject in self.subjects:
            if subject.digest("sha256") == wanted:
                return subject
        listed = ", ".join(
            f"{s.name or '?'}=sha256:{(s.digest('sha256') or 'none')[:16]}…" for s in self.subjects
        )
        raise Rejected(f"in-toto subject does not match sha256:{wanted} (statement lists {listed})")
