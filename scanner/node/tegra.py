"""A Jetson's Linux for Tegra (L4T) release and its JetPack release.

Two sources, both written by NVIDIA's L4T packages: ``/etc/nv_tegra_release``, whose first
line reads "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64,
DATE: Fri Sep 13 04:36:44 UTC 2024" (release R36 + revision 4.0 = L4T 36.4.0), and the dpkg
package ``nvidia-l4t-core`` whose version is "36.4.0-20240912212859". The release file wins;
the package says the release when the file is absent (a container image of a Jetson root).
"""

from __future__ import annotations

import re
from typing import Final

from scanner.model import L4tFacts
from scanner.node.rootfs import Root

_RELEASE: Final = re.compile(
    r"^#\s*R(?P<major>\d+)\s+\((?P<kind>[^)]*)\),\s*REVISION:\s*(?P<rev>\d+(?:\.\d+)?)"
    r"(?P<rest>.*)$",
    re.MULTILINE,
)
_BOARD: Final = re.compile(r"BOARD:\s*([^,\s]+)")
_PACKAGE: Final = "nvidia-l4t-core"


def parse_tegra_release(text: str) -> tuple[str, str | None] | None:
    """(L4T release "36.4.0", board) from nv_tegra_release text; None when it is none."""
    m = _RELEASE.search(text)
    if m is None:
        return None
    rev = m.group("rev").split(".")
    release = ".".join([m.group("major"), *(rev + ["0"])[:2]])
    board = _BOARD.search(m.group("rest"))
    return release, board.group(1) if board else None


def parse_l4t_package_version(version: str) -> str | None:
    """The L4T release of an nvidia-l4t-* package version ("36.4.0-20240912212859" -> "36.4.0")."""
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?)(?:-|$)", version.strip())
    if m is None:
        return None
    parts = m.group(1).split(".")
    return ".".join((parts + ["0"])[:3])


def _dpkg_version(root: Root, package: str) -> str | None:
    """The installed version of a dpkg package, from the root's status file."""
    text = root.read_text("/var/lib/dpkg/status", limit=64 << 20)
    if text is None:
        return None
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith((" ", "\t")):
                fields[key.strip()] = value.strip()
        if fields.get("Package") == package and "installed" in fields.get("Status", "").split():
            return fields.get("Version")
    return None


def read_l4t(root: Root) -> tuple[L4tFacts | None, list[str]]:
    """The root's L4T facts (None on no Jetson) and notes on what disagreed."""
    notes: list[str] = []
    release = board = source = None
    text = root.read_text("/etc/nv_tegra_release")
    if text is not None:
        parsed = parse_tegra_release(text)
        if parsed is None:
            notes.append("l4t: /etc/nv_tegra_release: no '# R<major> (release), REVISION:' line")
        else:
            (release, board), source = parsed, "/etc/nv_tegra_release"
    package = _dpkg_version(root, _PACKAGE)
    from_package = parse_l4t_package_version(package) if package else None
    if from_package is not None:
        if release is None:
            release, source = from_package, f"dpkg {_PACKAGE} {package}"
        elif from_package != release:
            notes.append(f"l4t: /etc/nv_tegra_release says {release}, dpkg {_PACKAGE} {package}")
    if release is None or source is None:
        return None, notes
    from scanner.node.tables import default_jetpack  # only on a Jetson (start-up)

    jp = default_jetpack().by_l4t(release)
    return (
        L4tFacts(
            release=release,
            source=source,
            board=board,
            jetpack=jp.jetpack if jp else None,
            cuda=jp.cuda if jp else None,
        ),
        notes,
    )
