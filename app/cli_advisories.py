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
from collections.abc import Callable, Iterable
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
    paths: Iterable[Path],
    *,
    strict: bool,
    max_bytes: int,
    summary: ImportSummary,
    name_of: Callable[[Path], str],
) -> list[_Read]:
    from scanner.advisories.document import DocumentRefused
    from scanner.advisories.feed import check_digest, read_document

    found: list[_Read] = []
    for path in paths:
        name = name_of(path)
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
        try:
            advisory = read_document(data, max_bytes=max_bytes)
        except DocumentRefused as e:
            summary.refused.append({"path": name, "error": str(e)})
            continue
        mismatch = digest in ("mismatch", "unreadable")
        if mismatch:  # listed once it is read: a refused file is listed as refused only
            summary.digest_mismatches.append(name)
        found.append(_Read(path, data, advisory, mismatch))
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
    db: Database,
    paths: Iterable[Path],
    *,
    strict: bool,
    max_bytes: int,
    name_of: Callable[[Path], str] | None = None,
) -> ImportSummary:
    """Import every advisory document under ``paths`` (one transaction each); ``name_of`` names
    a file in the summary and as the document's source (default: its path)."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.clock import utcnow
    from app.domain.advisories import import_advisory
    from scanner.advisories.feed import find_documents

    summary = ImportSummary()
    files = find_documents(paths)
    named = name_of or str
    found = _read_all(files, strict=strict, max_bytes=max_bytes, summary=summary, name_of=named)
    for r in _bulletins(found):
        try:
            with db.transaction(write=True) as session:
                result = import_advisory(
                    session,
                    r.advisory,
                    r.data,
                    source=name_of(r.path) if name_of else str(r.path.resolve()),
                    digest_mismatch=r.mismatch,
                    now=utcnow(),
                )
        except SQLAlchemyError as e:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            summary.refused.append({"path": named(r.path), "error": f"not stored: {first}"})
            continue
        if result.changed:
            summary.imported += 1
        else:
            summary.unchanged += 1
        if result.note:
            summary.notes.append(f"{named(r.path)}: {result.note}")
        summary.vulnerabilities.update(result.vulnerabilities)
        summary.unparsed_versions.extend(result.unparsed)
    if summary.imported:
        _rematch(db, summary)
    return summary


def _rematch(db: Database, summary: ImportSummary) -> None:
    """The fleet's findings against the changed feed, in one transaction."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.clock import utcnow
    from app.domain import compliance
    from app.domain.vulnerabilities import rematch

    try:
        with db.transaction(write=True) as session:
            done = rematch(session, utcnow())
            # the compliance of the policies gating on the findings follows them
            trusted = db.settings.trusted_authors
            pending = compliance.reevaluate_after_advisories_change(session, utcnow(), trusted)
        if pending:
            compliance.reevaluate_pending_all(db, pending, utcnow())
    except SQLAlchemyError as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        summary.refused.append({"path": "(matching)", "error": f"not matched: {first}"})
        return
    summary.notes.append(
        f"matched {done.assets} assets ({done.distinct} distinct stacks) against the feed: "
        f"{done.findings} findings"
    )


advisories_app = typer_app(help="Security advisories (CSAF 2.0, OSV, CVE Records).")


Strict = Annotated[
    bool,
    typer.Option("--strict", help="refuse a document whose .sha256 does not match"),
]
Format = Annotated[ImportFormat, typer.Option("--format", help="text or json (the summary's form)")]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL; default $GPUPROV_DATABASE_URL or sqlite:///./gpuprov.db",
        show_default=False,
    ),
]


@advisories_app.command("import", cls=StrictCommand)
def advisories_import(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="CSAF 2.0, OSV or CVE Record files, or directories of them (recursively)",
            show_default=False,
        ),
    ],
    strict: Strict = False,
    format: Format = ImportFormat.TEXT,
    database_url: DatabaseUrl = None,
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
    _report(summary, format)


@advisories_app.command("sync", cls=StrictCommand)
def advisories_sync(
    url: Annotated[
        str,
        typer.Argument(
            help="HTTPS base URL of a mirror of NVIDIA's product-security repository",
            show_default=False,
        ),
    ],
    year: Annotated[
        list[int] | None,
        typer.Option("--year", help="a year to fetch (repeatable); default 2016 to this year"),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option("--ca-file", help="PEM CA certificates to verify the mirror with"),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, max=600, help="seconds per request")
    ] = 30.0,
    strict: Strict = False,
    format: Format = ImportFormat.TEXT,
    database_url: DatabaseUrl = None,
) -> None:
    """Fetch a mirror's bulletins over HTTPS and import them as `import` does; a file that
    could not be fetched is refused (exit 1), the rest is kept."""
    import ssl
    import tempfile

    import httpx

    from app.cli import _require_current_schema, _settings
    from app.clock import utcnow
    from app.storage.session import Database
    from scanner.advisories.mirror import fetch_mirror
    from scanner.cli_common import fail

    if not url.lower().startswith("https://"):
        raise fail(f"{url} is not an https:// URL: the feed is fetched over HTTPS only", 2)
    years = year or list(range(2016, utcnow().year + 1))
    settings = _settings(database_url)
    _require_current_schema(settings)
    try:
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
        )
    except (OSError, ssl.SSLError) as e:
        raise fail(f"cannot use --ca-file {ca_file}: {e}", 2) from e
    with (
        tempfile.TemporaryDirectory(prefix="gpuprov-advisories-") as tmp,
        httpx.Client(verify=verify, timeout=timeout, follow_redirects=False) as client,
    ):
        fetched = fetch_mirror(
            url, Path(tmp), years, client=client, max_bytes=settings.max_advisory_bytes
        )
        db = Database(settings)
        try:
            summary = import_paths(
                db,
                [Path(tmp)],
                strict=strict,
                max_bytes=settings.max_advisory_bytes,
                name_of=lambda p: fetched.files.get(p, str(p)),
            )
        finally:
            db.dispose()
    summary.refused[:0] = [
        {"path": u, "error": f"not fetched: {why}"} for u, why in fetched.failures
    ]
    _report(summary, format)


def _report(summary: ImportSummary, format: ImportFormat) -> None:
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
