"""Catalog stage: who owns each file of the root, and the digest the owner recorded.

`is_metadata_path` tells a source which small files to capture (package databases and
os-release); `catalog_view` runs every cataloger over the captured bytes and maps each owned
path to its owner package. Sources call the predicate for every path of a walk, so it is kept
to a few string comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgspec.structs import replace

from scanner.catalog import conda, dpkg, pip, rpm
from scanner.catalog.interface import (
    Cataloger,
    CatalogParseError,
    CatalogResult,
    Distro,
    Found,
    skipped,
)
from scanner.errors import CatalogError
from scanner.model import OwnedFile, Package, Skipped
from scanner.source.interface import RootView

__all__ = [
    "CATALOGERS",
    "CATALOG_VERSION",
    "DATABASE_PATHS",
    "CatalogParseError",
    "CatalogResult",
    "Distro",
    "Found",
    "catalog_view",
    "index_owners",
    "is_metadata_path",
    "read_distro",
]

#: Bump whenever `is_metadata_path` changes, so cached layer yields are recomputed.
CATALOG_VERSION = "catalog-1"

#: The catalogers, in the order their packages are listed.
CATALOGERS: tuple[tuple[str, Cataloger], ...] = (
    ("dpkg", dpkg.catalog),
    ("rpm", rpm.catalog),
    ("conda", conda.catalog),
    ("pip", pip.catalog),
)

OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")
#: Where the package databases and the distribution's identity live: a host walk limited by
#: ``--include`` still reads them (the pipeline hands them to the source in its `Selector`), or
#: every packaged library would look unowned.
DATABASE_PATHS = (dpkg.DPKG_DIR, *rpm.DB_DIRS, *OS_RELEASE_PATHS)

_EXACT = frozenset(
    {
        dpkg.STATUS,
        *OS_RELEASE_PATHS,
        *(
            f"{directory}/{name}"
            for directory in rpm.DB_DIRS
            for name in (
                rpm.SQLITE_NAME,
                rpm.SQLITE_NAME + "-wal",
                rpm.SQLITE_NAME + "-shm",
                rpm.BDB_NAME,
                rpm.NDB_NAME,
            )
        ),
    }
)
_DIST_INFO_FILES = ("/RECORD", "/METADATA")
_EGG_INFO_FILES = ("/PKG-INFO", "/installed-files.txt")
_DPKG_PREFIX = dpkg.DPKG_DIR + "/"
_STATUS_D_LEN = len(dpkg.STATUS_D)
_INFO_LEN = len(dpkg.INFO)


def is_metadata_path(path: str) -> bool:
    """True for the package-database and os-release files the catalogers read.

    dpkg status, status.d/*, info/*.list and *.md5sums; rpm's rpmdb.sqlite (+ -wal, -shm) and
    the legacy Packages / Packages.db (reported as unsupported); ``*.dist-info/{RECORD,METADATA}``;
    ``*.egg-info/{PKG-INFO,installed-files.txt}`` and single-file ``*.egg-info``;
    ``*/conda-meta/*.json``; ``/etc/os-release`` and ``/usr/lib/os-release``.
    """
    if path in _EXACT:
        return True
    if path.startswith(_DPKG_PREFIX):
        if path.startswith(dpkg.STATUS_D):
            return "/" not in path[_STATUS_D_LEN:]
        if path.startswith(dpkg.INFO):
            return path.endswith((".list", ".md5sums")) and "/" not in path[_INFO_LEN:]
        return False
    if path.endswith(".json"):
        slash = path.rfind("/")
        return slash >= 11 and path[slash - 11 : slash] == "/conda-meta"
    if path.endswith(_DIST_INFO_FILES):
        return path.rpartition("/")[0].endswith(".dist-info")
    if path.endswith(_EGG_INFO_FILES):
        return path.rpartition("/")[0].endswith(".egg-info")
    return path.endswith(".egg-info")


def read_distro(view: RootView) -> Distro:
    """The root's distro from os-release (/etc/os-release first, following its symlink)."""
    for path in OS_RELEASE_PATHS:
        data = view.metadata.get(path)
        if data is None:
            real = view.resolve(path)
            data = view.metadata.get(real) if real else None
        if data is not None:
            return Distro.from_os_release(data)
    return Distro()


_MANAGER_RANK = {"rpm": 0, "dpkg": 1, "conda": 2, "pip": 3}
_ALGORITHM_RANK = {"sha512": 0, "sha384": 1, "sha256": 2, "sha224": 3, "sha1": 4, "md5": 5}


def _merge_same_purl(packages: Iterable[Package]) -> tuple[Package, ...]:
    """One `Package` per purl: installs of one package in several places (two virtualenvs, the
    same rpmdb seen twice) share an identity, so their files are merged under the first."""
    merged: dict[str, Package] = {}
    others: dict[str, set[str]] = {}
    for package in packages:
        first = merged.get(package.purl)
        if first is None:
            merged[package.purl] = package
            continue
        known = {f.path for f in first.files}
        files = first.files + tuple(f for f in package.files if f.path not in known)
        merged[package.purl] = replace(first, files=files)
        if package.source != first.source:
            others.setdefault(package.purl, set()).add(package.source)
    for key, sources in others.items():
        extra = dict(merged[key].extra)
        extra["also-installed-from"] = ",".join(sorted(sources))
        merged[key] = replace(merged[key], extra=tuple(sorted(extra.items())))
    return tuple(merged.values())


def _rank(package: Package, owned: OwnedFile, alias: bool) -> tuple[int, int, int, int, str, str]:
    return (
        0 if owned.digest else 1,
        _ALGORITHM_RANK.get(owned.algorithm or "", 9),
        1 if alias else 0,
        _MANAGER_RANK.get(package.manager, 9),
        package.purl,
        owned.path,
    )


def index_owners(
    view: RootView, packages: Iterable[Package]
) -> dict[str, tuple[Package, OwnedFile]]:
    """Map each owned path (and its real path through symlinked directories) to one owner.

    When several packages claim a path the winner is, in order: one with a digest, the
    stronger algorithm, a direct record over one reached through a directory symlink, the
    manager (rpm, dpkg, conda, pip), then the purl, so the result never depends on input order.
    """
    owners: dict[str, tuple[Package, OwnedFile]] = {}
    aliased: set[str] = set()  # keys whose current owner reached them through a symlink
    real_dirs: dict[str, str | None] = {}

    def offer(key: str, alias: bool, package: Package, owned: OwnedFile) -> None:
        current = owners.get(key)
        if current is not None:
            # Collisions are rare: rank only then, keeping the common path to one dict store.
            if _rank(package, owned, alias) >= _rank(*current, key in aliased):
                return
        owners[key] = (package, owned)
        if alias:
            aliased.add(key)
        else:
            aliased.discard(key)

    for package in packages:
        for owned in package.files:
            offer(owned.path, False, package, owned)
            directory, _, base = owned.path.rpartition("/")
            if not directory:
                continue
            if directory in real_dirs:
                real = real_dirs[directory]
            else:
                real = real_dirs[directory] = view.resolve(directory)
            if real is not None and real != directory:
                offer(f"{real.rstrip('/')}/{base}", True, package, owned)
    return owners


def catalog_view(
    view: RootView, catalogers: Sequence[tuple[str, Cataloger]] = CATALOGERS
) -> CatalogResult:
    """Run the catalogers over the view's captured metadata and index owned files by path."""
    distro = read_distro(view)
    packages: list[Package] = []
    skips: list[Skipped] = []
    for name, cataloger in catalogers:
        try:
            found = cataloger(view, distro)
        except CatalogError as e:  # a malformed database (`CatalogParseError`) and the like
            skips.append(skipped(name, str(e)))
            continue
        except OSError as e:
            # rpm opens its database from a private temporary copy: a full disk costs that
            # manager's owners, not the whole scan. Any other exception is a defect: it fails.
            skips.append(skipped(name, f"{name} cataloger failed: {type(e).__name__}: {e}"))
            continue
        packages.extend(found.packages)
        skips.extend(found.skipped)
    merged = _merge_same_purl(packages)
    return CatalogResult(
        packages=merged,
        owners=index_owners(view, merged),
        skipped=tuple(skips),
        distro=distro,
    )
