"""`gpuprov scan --vex-out`: the scan's products matched against local advisories
(scanner/advisories/local.py) and written as OpenVEX or CycloneDX VEX (vex_out.py, the builder
the service uses too). Prints and exits; the work is in those modules.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from scanner.advisories.local import (
    LocalFeed,
    LocalFeedError,
    asset_facts,
    load_feed,
    match_feed,
    newest_date,
    subject_of,
    vuln_info,
)
from scanner.cli_common import EXIT_USAGE, fail, say, write_output
from scanner.model import ScanResult

#: the author a document names unless GPUPROV_VEX_AUTHOR says otherwise
DEFAULT_AUTHOR = "gpuprov"


def read_feed(paths: list[Path]) -> LocalFeed:
    """The feed of ``--advisories``; exit 2 naming the file that cannot be used."""
    try:
        feed = load_feed(paths)
    except LocalFeedError as e:
        raise fail(f"--advisories: {e}", EXIT_USAGE) from None
    for path in feed.digest_mismatches:
        say(f"--advisories: {path}: does not match its .sha256 (read anyway, as import does)")
    return feed


def _when(result: ScanResult, feed: LocalFeed) -> datetime:
    """The document's time: the newest release date of the feed consulted (the same scan and
    feed give the same document), else the scan's start."""
    for text in (newest_date(feed), result.started_at):
        if text:
            try:
                return datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                continue
    raise fail("--vex-out: neither the feed nor the scan gives a date for the document")


def write_vex(result: ScanResult, feed: LocalFeed, fmt: str, out: Path) -> None:
    """Match and write; an OpenVEX document with nothing to state is not written (said on
    stderr): OpenVEX requires a statement, and an empty file would read as "nothing found"."""
    from scanner import __version__
    from scanner.advisories.vex_out import build_cyclonedx, build_openvex, openvex_json

    findings = match_feed(feed, asset_facts(result))
    info = vuln_info(feed, [f.cve for f in findings])
    author = os.environ.get("GPUPROV_VEX_AUTHOR", "").strip() or DEFAULT_AUTHOR
    when = _when(result, feed)
    subject = subject_of(result)
    if fmt == "cyclonedx":
        write_output(build_cyclonedx(subject, findings, info, author=author, timestamp=when), out)
        return
    if not findings:
        say(
            f"--vex-out: no advisory of the {len(feed.advisories)} documents names a product "
            f"found on {result.asset.name}: nothing to state, {out} not written"
        )
        return
    doc = build_openvex(
        subject, findings, info, author=author, timestamp=when, tooling=f"gpuprov {__version__}"
    )
    write_output(openvex_json(doc), out)
