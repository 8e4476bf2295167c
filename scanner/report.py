"""Plain encoders of a `ScanResult`: gpuprov's own JSON and the terminal table.

The CycloneDX encoder lives in bom/; beside msgspec (the model's own library) this module uses
only rich, imported when a table is rendered.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import Any, TextIO

import msgspec

from scanner.model import GpuLibrary, ScanResult
from scanner.terminal import printable


def to_dict(result: ScanResult) -> dict[str, Any]:
    """A JSON-ready dict with every field of the result (enums as their values)."""
    return msgspec.to_builtins(result, enc_hook=str)  # type: ignore[no-any-return]


def to_json(result: ScanResult) -> str:
    """gpuprov's own JSON report format (stable keys, indented)."""
    return json.dumps(to_dict(result), indent=2, sort_keys=True)


def _digest(lib: GpuLibrary, wide: bool) -> str:
    return lib.digests.sha256 if wide else lib.digests.sha256[:12]


def _trust_columns(result: ScanResult) -> tuple[str, ...]:
    """The trust columns this scan's inputs call for: catalogs give each library a provenance
    verdict and its signer; a trust policy on an image gives it an SLSA Build level."""
    columns: tuple[str, ...] = ()
    if any(lib.provenance is not None for lib in result.libraries):
        columns += ("provenance", "signer")
    if result.image_trust is not None:
        columns += ("slsa",)
    return columns


def _image_line(result: ScanResult) -> str | None:
    trust = result.image_trust
    if trust is None:
        return None
    if not trust.signed:
        reasons = "; ".join(trust.rejected) or "no signature found"
        return f"image signature: unsigned ({reasons})"
    slsa = f", SLSA Build L{trust.slsa_level}" if trust.slsa_level is not None else ""
    builder = f" by {trust.builder}" if trust.builder else ""
    return f"image signature: signed by {trust.signer or '?'}{slsa}{builder}"


def _node_lines(result: ScanResult) -> list[str]:
    """The host's driver, GPUs, Jetson release, container injection and condition facts, one
    line each."""
    node = result.node
    if node is None:
        return []
    lines = []
    d = node.driver
    if d is not None:
        cuda = ""
        if d.cuda_max:
            cuda = f", runs CUDA {'>= ' if d.cuda_max_at_least else '<= '}{d.cuda_max}"
        flavor = f" ({d.flavor} kernel module)" if d.flavor else ""
        lines.append(f"driver: {d.version or 'unknown'}{flavor}{cuda}")
    if node.gpus:
        models: dict[str, int] = {}
        for g in node.gpus:
            label = g.model or "GPU"
            if g.compute_capability:
                label += f" (cc {g.compute_capability})"
            models[label] = models.get(label, 0) + 1
        lines.append("gpus: " + ", ".join(f"{n} x {m}" for m, n in models.items()))
    if node.l4t is not None:
        jp = f", JetPack {node.l4t.jetpack}" if node.l4t.jetpack else ""
        lines.append(f"jetson: L4T {node.l4t.release}{jp}")
    if node.injected:
        sources = sorted({s for i in node.injected for s in i.sources})
        lines.append(
            f"container injection: {len(node.injected)} host file(s) from {', '.join(sources)}"
        )
    if node.conditions:
        lines.append("conditions: " + ", ".join(f"{c.name}={c.value}" for c in node.conditions))
    lines += [f"node: {n}" for n in node.notes]
    return lines


def _product_lines(result: ScanResult) -> list[str]:
    """The products bulletins name (toolkit releases, tools, driver, ...), one line each."""
    lines = []
    for p in result.products:
        version = p.version or (
            f"release {p.line} (update unknown)" if p.line else "version unknown"
        )
        extra = [f"toolkit {p.toolkit}"] if p.toolkit and p.toolkit != p.version else []
        extra += [f"branch {p.branch}"] if p.branch else []
        where = (
            f" at {', '.join(p.paths[:3])}{' ...' if len(p.paths) > 3 else ''}" if p.paths else ""
        )
        more = f" ({', '.join(extra)})" if extra else ""
        lines.append(f"product: {p.name} {version}{more}{where}")
    return lines


#: Columns of the table, in order; narrow tables drop the optional ones that do not fit.
_REQUIRED = ("file", "library", "version", "integrity", "sha256")
_OPTIONAL = ("cuda", "owner")
_ORDER: tuple[str, ...] = ("path", "file", "family", "library", "version", "cuda", "owner")
_ORDER += ("integrity",)
_ORDER += ("provenance", "signer", "slsa", "sha256")
#: Columns whose values may fold onto several lines (names); the others are short, closed sets.
_FOLDS = frozenset({"path", "file", "library", "owner", "signer"})
_STYLES = {"verified": "green", "modified": "bold red", "unowned": "yellow", "conflict": "bold red"}


def _signer(signer: str | None, wide: bool) -> str:
    """The signer's name; its key or certificate details only in wide tables."""
    if signer is None:
        return "-"
    return signer if wide else signer.split(" (", 1)[0]


def _runtime_lines(lib: GpuLibrary) -> list[str]:
    """What live processes do with the file (``--runtime``): who loads it, and whether the
    bytes they run are still the ones on disk."""
    lines = []
    if lib.loaded_by:
        pids = sorted({p.pid for p in lib.loaded_by})
        containers = {p.container_id for p in lib.loaded_by if p.container_id}
        shown = ", ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")
        where = f" in {len(containers)} container(s)" if containers else ""
        lines.append(f"  loaded by {len(pids)} process(es){where}: pid {shown}")
    if lib.loaded_copy:
        if any(p.deleted for p in lib.loaded_by):
            lines.append("  loaded copy: deleted on disk")
        if lib.disk_sha256:
            lines.append(f"  loaded copy: on disk now {lib.disk_sha256[:12]}")
        elif not lib.on_disk and not any(p.deleted for p in lib.loaded_by):
            lines.append("  loaded copy: not at this path on disk")
    return lines


def _row(lib: GpuLibrary, result: ScanResult, wide: bool) -> dict[str, tuple[str, str]]:
    """One library's cells as (text, style) by column name, target data made printable."""
    ident = lib.ident
    library = ident.component
    if not wide and not library.startswith(ident.family):
        library = f"{ident.family}:{library}"
    owner = "-"
    if lib.owner is not None:
        owner = f"{lib.owner.manager}:{lib.owner.name}" if wide else lib.owner.name
    slsa = "-"
    if result.image_trust is not None and result.image_trust.slsa_level is not None:
        slsa = f"L{result.image_trust.slsa_level}"
    links = len(lib.aliases)
    base = lib.ref.path.rpartition("/")[2]
    error = [f"  error: {lib.error}"] if lib.error else []
    error += _runtime_lines(lib)
    lines = [lib.ref.path, *(f"  <- {a}" for a in lib.aliases), *error]
    file = f"{base} +{links} link{'s' * (links != 1)}" if links else base
    cells = {
        "path": ("\n".join(printable(line) for line in lines), ""),
        "file": ("\n".join(printable(line) for line in [file, *error]), ""),
        "family": (ident.family, ""),
        "library": (library, ""),
        "version": (ident.version or "?", ""),
        "cuda": (str(ident.cuda_major or "-"), ""),
        "owner": (owner, ""),
        "integrity": (lib.integrity.value, _STYLES.get(lib.integrity.value, "")),
        "provenance": (lib.provenance or "-", _STYLES.get(lib.provenance or "", "")),
        "signer": (_signer(lib.provenance_signer, wide), ""),
        "slsa": (slsa, ""),
        "sha256": (_digest(lib, wide), ""),
    }
    # Each line of a path was escaped on its own so the line breaks between them survive.
    keep = ("path", "file")
    return {k: (v if k in keep else printable(v), style) for k, (v, style) in cells.items()}


def _layout(
    rows: list[dict[str, tuple[str, str]]], trust: tuple[str, ...], width: int
) -> dict[str, int]:
    """Columns that fit ``width`` with the width of each: short columns get what they need,
    the names share the rest with the file name first (it is what a reader looks for)."""

    def natural(name: str) -> int:
        lines = [name, *(line for r in rows for line in r[name][0].split("\n"))]
        return max(len(line) for line in lines)

    def budget(columns: list[str]) -> int:
        fixed = sum(natural(c) for c in columns if c not in _FOLDS)
        return width - 2 * (len(columns) - 1) - fixed  # two spaces between columns

    chosen = [*_REQUIRED, *trust]
    for name in _OPTIONAL:
        # an optional column is shown while the file name keeps 24 characters and others 8
        folding = [c for c in [*chosen, name] if c in _FOLDS]
        need = sum(min(natural(c), 24 if c == "file" else 8) for c in folding)
        if budget([*chosen, name]) >= need:
            chosen.append(name)
    widths = {c: natural(c) for c in chosen if c not in _FOLDS}
    left = budget(chosen)
    # The names share what is left, the file name about twice a share; a name that needs less
    # than its share takes what it needs and leaves the rest to the others (a short library
    # name no longer folds an owner's name while the file column holds spaces).
    pending = [c for c in chosen if c in _FOLDS]
    while pending:
        weights = {c: 2 if c == "file" else 1 for c in pending}
        total = sum(weights.values())
        share = {c: left * weights[c] // total for c in pending}
        fits = [c for c in pending if natural(c) <= share[c]]
        if not fits:
            others = [c for c in pending if c != "file"]
            for c in others:
                widths[c] = max(6, share[c])
            if "file" in pending:  # and whatever the rounding left over
                widths["file"] = max(12, left - sum(widths[c] for c in others))
            break
        for c in fits:
            widths[c] = natural(c)
            left -= natural(c)
            pending.remove(c)
    return {c: widths[c] for c in _ORDER if c in widths}


def _wrap_dir(path: str, width: int) -> str:
    """A directory line's path in lines of at most ``width``, broken after a ``/`` where one
    fits (``/usr/local/cuda-13.0/`` + ``lib/``, not ``/usr/local/cuda-13.0/lib`` + ``/``); a
    single name longer than ``width`` is still folded by the console."""
    lines: list[str] = []
    line = ""
    for piece in re.findall(r"[^/]*/|[^/]+$", path):
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    return "\n".join([*lines, line])


def table_width(out: TextIO) -> int:
    """``$COLUMNS`` when set, else the width of the terminal ``out`` is, else 80.

    Decided here rather than by rich, which asks whichever standard stream is a terminal: a
    table written to a file or a pipe from an interactive shell would take the shell's width.
    """
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if out.isatty():
            return os.get_terminal_size(out.fileno()).columns or 80
    except (OSError, ValueError, io.UnsupportedOperation):
        pass
    return 80


def render_table(result: ScanResult, out: TextIO, *, color: bool, wide: bool = False) -> None:
    """Write a human-readable summary table of the GPU libraries found.

    The table fits the terminal (``$COLUMNS``, else the terminal's size, else 80 columns):
    each directory is named once on a row of its own, and columns that do not fit (cuda,
    owner) are left out. ``wide`` shows every column, full paths, links and digests, and takes
    whatever width its lines need. Everything that comes from the scanned target is shown as
    plain text: never as markup, emoji codes or terminal control sequences.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def cell(value: object, style: str = "") -> Text:
        return Text(printable(value), style=style)

    console = Console(
        file=out,
        force_terminal=color,
        no_color=not color,
        width=1 << 20 if wide else table_width(out),
        markup=False,
        emoji=False,
        highlight=False,
    )
    asset = result.asset
    title = f"{asset.kind.value} {asset.name}"
    if asset.digest:
        title += f" ({asset.digest if wide else asset.digest[:19]})"
    trust = _trust_columns(result)
    rows = [_row(lib, result, wide) for lib in result.libraries]

    def new_table(title: Text | None = None) -> Table:
        return Table(
            title=title,
            title_justify="left",
            show_header=title is not None,
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
        )

    table = new_table(cell(title))
    if wide:
        for name in _ORDER:
            if name != "file" and (name in trust or name not in ("provenance", "signer", "slsa")):
                table.add_column(name, no_wrap=True)
        columns = [str(c.header) for c in table.columns]
        for row in rows:
            table.add_row(*(Text(*row[name]) for name in columns))
        console.print(table)
    else:
        widths = _layout(rows, trust, console.width)
        columns = list(widths)
        for name, size in widths.items():
            # Widths fit unless the terminal is very narrow; then every column folds, so
            # nothing is cut off.
            table.add_column(name, width=size, overflow="fold")
        console.print(table)
        # Each directory is named once on a line of its own, as wide as the terminal (inside
        # the table it had only the file column's width: at 120 columns a conda environment's
        # directory took five lines); its files follow in a table of the same column widths.
        groups: list[tuple[str, list[dict[str, tuple[str, str]]]]] = []
        for lib, row in zip(result.libraries, rows, strict=True):
            parent = lib.ref.path.rpartition("/")[0] + "/"
            if not groups or groups[-1][0] != parent:
                groups.append((parent, []))
            groups[-1][1].append(row)
        for parent, group in groups:
            console.print(Text(_wrap_dir(printable(parent), console.width), style="bold"))
            part = new_table()
            for name in columns:
                part.add_column(name, width=widths[name], overflow="fold")
            for row in group:
                part.add_row(*(Text(*row[name]) for name in columns))
            console.print(part)
    image_line = _image_line(result)
    if image_line:
        console.print(cell(image_line))
    for node_line in _node_lines(result):
        console.print(cell(node_line))
    for product_line in _product_lines(result):
        console.print(cell(product_line))
    if not result.libraries:
        console.print("no GPU libraries found")
    for f in result.findings:
        line = Text("finding", style="bold")
        line.append(" " + printable(f"{f.kind}: {f.message}"))
        console.print(line)
    if result.skipped:
        console.print(f"{len(result.skipped)} item(s) skipped:")
        for s in result.skipped[:50]:
            console.print(cell(f"  {s.stage}: {s.path}: {s.reason}"))
        if len(result.skipped) > 50:
            console.print(f"  ... and {len(result.skipped) - 50} more (see --format json)")
