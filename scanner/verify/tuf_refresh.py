"""Refreshing the pinned Sigstore public-good root through TUF, offline.

Sigstore publishes its trusted_root.json as a TUF target (https://tuf-repo-cdn.sigstore.dev).
`gpuprov trust refresh-root DIR` takes a copy of that repository's metadata in a directory and
accepts the trusted_root.json only through the TUF client workflow (TUF spec 5.3-5.7), starting
from the TUF root.json pinned with gpuprov: root N+1 signed by a threshold of root N's keys and
of its own, timestamp, snapshot and targets signed by the final root's keys, versions never
rolled back, nothing expired, and the target's length and hashes as the targets role signed
them. The verified metadata is kept beside the refreshed copy so every later load re-checks it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from tuf.api import exceptions as tuf_errors

# tuf.api.metadata re-exports these without __all__ (mypy strict refuses the re-export).
from tuf.api._payload import Root, Snapshot, Targets, Timestamp
from tuf.api.metadata import Metadata
from tuf.ngclient.fetcher import FetcherInterface
from tuf.ngclient.updater import Updater

from scanner.errors import VerifyError

#: The target that holds the Sigstore trusted root in Sigstore's TUF repositories.
TARGET = "trusted_root.json"
#: Sigstore's production TUF root (version 15, from sigstore-python 4.5's embedded copy).
_PINNED_FILE = "sigstore-tuf-root.json"
#: A URL scheme that never reaches a network: the fetcher maps it onto the metadata directory.
_BASE = "offline-tuf:/"


class TufRejected(VerifyError):
    """TUF metadata (or the target it describes) was checked and refused; the message says why."""


def pinned_tuf_root() -> bytes:
    """The TUF root.json shipped with gpuprov: the start of every public-good root chain."""
    return resources.files("scanner.verify.roots").joinpath(_PINNED_FILE).read_bytes()


class _DirectoryFetcher(FetcherInterface):
    """Serves the Updater's downloads from files in one directory, never from the network."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _fetch(self, url: str) -> Iterator[bytes]:
        if not url.startswith(_BASE):
            raise tuf_errors.DownloadError(f"unexpected URL {url}")
        parts = url[len(_BASE) :].split("/")
        # The names come from signed metadata, but a file name must never leave the directory.
        if any(p in ("", ".", "..") for p in parts):
            raise tuf_errors.DownloadHTTPError(f"bad metadata path {url}", 404)
        path = self.directory.joinpath(*parts)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            # 404 is how the TUF workflow learns that root N is the newest root (5.3.4).
            raise tuf_errors.DownloadHTTPError(f"{'/'.join(parts)} not found", 404) from None
        except OSError as e:
            raise tuf_errors.DownloadError(f"cannot read {path}: {e.strerror}") from e
        yield data


def verify_refresh(metadata_dir: Path, state: Path, pinned_root: bytes) -> bytes:
    """The trusted_root.json that the TUF metadata in `metadata_dir` vouches for.

    `metadata_dir` mirrors a TUF repository: `N.root.json`, `timestamp.json`, the snapshot
    and targets metadata, and `targets/` (consistent-snapshot names as the CDN serves them).
    `state` keeps the metadata trusted by earlier refreshes, so versions cannot roll back.
    """
    if not metadata_dir.is_dir():
        raise TufRejected(
            f"{metadata_dir} is not a directory of TUF metadata: a public-good root is "
            "accepted only with the Sigstore TUF repository metadata that signs it"
        )
    # Root versions cannot roll back either: `state` keeps root_history/N.root.json of every
    # root trusted so far, and the Updater walks that chain before any offered root (5.3.4).
    state.mkdir(parents=True, exist_ok=True)
    try:
        updater = Updater(
            str(state),
            _BASE,
            target_base_url=_BASE + "targets/",
            fetcher=_DirectoryFetcher(metadata_dir),
            bootstrap=pinned_root,
        )
        info = updater.get_targetinfo(TARGET)
        if info is None:
            raise TufRejected(f"the TUF targets metadata in {metadata_dir} does not list {TARGET}")
        download = state / (TARGET + ".download")
        updater.download_target(info, str(download))
        data = download.read_bytes()
        download.unlink()
    except (tuf_errors.RepositoryError, tuf_errors.DownloadError, ValueError) as e:
        raise TufRejected(f"TUF verification of {metadata_dir} failed: {_describe(e)}") from e
    recheck(state, pinned_root, data)
    return data


def _describe(e: BaseException) -> str:
    kinds = {
        tuf_errors.UnsignedMetadataError: "not signed by the trusted keys",
        tuf_errors.ExpiredMetadataError: "expired",
        tuf_errors.BadVersionNumberError: "version rollback",
        tuf_errors.LengthOrHashMismatchError: "length or hash mismatch",
    }
    kind = next((text for cls, text in kinds.items() if isinstance(e, cls)), type(e).__name__)
    return f"{kind}: {e}"


def recheck(state: Path, pinned_root: bytes, data: bytes) -> None:
    """Re-verify a refreshed `data` against the TUF metadata kept in `state`, offline.

    The same chain as the refresh (signatures, thresholds, versions, length and hashes) except
    expiry, which the refresh checked: a pinned copy stays usable between refreshes.
    """
    try:
        root = Metadata[Root].from_bytes(pinned_root)
        while True:
            path = state / "root_history" / f"{root.signed.version + 1}.root.json"
            if not path.is_file():
                break
            new = Metadata[Root].from_bytes(_read(path))
            # TUF 5.3.4: N+1 is signed by a threshold of N's root keys and of its own.
            root.signed.verify_delegate(Root.type, new.signed_bytes, new.signatures)
            new.signed.verify_delegate(Root.type, new.signed_bytes, new.signatures)
            if new.signed.version != root.signed.version + 1:
                raise TufRejected(f"{path.name} holds root version {new.signed.version}")
            root = new
        raw_timestamp = _read(state / "timestamp.json")
        timestamp = Metadata[Timestamp].from_bytes(raw_timestamp)
        root.signed.verify_delegate(Timestamp.type, timestamp.signed_bytes, timestamp.signatures)
        raw_snapshot = _read(state / "snapshot.json")
        snapshot = Metadata[Snapshot].from_bytes(raw_snapshot)
        root.signed.verify_delegate(Snapshot.type, snapshot.signed_bytes, snapshot.signatures)
        _check_meta(timestamp.signed.snapshot_meta.version, snapshot.signed.version, "snapshot")
        timestamp.signed.snapshot_meta.verify_length_and_hashes(raw_snapshot)
        raw_targets = _read(state / "targets.json")
        targets = Metadata[Targets].from_bytes(raw_targets)
        root.signed.verify_delegate(Targets.type, targets.signed_bytes, targets.signatures)
        targets_meta = snapshot.signed.meta.get("targets.json")
        if targets_meta is None:
            raise TufRejected("the snapshot does not list targets.json")
        _check_meta(targets_meta.version, targets.signed.version, "targets")
        targets_meta.verify_length_and_hashes(raw_targets)
        info = targets.signed.targets.get(TARGET)
        if info is None:
            raise TufRejected(f"the top-level targets metadata does not list {TARGET}")
        info.verify_length_and_hashes(data)
    except TufRejected:
        raise
    except (tuf_errors.RepositoryError, ValueError, TypeError, KeyError) as e:
        raise TufRejected(f"the TUF metadata in {state} does not verify: {_describe(e)}") from e


def _check_meta(expected: int, actual: int, role: str) -> None:
    if expected != actual:
        raise TufRejected(f"{role} version {actual} is not the version {expected} signed for it")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise TufRejected(f"cannot read {path}: {e.strerror}") from e


def require_private(path: Path, stop: Path, user: int | None = None) -> None:
    """Refuse `path` (and each directory up to `stop`) when another user could have written it.

    A refreshed root takes precedence over the shipped one, so whoever may write it decides
    what every signature check trusts: only `user` (default: the effective user) or root may.
    """
    owner = os.geteuid() if user is None else user
    current = path
    while True:
        try:
            st = os.stat(current)
        except OSError as e:
            raise TufRejected(f"cannot check {current}: {e.strerror}") from e
        if st.st_uid not in (owner, 0):
            raise TufRejected(
                f"{current} is owned by uid {st.st_uid}, not by this user: refusing the "
                "refreshed public-good root (remove it or fix its owner)"
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TufRejected(
                f"{current} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): "
                f"refusing the refreshed public-good root (run chmod go-w {current})"
            )
        if current == stop or current.parent == current:
            return
        current = current.parent
