"""dpkg cataloger: Debian/Ubuntu packages from ``/var/lib/dpkg`` and distroless ``status.d/``.

Reads the status database (RFC 822 stanzas), each package's ``info/NAME[:ARCH].list`` for its
files and ``info/NAME[:ARCH].md5sums`` for their MD5 digests; conffile digests come from the
``Conffiles`` field. A corrupt stanza becomes a `Skipped` record; the rest is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from msgspec import Struct

from scanner.catalog.interface import Distro, Found, is_hex_digest, purl, root_path, skipped
from scanner.model import NodeKind, OwnedFile, Package, PackageManager, Skipped
from scanner.source.interface import RootView

DPKG_DIR = "/var/lib/dpkg"
STATUS = DPKG_DIR + "/status"
STATUS_D = DPKG_DIR + "/status.d/"
INFO = DPKG_DIR + "/info/"

#: Status words (third word of ``Status:``) for which the package's files are on disk.
_ON_DISK = frozenset(
    {"installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending"}
)
#: At most this many skipped stanzas are reported per file; the rest are counted.
_MAX_SKIPS_PER_FILE = 20


class _Stanza(Struct, frozen=True):
    line: int  # 1-based line where the stanza starts
    fields: dict[str, str]


class _BadStanza(Struct, frozen=True):
    line: int
    reason: str


def _valid_field_name(name: str) -> bool:
    # deb822(5): field names are US-ASCII printable characters except controls, space and
    # colon, and must not begin with "#" or "-".
    return (
        bool(name)
        and name.isascii()
        and name.isprintable()
        and " " not in name
        and name[0] not in "#-"
    )


def parse_stanzas(data: bytes) -> Iterator[_Stanza | _BadStanza]:
    """Split a deb822 control file into stanzas; a malformed stanza yields a `_BadStanza`."""
    text = data.decode("utf-8", errors="replace")
    fields: dict[str, str] = {}
    key: str | None = None
    start = 0
    error: str | None = None
    for number, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            if error is not None:
                yield _BadStanza(start, error)
            elif fields:
                yield _Stanza(start, fields)
            fields, key, error, start = {}, None, None, 0
            continue
        if not start:
            start = number
        if error is not None:
            continue
        if "\x00" in line:
            error = f"line {number}: binary data (NUL byte)"
            continue
        if line[0] in " \t":
            if key is None:
                error = f"line {number}: continuation line before any field"
                continue
            fields[key] += "\n" + line[1:]
            continue
        name, sep, value = line.partition(":")
        if not sep or not _valid_field_name(name):
            shown = line[:40].encode("unicode_escape").decode("ascii")
            error = f"line {number}: not a 'Field: value' line: {shown!r}"
            continue
        key = name
        fields[key] = value.strip()
    if error is not None:
        yield _BadStanza(start, error)
    elif fields:
        yield _Stanza(start, fields)


def _parse_md5sums(data: bytes) -> tuple[dict[str, str], int]:
    """``md5sums`` lines (``HEX  relative/path``) -> {absolute path: md5}, bad line count."""
    digests: dict[str, str] = {}
    bad = 0
    for line in data.decode("utf-8", errors="surrogateescape").splitlines():
        if not line.strip():
            continue
        digest, rest = line[:32].lower(), line[32:]
        path = rest.lstrip(" ")
        if not is_hex_digest(digest, "md5") or not rest.startswith(" ") or not path:
            bad += 1
            continue
        digests[root_path("/" + path)] = digest
    return digests, bad


def _parse_list(data: bytes) -> list[str]:
    paths: list[str] = []
    for line in data.decode("utf-8", errors="surrogateescape").splitlines():
        if line and line != "/.":
            paths.append(root_path(line))
    return paths


def _conffiles(value: str) -> dict[str, str]:
    """``Conffiles`` field lines `` /etc/x <md5> [obsolete]`` -> {path: md5}."""
    out: dict[str, str] = {}
    for line in value.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("/") and is_hex_digest(parts[1], "md5"):
            out[root_path(parts[0])] = parts[1]
    return out


class _Reader:
    """Reads one dpkg database (the status file or a status.d directory) into packages."""

    def __init__(self, view: RootView, distro: Distro) -> None:
        self.view = view
        self.metadata: Mapping[str, bytes] = view.metadata
        self.distro = distro
        self.packages: list[Package] = []
        self.skipped: list[Skipped] = []

    def read_file(self, path: str, data: bytes, aux_dirs: tuple[str, ...], stem: str) -> None:
        bad = 0
        for stanza in parse_stanzas(data):
            if isinstance(stanza, _BadStanza):
                bad += 1
                if bad <= _MAX_SKIPS_PER_FILE:
                    self.skipped.append(
                        skipped(path, f"corrupt dpkg stanza at line {stanza.line}: {stanza.reason}")
                    )
                continue
            problem = self._package(path, stanza, aux_dirs, stem)
            if problem is not None:
                bad += 1
                if bad <= _MAX_SKIPS_PER_FILE:
                    reason = f"dpkg stanza at line {stanza.line}: {problem}"
                    self.skipped.append(skipped(path, reason))
        if bad > _MAX_SKIPS_PER_FILE:
            self.skipped.append(
                skipped(path, f"{bad - _MAX_SKIPS_PER_FILE} more corrupt dpkg stanzas not listed")
            )

    def _package(
        self, path: str, stanza: _Stanza, aux_dirs: tuple[str, ...], stem: str
    ) -> str | None:
        """Add the stanza's package; return why it was skipped when it is unusable."""
        fields = stanza.fields
        name = fields.get("Package", "")
        if not name:
            return "no Package field"
        status = fields.get("Status")
        if status is not None:
            words = status.split()
            if len(words) != 3:
                return f"package {name}: malformed Status {status!r}"
            if words[2] not in _ON_DISK:
                return None  # removed or config-files only: no files on disk, not an owner
        version = fields.get("Version", "")
        if not version:
            return f"package {name}: no Version field"
        arch = fields.get("Architecture") or None
        files = self._files(name, arch, fields, aux_dirs, stem)
        extra: list[tuple[str, str]] = []
        if fields.get("Source"):
            extra.append(("source-package", fields["Source"]))
        if fields.get("Maintainer"):
            extra.append(("maintainer", fields["Maintainer"]))
        summary = fields.get("Description", "").split("\n", 1)[0].strip()
        if summary:
            extra.append(("summary", summary))
        self.packages.append(
            Package(
                manager=PackageManager.DPKG,
                name=name,
                version=version,
                purl=purl(
                    "deb",
                    self.distro.id or "debian",
                    name.lower(),
                    version,
                    {"arch": arch, "distro": self.distro.qualifier},
                ),
                arch=arch,
                source=path,
                files=files,
                extra=tuple(sorted(extra)),
            )
        )
        return None

    def _aux(self, aux_dirs: tuple[str, ...], bases: list[str], suffix: str) -> tuple[str, bytes]:
        for directory in aux_dirs:
            for base in bases:
                data = self.metadata.get(directory + base + suffix)
                if data is not None:
                    return directory + base + suffix, data
        return "", b""

    def _files(
        self,
        name: str,
        arch: str | None,
        fields: Mapping[str, str],
        aux_dirs: tuple[str, ...],
        stem: str,
    ) -> tuple[OwnedFile, ...]:
        # dpkg >= 1.16.2 names info files NAME:ARCH for Multi-Arch: same packages.
        bases = [f"{name}:{arch}", name] if arch else [name]
        if stem and stem not in bases:
            bases.append(stem)
        _, list_data = self._aux(aux_dirs, bases, ".list")
        md5_path, md5_data = self._aux(aux_dirs, bases, ".md5sums")
        digests, bad = _parse_md5sums(md5_data) if md5_data else ({}, 0)
        if bad:
            self.skipped.append(skipped(md5_path, f"{bad} malformed md5sums line(s) ignored"))
        if "Conffiles" in fields:
            for conf, digest in _conffiles(fields["Conffiles"]).items():
                digests.setdefault(conf, digest)
        listed = _parse_list(list_data) if list_data else []
        # Directories precede their contents in .list files; a parent of an entry is a directory.
        parents = {p.rpartition("/")[0] for p in listed}
        nodes = self.view.nodes
        out: list[OwnedFile] = []
        seen: set[str] = set()
        for path in listed:
            if path in parents or path in seen:
                continue
            node = nodes.get(path)
            if node is not None and node.kind is NodeKind.DIR:
                continue
            seen.add(path)
            md5 = digests.get(path)
            out.append(OwnedFile(path, "md5" if md5 else None, md5))
        for path in sorted(digests.keys() - seen):
            out.append(OwnedFile(path, "md5", digests[path]))
        return tuple(out)


def catalog(view: RootView, distro: Distro) -> Found:
    """Packages of the dpkg status file and of a distroless ``status.d/`` directory."""
    reader = _Reader(view, distro)
    status = view.metadata.get(STATUS)
    if status is not None:
        reader.read_file(STATUS, status, (INFO,), "")
    for path in sorted(p for p in view.metadata if p.startswith(STATUS_D)):
        stem = path[len(STATUS_D) :]
        if not stem or "/" in stem or stem.endswith((".md5sums", ".list")):
            continue
        # Distroless keeps one control stanza per file, md5sums beside it as NAME.md5sums.
        reader.read_file(path, view.metadata[path], (STATUS_D, INFO), stem)
    return Found(tuple(reader.packages), tuple(reader.skipped))
