"""Plain encoders of a `ScanResult`: gpuprov's own JSON and the terminal table.

The CycloneDX encoder lives in bom/; this module has no third-party dependencies except rich,
imported only when a table is rendered.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, TextIO

from scanner.model import GpuLibrary, ScanResult


def to_dict(result: ScanResult) -> dict[str, Any]:
    """A JSON-ready dict with every field of the result (enums as their values)."""
    data = asdict(result)
    return json.loads(json.dumps(data, default=str))  # type: ignore[no-any-return]


def to_json(result: ScanResult) -> str:
    """gpuprov's own JSON report format (stable keys, indented)."""
    return json.dumps(to_dict(result), indent=2, sort_keys=True)


def _short(lib: GpuLibrary) -> str:
    return lib.digests.sha256[:12]


def render_table(result: ScanResult, out: TextIO, *, color: bool) -> None:
    """Write a human-readable summary table of the GPU libraries found."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, force_terminal=color, no_color=not color, width=200)
    asset = result.asset
    title = f"{asset.kind.value} {asset.name}"
    if asset.digest:
        title += f" ({asset.digest[:19]})"
    table = Table(title=title, show_lines=False)
    for col in ("path", "family", "component", "version", "cuda", "owner", "integrity", "sha256"):
        table.add_column(col, overflow="fold")
    styles = {"verified": "green", "modified": "bold red", "unowned": "yellow"}
    for lib in result.libraries:
        owner = f"{lib.owner.manager}:{lib.owner.name}" if lib.owner else "-"
        path = lib.ref.path + ("".join(f"\n  <- {a}" for a in lib.aliases) if lib.aliases else "")
        if lib.error:
            path += f"\n  error: {lib.error}"
        verdict = lib.integrity.value
        style = styles.get(verdict, "")
        table.add_row(
            path,
            lib.ident.family,
            lib.ident.component,
            lib.ident.version or "?",
            str(lib.ident.cuda_major or "-"),
            owner,
            f"[{style}]{verdict}[/{style}]" if style else verdict,
            _short(lib),
        )
    console.print(table)
    if not result.libraries:
        console.print("no GPU libraries found")
    for f in result.findings:
        console.print(f"[bold]finding[/bold] {f.kind}: {f.message}")
    if result.skipped:
        console.print(f"{len(result.skipped)} item(s) skipped:")
        for s in result.skipped[:50]:
            console.print(f"  {s.stage}: {s.path}: {s.reason}", markup=False)
        if len(result.skipped) > 50:
            console.print(f"  ... and {len(result.skipped) - 50} more (see --format json)")
