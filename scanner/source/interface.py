"""The read-only root filesystem view that every source exposes.

A source (host directory, OCI layout, OCI archive, docker-archive, registry) turns its target
into a `RootView`: the squashed tree, the small metadata files the catalogers and detectors
asked for, and the GPU-library candidates. Catalogers never know whether the root is an image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import IO, Protocol

from msgspec import Struct, field

from scanner.model import (
    AssetInfo,
    Candidate,
    FileFacts,
    NodeKind,
    OciDigest,
    ProgressFn,
    Skipped,
    StatKey,
)
from scanner.source.containment import MAX_HOPS, normalize, resolve_in_tree

__all__ = [
    "ContentProbe",
    "LocatedProbe",
    "Node",
    "RootView",
    "Selector",
    "SignatureLayer",
    "Source",
    "normalize",
]

#: Analyzes one candidate's bytes read once as a stream: (path in root, stream, size) -> facts.
#: Supplied by the pipeline (hash + ELF analysis) so sources never import later stages.
ContentProbe = Callable[[str, IO[bytes], int], FileFacts]
#: Like `ContentProbe`, for bytes that also lie verbatim in a regular file at (path, offset):
#: the probe may read them there (random access) instead of copying the stream aside, and may
#: answer later: a callable returning the facts, which the source calls at the layer's end
#: (the stream then skips the bytes; the layer digest still covers them).
LocatedProbe = Callable[[str, IO[bytes], int, tuple[str, int]], FileFacts | Callable[[], FileFacts]]


class Node(Struct, frozen=True):
    """One entry of the squashed tree. Paths are absolute inside the root ("/usr/lib/x")."""

    path: str
    kind: NodeKind
    size: int = 0
    link: str | None = None  # symlink target exactly as stored
    layer: OciDigest | None = None  # image layer the entry came from (None on hosts)
    mode: int = 0o644


class Selector(Struct, frozen=True):
    """What the pipeline wants from a source, by path.

    ``is_candidate``: file names that look like GPU libraries; their content is analyzed
    (hashed, ELF facts) during the single read of an image layer.
    ``is_metadata``: small files (package databases, version headers, version.json) whose bytes
    the source keeps for the catalogers and detectors.
    ``probe``: run by image sources on each candidate during the layer read.
    ``version``: changes whenever the predicates change, so cached layer yields are redone.
    """

    is_candidate: Callable[[str], bool]
    is_metadata: Callable[[str], bool]
    probe: ContentProbe
    version: str
    #: Paths a host walk reads even when ``include`` limits it: the package databases
    #: (`scanner.catalog.DATABASE_PATHS`), which say who owns the files of any subtree. No
    #: default: every selector says it (a selector without them once lost the owners of a
    #: process's own root).
    databases: tuple[str, ...]
    max_metadata_bytes: int = 256 * 1024 * 1024
    probe_at: LocatedProbe | None = None
    #: Host sources call this with (path, host path, `StatKey`) as soon as the
    #: walk finds a candidate by name, so hashing can start before the walk ends.
    on_candidate: Callable[[str, str, StatKey], None] | None = None
    #: Told how far the read has got (files walked, layers read), for a progress display.
    on_progress: ProgressFn | None = None

    def metadata_too_large(self, size: int) -> str | None:
        """Why a metadata file of ``size`` bytes is not kept (the one wording of every source),
        or None when it fits the limit."""
        if size > self.max_metadata_bytes:
            return f"metadata file of {size} bytes exceeds the {self.max_metadata_bytes} byte limit"
        return None


class RootView(Struct):
    """The scanned root after squashing: a tree plus captured metadata and candidates."""

    info: AssetInfo
    nodes: dict[str, Node]
    metadata: dict[str, bytes]  # path -> content, for paths the selector marked as metadata
    candidates: list[Candidate]  # real files (symlinks resolved) whose name or alias matched
    skipped: list[Skipped] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)

    def resolve(self, path: str, max_hops: int = MAX_HOPS) -> str | None:
        """Resolve symlinks of ``path`` inside the root; None when dangling or a loop.

        Absolute targets and ``..`` are interpreted against the root, so no link can leave it
        (`scanner.source.containment`).
        """
        return resolve_in_tree(self.nodes, path, max_hops)

    def listdir(self, directory: str) -> Iterator[str]:
        """Paths directly under ``directory`` (absolute, inside the root)."""
        prefix = directory.rstrip("/") + "/"
        for p in self.nodes:
            if p.startswith(prefix) and "/" not in p[len(prefix) :]:
                yield p


class SignatureLayer(Struct, frozen=True):
    """A signature or attestation layer stored beside an image, as fetched, for the verify
    stage (which checks it, its digest included)."""

    subject: str  # the image digest it was found for
    media_type: str
    data: bytes
    annotations: dict[str, str]
    digest: str


class Source(Protocol):
    """A scan target that can produce a `RootView`."""

    #: Digests that signatures of the scanned image may name (an index and its manifest),
    #: known once `open_view` has run; empty for a host root.
    digests: tuple[str, ...]

    def open_view(self, selector: Selector) -> RootView:
        """Read the target (each image layer at most once) and return the squashed view."""
        ...

    def signature_material(self) -> Sequence[SignatureLayer]:
        """Signature and attestation layers the target holds for `digests` (a registry's
        referrers and cosign tags); empty where the target keeps none. Called after
        `open_view`."""
        ...
