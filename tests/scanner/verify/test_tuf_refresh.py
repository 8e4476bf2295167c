"""`refresh_public_good`: a new public-good root is accepted only through TUF verification.

A private TUF repository (test keys) stands in for Sigstore's; its first root is passed as the
pinned TUF root. The real pinned root is used for the "unrelated private root" cases.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner
from tuf.api.metadata import Root

from scanner.errors import VerifyError
from scanner.fsutil import cache_root
from scanner.verify.trusted_roots import SigstoreRoot, refresh_public_good
from scanner.verify.tuf_refresh import TufRejected, require_private, verify_refresh
from tests.fixtures.sigstore_private import PrivateSigstore
from tests.fixtures.tuf_repo import TufRepo


@pytest.fixture(scope="module")
def instance() -> PrivateSigstore:
    return PrivateSigstore(name="tuf-test")


@pytest.fixture
def repo() -> TufRepo:
    return TufRepo()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _pinned(cache: Path) -> Path:
    return cache / "trust" / "public-good.json"


def test_accepts_a_correctly_signed_root_and_pins_it(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("root")  # root 2, signed by the keys of root 1 and its own
    repo.rotate("targets")  # root 3: the targets key changes
    raw = instance.trusted_root_json()
    target, root = refresh_public_good(
        repo.publish(tmp_path / "m", raw), pinned_tuf_root=repo.pinned
    )
    assert target == _pinned(cache) and target.read_bytes() == raw
    assert root.tlogs[0].key_id == instance.log_id
    # A later load re-verifies the pinned copy against the metadata kept beside it.
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw == raw
    mode = os.stat(target.parent).st_mode & 0o777
    assert mode == 0o700


def test_refused_refresh_keeps_the_previous_pin(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    raw = instance.trusted_root_json()
    refresh_public_good(repo.publish(tmp_path / "v1", raw), pinned_tuf_root=repo.pinned)
    intruder = {"timestamp": CryptoSigner.generate_ed25519()}
    other = PrivateSigstore(name="intruder").trusted_root_json()
    bad = repo.publish(tmp_path / "v2", other, version=2, signers=intruder)
    with pytest.raises(TufRejected, match="not signed by the trusted keys"):
        refresh_public_good(bad, pinned_tuf_root=repo.pinned)
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw == raw


@pytest.mark.parametrize("role", ["timestamp", "snapshot", "targets"])
def test_refuses_a_role_signed_by_another_key(
    role: str, repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    wrong = {role: CryptoSigner.generate_ed25519()}
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json(), signers=wrong)
    with pytest.raises(TufRejected, match=f"not signed by the trusted keys.*{role}"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert not _pinned(cache).exists()


def test_refuses_unsigned_metadata(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json())
    doc = json.loads((meta / "1.targets.json").read_text())
    doc["signatures"] = []
    (meta / "1.targets.json").write_text(json.dumps(doc))
    with pytest.raises(TufRejected, match="not signed"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert not _pinned(cache).exists()


def test_refuses_a_root_rotation_not_signed_by_the_previous_root(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("root", signed_by_old=False)
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json())
    with pytest.raises(TufRejected, match="not signed by the trusted keys.*root"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)


def test_refuses_a_rollback(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    raw = instance.trusted_root_json()
    refresh_public_good(repo.publish(tmp_path / "v2", raw, version=2), pinned_tuf_root=repo.pinned)
    old = repo.publish(tmp_path / "v1", PrivateSigstore(name="old").trusted_root_json())
    with pytest.raises(TufRejected, match="version rollback"):
        refresh_public_good(old, pinned_tuf_root=repo.pinned)
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw == raw


def test_refuses_a_root_rollback(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    """Root 2 was trusted once: metadata offering only root 1 (keys since revoked) is refused."""
    raw = instance.trusted_root_json()
    first, revoked = repo.pinned, dict(repo.signers)
    repo.rotate("timestamp")
    refresh_public_good(repo.publish(tmp_path / "new", raw), pinned_tuf_root=first)
    stale = TufRepo()
    stale.signers, stale.roots = revoked, [first]
    with pytest.raises(TufRejected, match="not signed by the trusted keys.*timestamp"):
        refresh_public_good(stale.publish(tmp_path / "old", raw, version=2), pinned_tuf_root=first)


def test_refuses_expired_metadata(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json(), expires_days=-1)
    with pytest.raises(TufRejected, match="expired"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert not _pinned(cache).exists()


def test_refuses_a_target_that_differs_from_its_signed_hash(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    listed = instance.trusted_root_json()
    other = PrivateSigstore(name="swapped").trusted_root_json()
    meta = repo.publish(tmp_path / "m", other, listed=listed)
    with pytest.raises(TufRejected, match="length or hash mismatch"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)


def test_real_pinned_root_refuses_an_unrelated_private_root(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    """The case of the issue: a private trusted_root.json offered as public-good."""
    plain = tmp_path / "trusted_root.json"
    plain.write_bytes(instance.trusted_root_json())
    with pytest.raises(TufRejected, match="not a directory of TUF metadata"):
        refresh_public_good(plain)
    # A whole private TUF repository, however well signed, does not chain from Sigstore's root.
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json())
    with pytest.raises(TufRejected, match="TUF verification"):
        refresh_public_good(meta)
    # A directory holding only the file.
    only = tmp_path / "only"
    only.mkdir()
    (only / "trusted_root.json").write_bytes(instance.trusted_root_json())
    with pytest.raises(TufRejected, match="TUF verification"):
        refresh_public_good(only)
    assert not _pinned(cache).exists()
    assert SigstoreRoot.public_good().name == "public-good"


def _refreshed(repo: TufRepo, instance: PrivateSigstore, tmp_path: Path) -> Path:
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json())
    target, _ = refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    return target


def test_a_copy_written_without_tuf_metadata_is_refused(
    instance: PrivateSigstore, cache: Path
) -> None:
    pinned = _pinned(cache)
    pinned.parent.mkdir(parents=True, mode=0o700)
    pinned.write_bytes(instance.trusted_root_json())
    with pytest.raises(VerifyError, match="cannot be trusted"):
        SigstoreRoot.public_good()


def test_a_copy_changed_after_the_refresh_is_refused(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    target = _refreshed(repo, instance, tmp_path)
    target.write_bytes(PrivateSigstore(name="later").trusted_root_json())
    with pytest.raises(VerifyError, match="length or hash mismatch"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_kept_metadata_is_rechecked_against_the_pinned_root(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    _refreshed(repo, instance, tmp_path)
    # Another repository's root is not the one the copy was verified with.
    with pytest.raises(VerifyError, match="cannot be trusted"):
        SigstoreRoot.public_good(pinned_tuf_root=TufRepo().pinned)
    with pytest.raises(VerifyError, match="cannot be trusted"):
        SigstoreRoot.public_good()


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_copy_others_may_write_is_refused(
    where: str, repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    target = _refreshed(repo, instance, tmp_path)
    (target if where == "file" else target.parent).chmod(0o620 if where == "file" else 0o777)
    with pytest.raises(VerifyError, match="writable by group or others"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_the_cache_directory_is_the_documented_one(cache: Path) -> None:
    assert cache_root() == cache


def test_a_copy_owned_by_another_user_is_refused(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    target = _refreshed(repo, instance, tmp_path)
    me = os.geteuid()
    if me != 0:
        # Seen by another (non-root) user, the copy this user wrote is someone else's.
        with pytest.raises(TufRejected, match=f"owned by uid {me}"):
            require_private(target, cache, user=me + 4242)
        require_private(target, cache)
        return
    # Root hands the file, then its directory, to another user: both are refused.
    os.chown(target, 4242, -1)
    with pytest.raises(VerifyError, match="owned by uid 4242"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)
    os.chown(target, me, -1)
    os.chown(target.parent, 4242, -1)
    with pytest.raises(VerifyError, match="owned by uid 4242"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)
    # For user 4242 the same tree is fine: its own directory, and root's file.
    require_private(target, cache, user=4242)


def _state(cache: Path) -> Path:
    return cache / "trust" / "public-good-tuf"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: (s / "timestamp.json").unlink(), "cannot read"),
        (lambda s: (s / "snapshot.json").unlink(), "cannot read"),
        (lambda s: (s / "targets.json").unlink(), "cannot read"),
        (lambda s: (s / "snapshot.json").write_text("{}"), "does not verify"),
    ],
)
def test_kept_metadata_must_be_complete(
    repo: TufRepo,
    instance: PrivateSigstore,
    cache: Path,
    tmp_path: Path,
    damage: object,
    message: str,
) -> None:
    _refreshed(repo, instance, tmp_path)
    damage(_state(cache))  # type: ignore[operator]
    with pytest.raises(VerifyError, match=message):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_kept_metadata_versions_must_chain(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    """Each kept role must be the version the role above it signed for, and each kept root
    the next version: swapping in other validly signed metadata is refused."""
    raw = instance.trusted_root_json()
    refresh_public_good(repo.publish(tmp_path / "v1", raw), pinned_tuf_root=repo.pinned)
    state = _state(cache)
    old_snapshot = (state / "snapshot.json").read_bytes()
    old_targets = (state / "targets.json").read_bytes()
    refresh_public_good(repo.publish(tmp_path / "v2", raw, version=2), pinned_tuf_root=repo.pinned)
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw == raw
    (state / "snapshot.json").write_bytes(old_snapshot)
    with pytest.raises(VerifyError, match="snapshot version 1 is not the version 2"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)
    refresh_public_good(repo.publish(tmp_path / "v3", raw, version=3), pinned_tuf_root=repo.pinned)
    (state / "targets.json").write_bytes(old_targets)
    with pytest.raises(VerifyError, match="targets version 1 is not the version 3"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_kept_roots_must_be_consecutive(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("targets")  # roots 2 and 3, signed by the same root key as root 1
    repo.rotate("targets")
    _refreshed(repo, instance, tmp_path)
    history = _state(cache) / "root_history"
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw
    (history / "2.root.json").write_bytes(repo.roots[2])
    with pytest.raises(VerifyError, match="2.root.json holds root version 3"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_kept_root_rotation_must_be_signed_by_the_previous_root(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("root")
    _refreshed(repo, instance, tmp_path)
    unauthorised = TufRepo()
    unauthorised.signers, unauthorised.roots = dict(repo.signers), [repo.pinned]
    unauthorised.root = Root.from_dict(json.loads(repo.pinned)["signed"])  # becomes root 2
    unauthorised.rotate("root", signed_by_old=False)
    history = _state(cache) / "root_history"
    (history / "2.root.json").write_bytes(unauthorised.roots[1])
    with pytest.raises(VerifyError, match="not signed by the trusted keys: root"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_a_target_missing_from_the_metadata_is_refused(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    meta = repo.publish(tmp_path / "m", instance.trusted_root_json())
    for f in (meta / "targets").iterdir():
        f.unlink()
    with pytest.raises(TufRejected, match="TUF verification .* failed"):
        refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert not _pinned(cache).exists()


def test_metadata_names_never_leave_the_directory(tmp_path: Path) -> None:
    from tuf.api import exceptions

    from scanner.verify.tuf_refresh import _DirectoryFetcher

    (tmp_path / "meta").mkdir()
    (tmp_path / "secret.json").write_text("{}")
    (tmp_path / "meta" / "1.root.json").write_text("root")
    fetcher = _DirectoryFetcher(tmp_path / "meta")
    assert b"".join(fetcher.fetch("offline-tuf:/1.root.json")) == b"root"
    for url in ("offline-tuf:/../secret.json", "offline-tuf:/a//b", "offline-tuf:/./x"):
        with pytest.raises(exceptions.DownloadHTTPError) as refused:
            b"".join(fetcher.fetch(url))
        # 404, as for a missing file: the updater reads it as "no such metadata", never more.
        assert refused.value.status_code == 404
    with pytest.raises(exceptions.DownloadError, match="unexpected URL"):
        b"".join(fetcher.fetch("https://tuf-repo-cdn.sigstore.dev/1.root.json"))
    (tmp_path / "meta" / "dir.json").mkdir()
    with pytest.raises(exceptions.DownloadError, match="cannot read"):
        b"".join(fetcher.fetch("offline-tuf:/dir.json"))


def test_only_the_verified_metadata_is_kept(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("root")
    _refreshed(repo, instance, tmp_path)
    trust = cache / "trust"
    assert sorted(p.name for p in trust.iterdir()) == ["public-good-tuf", "public-good.json"]
    state = _state(cache)
    assert sorted(p.name for p in state.iterdir()) == [
        "root.json",
        "root_history",
        "snapshot.json",
        "targets.json",
        "timestamp.json",
    ]
    assert sorted(p.name for p in (state / "root_history").iterdir()) == [
        "1.root.json",
        "2.root.json",
    ]
    assert (trust / "public-good.json").stat().st_mode & 0o777 == 0o600


def test_the_walk_stops_at_the_cache_directory(tmp_path: Path) -> None:
    """Directories above `stop` (a shared parent of the cache) are not this check's business."""
    shared = tmp_path / "shared"
    target = shared / "cache" / "trust" / "public-good.json"
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    shared.chmod(0o777)
    require_private(target, shared / "cache")
    (shared / "cache").chmod(0o777)
    with pytest.raises(TufRejected, match="cache is writable by group or others"):
        require_private(target, shared / "cache")


def test_a_stop_outside_the_path_never_shortens_the_walk(tmp_path: Path) -> None:
    """A `stop` that is not an ancestor (whatever it sorts like) is never reached: every
    directory up to the filesystem root is checked."""
    target = tmp_path / "open" / "public-good.json"
    target.parent.mkdir()
    target.write_text("{}")
    target.parent.chmod(0o777)
    with pytest.raises(TufRejected, match="open is writable by group or others"):
        require_private(target, tmp_path / "z")
    # The walk ends at the filesystem root (root-owned, not writable by others) and accepts it.
    require_private(Path("/"), tmp_path / "z")


def test_kept_metadata_newer_than_the_version_signed_for_it_is_refused(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    raw = instance.trusted_root_json()
    refresh_public_good(repo.publish(tmp_path / "v1", raw), pinned_tuf_root=repo.pinned)
    state = _state(cache)
    old = {n: (state / n).read_bytes() for n in ("timestamp.json", "snapshot.json")}
    refresh_public_good(repo.publish(tmp_path / "v2", raw, version=2), pinned_tuf_root=repo.pinned)
    # Timestamp and snapshot of version 1 (consistent with each other) over targets version 2.
    for name, data in old.items():
        (state / name).write_bytes(data)
    with pytest.raises(VerifyError, match="targets version 2 is not the version 1 signed"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_a_kept_root_of_an_older_version_is_refused(
    repo: TufRepo, instance: PrivateSigstore, cache: Path, tmp_path: Path
) -> None:
    repo.rotate("targets")
    _refreshed(repo, instance, tmp_path)
    # Root 1 again under the name of root 2: validly signed, but a rollback.
    (_state(cache) / "root_history" / "2.root.json").write_bytes(repo.pinned)
    with pytest.raises(VerifyError, match="2.root.json holds root version 1"):
        SigstoreRoot.public_good(pinned_tuf_root=repo.pinned)


def test_versions_above_256_verify(instance: PrivateSigstore, cache: Path, tmp_path: Path) -> None:
    """Versions are compared by value (CPython shares only the ints up to 256)."""
    repo = TufRepo()
    assert repo.root is not None
    repo.root.version = 300
    repo.roots = [repo._sign(repo.root, [repo.signers["root"]])]
    repo.rotate("targets")  # root 301
    raw = instance.trusted_root_json()
    meta = repo.publish(tmp_path / "m", raw, version=300)
    for number in (1, 2):
        (meta / f"{number}.root.json").rename(meta / f"{number + 299}.root.json")
    refresh_public_good(meta, pinned_tuf_root=repo.pinned)
    assert SigstoreRoot.public_good(pinned_tuf_root=repo.pinned).raw == raw


def test_the_state_directory_is_created_with_its_parents(
    repo: TufRepo, instance: PrivateSigstore, tmp_path: Path
) -> None:
    raw = instance.trusted_root_json()
    meta = repo.publish(tmp_path / "m", raw)
    state = tmp_path / "new" / "deeper" / "state"
    assert verify_refresh(meta, state, repo.pinned) == raw
    assert (state / "root_history").is_dir()
