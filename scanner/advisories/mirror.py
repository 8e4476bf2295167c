"""A mirror of NVIDIA's ``product-security`` repository over HTTPS, fetched into a directory
laid out as the repository (``YEAR/<bulletin>/<bulletin>.json``, ``CVE-*.json``, ``.sha256``).

Each year's ``CVE_index.csv`` names its bulletins and their CVEs; nothing else of the mirror is
read, and every name taken from it is checked before it becomes a path or a URL. Redirects are
not followed (a mirror that moves must be named again), responses are capped in size.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from pathlib import Path

import httpx
from msgspec import Struct, field

_BULLETIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_CVE = re.compile(r"CVE-\d{4}-\d{4,19}")
#: an index or a digest file is small; a document has the caller's limit
_SMALL = 4 * 1024 * 1024


class Fetched(Struct):
    """The files fetched (local path -> URL) and what could not be fetched (URL, why)."""

    files: dict[Path, str] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)


class FetchError(Exception):
    """One URL that could not be fetched, with why."""


def _get(client: httpx.Client, url: str, limit: int) -> bytes | None:
    """The body of ``url``, None on 404; ``FetchError`` on anything else."""
    try:
        with client.stream("GET", url) as response:
            if response.status_code == 404:
                return None
            if response.is_redirect:
                raise FetchError(f"HTTP {response.status_code}: redirects are not followed")
            if response.status_code != 200:
                raise FetchError(f"HTTP {response.status_code}")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise FetchError(f"larger than {limit} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as e:
        raise FetchError(f"{type(e).__name__}: {e}") from e


def _index(data: bytes) -> dict[str, set[str]]:
    """Bulletin -> its CVEs, from a ``CVE_index.csv`` (``;``-separated, with a header)."""
    text = data.decode("utf-8", errors="replace")
    bulletins: dict[str, set[str]] = {}
    for row in csv.DictReader(io.StringIO(text), delimiter=";"):
        bulletin, cve = (row.get("Bulletin") or "").strip(), (row.get("CVE") or "").strip()
        if _BULLETIN.fullmatch(bulletin):
            cves = bulletins.setdefault(bulletin, set())
            if _CVE.fullmatch(cve):
                cves.add(cve)
    return bulletins


def fetch_mirror(
    base_url: str, dest: Path, years: Iterable[int], *, client: httpx.Client, max_bytes: int
) -> Fetched:
    """Fetch each year's bulletins (CSAF document, CVE Records, their ``.sha256``) from the
    mirror at ``base_url`` into ``dest``; a year without an index is skipped."""
    base = base_url.rstrip("/")
    out = Fetched()

    def fetch(rel: str, limit: int, *, required: bool) -> None:
        url = f"{base}/{rel}"
        try:
            data = _get(client, url, limit)
        except FetchError as e:
            out.failures.append((url, str(e)))
            return
        if data is None:
            if required:
                out.failures.append((url, "HTTP 404"))
            return
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        out.files[path] = url

    for year in years:
        index_url = f"{base}/{year}/CVE_index.csv"
        try:
            index = _get(client, index_url, _SMALL)
        except FetchError as e:
            out.failures.append((index_url, str(e)))
            continue
        if index is None:
            continue
        for bulletin, cves in sorted(_index(index).items()):
            for name in (f"{bulletin}.json", *(f"{c}.json" for c in sorted(cves))):
                rel = f"{year}/{bulletin}/{name}"
                fetch(rel, max_bytes, required=True)
                fetch(rel + ".sha256", _SMALL, required=False)
    return out
