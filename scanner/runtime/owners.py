"""Owners of the files processes map from roots of their own (containers): the package
databases of each process's root, read through ``/proc/PID/root``.

A container's library is judged against its own image's packages, not the host's: each
distinct root is walked once, limited to the mapped paths and the package databases (as
``--include`` limits a host scan), and catalogued like any root.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO

from scanner.catalog import catalog_view
from scanner.errors import ScannerError
from scanner.model import FileFacts, OwnedFile, Package
from scanner.runtime.loaded import LoadedCopy
from scanner.source.directory import DirectorySource
from scanner.source.interface import Selector

Owner = tuple[Package, OwnedFile]


def _no_probe(path: str, stream: IO[bytes], size: int) -> FileFacts:
    raise AssertionError("a host root is never probed as a stream")  # pragma: no cover


def _selector() -> Selector:
    from scanner import catalog, detect

    return Selector(
        is_candidate=detect.is_candidate_path,
        is_metadata=lambda p: catalog.is_metadata_path(p) or detect.is_metadata_path(p),
        probe=_no_probe,
        version="runtime-owners",
        databases=catalog.DATABASE_PATHS,
    )


def owners_in_own_roots(
    copies: Sequence[LoadedCopy], proc: str
) -> dict[int, tuple[Owner | None, str]]:
    """For each copy mapped from a root of its own (by index in ``copies``): its owner in that
    root's package databases, and what the root is (for the reason)."""
    roots: dict[tuple[int, int], tuple[str, list[int]]] = {}
    for i, copy in enumerate(copies):
        if copy.same_root or copy.facts is None or copy.scanned_path is not None:
            continue
        for loader in copy.loaders:
            where = f"{proc}/{loader.pid}/root"
            try:
                st = os.stat(where)
            except OSError:
                continue
            roots.setdefault((st.st_dev, st.st_ino), (where, []))[1].append(i)
            break
    out: dict[int, tuple[Owner | None, str]] = {}
    selector = _selector()
    for where, indexes in roots.values():
        paths = sorted({copies[i].path for i in indexes})
        try:
            view = DirectorySource(where, include=paths).open_view(selector)
        except (ScannerError, OSError):
            continue  # the process exited, or its root cannot be read: no owner known
        owners = catalog_view(view).owners
        for i in indexes:
            out[i] = (owners.get(copies[i].path), where)
    return out
