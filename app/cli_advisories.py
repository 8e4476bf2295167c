"""`gpuprov advisories import PATH...`: security advisories from files into the database of
``GPUPROV_DATABASE_URL`` (docs/advisories.md).

Files are read with the scanner's pure readers; NVIDIA's layout (``YEAR/<bulletin>/`` with the
CSAF document, its CVE Records and a ``.sha256`` beside each) is read as bulletins: the CVE
Records beside a CSAF document complete its version texts and are not imported on their own.
Each document is stored in its own transaction, so one refused file keeps none of the others
from being imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from scanner.cli_common import StrictCommand, out, say, typer_app

if TYPE_CHECKING:
    from app.storage.session import Database
    from scanner.advisories.document import Advisory

EXIT_REFUSED = 1
EXIT_USAGE = 2


class ImportFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


@dataclass
class ImportSummary:
    """What an import run did: the CLI's JSON answer."""

    imported: int = 0
    unchanged: int = 0
    refused: list[dict[str, str]] = field(default_factory=list)
    digest_mismatches: list[str] = field(default_factory=list)
    vulnerabilities: set[str] = field(default_factory=set)
    unparsed_versions: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "unchanged": self.unchanged,
            "refused": self.refused,
            "digest_mismatches": self.digest_mismatches,
            "vulnerabilities": len(self.vulnerabilities),
            "unparsed_versions": self.unparsed_versions,
        }


@dataclass
class _Read:
    path: Path
    data: bytes
    advisory: Advisory
    mismatch: bool


def _read_all(
    paths: Iterable[Path], *, strict: bool, max_bytes: int, summary: ImportSummary
) -> list[_Read]:
    from scanner.advisories.document import DocumentRefused
    from scanner.advisories.feed import check_digest, read_document

    found: list[_Read] = []
    for path in paths:
        name = str(path)
        try:
            with path.open("rb") as f:
                # one byte past the limit is enough to refuse a file by its size
                data = f.read(max_bytes + 1)
        except OSError as e:
            summary.refused.append({"path": name, "error": f"unreadable: {e.strerror or e}"})
            continue
        digest = check_digest(path, data)
        if digest in ("mismatch", "unreadable"):
            what = (
                "does not match its .sha256"
                if digest == "mismatch"
                else "its .sha256 holds no SHA-256 digest"
            )
            if strict:
                summary.refused.append({"path": name, "error": f"digest_mismatch: {what}"})
                continue
            summary.digest_mismatches.append(name)
        try:
            advisory = read_document(data, max_bytes=max_bytes)
        except DocumentRefused as e:
            summary.refused.append({"path": name, "error": str(e)})
            continue
        found.append(_Read(path, data, advisory, digest in ("mismatch", "unreadable")))
    return found


def _bulletins(found: list[_Read]) -> list[_Read]:
    """The documents to store: a CSAF document completed by the CVE Records beside it, and
    every document that is not such a record."""
    from scanner.advisories.feed import complement

    by_dir: dict[Path, list[_Read]] = {}
    for r in found:
        by_dir.setdefault(r.path.parent, []).append(r)
    out_: list[_Read] = []
    for group in by_dir.values():
        records = [r.advisory for r in group if r.advisory.format == "cve_record"]
        has_csaf = any(r.advisory.format == "csaf" for r in group)
        for r in group:
            if r.advisory.format == "csaf":
                out_.append(_Read(r.path, r.data, complement(r.advisory, records), r.mismatch))
            elif not (has_csaf and r.advisory.format == "cve_record"):
                out_.append(r)
    return out_


def import_paths(
    db: Database, paths: Iterable[Path], *, strict: bool, max_bytes: int
) -> ImportSummary:
    """Import every advisory document under ``paths`` (one transaction each)."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.clock import utcnow
    from app.domain.advisories import import_advisory
    from scanner.advisories.feed import find_documents

    summary = ImportSummary()
    files = find_documents(paths)
    for r in _bulletins(_read_all(files, strict=strict, max_bytes=max_bytes, summary=summary)):
        try:
            with db.transaction(write=True) as session:
                result = import_advisory(
                    session,
                    r.advisory,
                    r.data,
                    source=str(r.path.resolve()),
                    digest_mismatch=r.mismatch,
                    now=utcnow(),
                )
        except SQLAlchemyError as e:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            summary.refused.append({"path": str(r.path), "error": f"not stored: {first}"})
            continue
        if result.changed:
            summary.imported += 1
        else:
            summary.unchanged += 1
        if result.note:
            summary.notes.append(f"{r.path}: {result.note}")
        summary.vulnerabilities.update(result.vulnerabilities)
        summary.unparsed_versions.extend(result.unparsed)
    return summary


advisories_app = typer_app(help="Security advisories (CSAF 2.0, OSV, CVE Records).")


@advisories_app.command("import", cls=StrictCommand)
def advisories_import(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="CSAF 2.0, OSV or CVE Record files, or directories of them (recursively)",
            show_default=False,
        ),
    ],
    strict: Annotated[
        bool,
        typer.Option("--strict", help="refuse a document whose .sha256 does not match"),
    ] = False,
    format: Annotated[
        ImportFormat, typer.Option("--format", help="text or json (the summary's form)")
    ] = ImportFormat.TEXT,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="SQLAlchemy URL; default $GPUPROV_DATABASE_URL or sqlite:///./gpuprov.db",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Import advisories; exit 1 when any file was refused (the rest is kept)."""
    from app.cli import _require_current_schema, _settings
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        summary = import_paths(db, paths, strict=strict, max_bytes=settings.max_advisory_bytes)
    finally:
        db.dispose()
    if format is ImportFormat.JSON:
        # json.dumps escapes every control character (ensure_ascii): safe on a terminal as is
        typer.echo(json.dumps(summary.as_dict(), indent=2))
    else:
        for item in summary.refused:
            say(f"refused {item['path']}: {item['error']}")
        for path in summary.digest_mismatches:
            say(f"digest mismatch (imported, marked): {path}")
        for note in summary.notes:
            say(note)
        out(
            f"imported {summary.imported}, unchanged {summary.unchanged}, "
            f"refused {len(summary.refused)}, digest mismatches "
            f"{len(summary.digest_mismatches)}, vulnerabilities {len(summary.vulnerabilities)}, "
            f"unparsed versions {len(summary.unparsed_versions)}"
        )
    if summary.refused:
        raise typer.Exit(EXIT_REFUSED)


def register(app: typer.Typer) -> None:
    """Add `advisories` to a `gpuprov` command line."""
    app.add_typer(advisories_app, name="advisories")
