"""The one module that composes the scan: source -> catalog -> hash -> detect -> verify.

`run_scan` returns a format-neutral `ScanResult`; encoders (bom/, report.py) and the CLI
consume it. Nothing here prints. `run_scan` reads as its stages; each stage below is one
function taking what it needs and returning what the next stages use.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING

from msgspec.structs import replace

from scanner import __version__
from scanner.errors import SourceError, UsageError
from scanner.fsutil import cache_root
from scanner.hash import (
    HostHasher,
    SpoolingHasher,
    facts_of,
    hash_region,
    may_be_dpkg_owned,
)
from scanner.model import (
    AssetKind,
    Candidate,
    Digests,
    ElfFacts,
    FileFacts,
    Finding,
    FindingKind,
    GpuLibrary,
    ImageTrust,
    Integrity,
    NodeFacts,
    OwnedFile,
    Package,
    Product,
    Progress,
    ProgressFn,
    ProgressStage,
    Provenance,
    RuntimeScan,
    ScanResult,
    Skipped,
    StatKey,
)
from scanner.node.inputs import NodeInputs
from scanner.source.interface import RootView, Selector, Source
from scanner.verify.inputs import TrustInputs
from scanner.verify.integrity import integrity_verdict

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from scanner.catalog.interface import CatalogResult
    from scanner.detect.context import DetectContext
    from scanner.source import Limits
    from scanner.source.registry import RegistryOptions
    from scanner.verify.provenance import VerifiedCatalog
    from scanner.verify.trust import TrustPolicy

#: Bumped when what the probe computes changes, so cached layer yields are recomputed.
PROBE_VERSION = "1"

Owners = dict[str, tuple[Package, OwnedFile]]


@dataclass(frozen=True)
class ScanOptions:
    """Knobs of one scan; defaults are what a user gets without flags."""

    cache_dir: Path | None = None  # None -> scanner.fsutil.cache_root()
    use_cache: bool = True
    all_filesystems: bool = False
    include: tuple[str, ...] = ()
    platform: str | None = None
    workers: int = 0  # 0 -> os.cpu_count()
    max_ratio: float | None = None
    max_total_bytes: int | None = None
    max_layer_bytes: int | None = None
    progress: ProgressFn | None = field(default=None, compare=False)
    trust: TrustInputs = field(default_factory=TrustInputs)
    registry: RegistryOptions | None = None
    #: also walk live processes for the GPU libraries they have mapped (host roots only)
    runtime: bool = False
    proc: str | None = None  # their proc directory; None -> ROOT/proc
    #: host scans: where the node's driver, GPUs, CDI specs and L4T release are read
    node: NodeInputs = field(default_factory=NodeInputs)

    def resolved_cache_dir(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else cache_root()


#: A spooled library is at most this large in practice (cuBLASLt: 0.75 GB), one at a time.
_SPOOL_ROOM = 2 << 30


def _spool_parent() -> str | None:
    """Where image candidates are spooled for ELF analysis: RAM-backed /dev/shm when it has
    room (writing there is about twice as fast as to a disk-backed /tmp), unless $TMPDIR
    says otherwise."""
    if os.environ.get("TMPDIR"):
        return None
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= _SPOOL_ROOM and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except OSError:
        pass
    return None


def _make_image_probe(spool_dir: str) -> Callable[[str, IO[bytes], int], FileFacts]:
    """Probe for image layers: hash while spooling, then analyze the spooled ELF file."""

    def probe(path: str, stream: IO[bytes], size: int) -> FileFacts:
        from scanner.detect import analyze_elf

        hasher = SpoolingHasher(spool_dir, md5=may_be_dpkg_owned(path))
        try:
            hasher.feed(stream, size)
            digests = hasher.finish()
            return facts_of(digests, lambda: analyze_elf(hasher.path, name=path))
        finally:
            hasher.discard()

    return probe


def _make_located_probe(
    pool: Callable[[], Executor],
) -> Callable[[str, IO[bytes], int, tuple[str, int]], Callable[[], FileFacts]]:
    """Probe for uncompressed layers stored in a file: hash and analyze the member where it
    lies, on the pool, while the layer stream skips it (two cores instead of one)."""

    def work(path: str, size: int, at: tuple[str, int]) -> FileFacts:
        from scanner.detect import analyze_elf_region

        before = os.stat(at[0])
        digests = hash_region(at[0], at[1], size, md5=may_be_dpkg_owned(path))
        facts = facts_of(digests, lambda: analyze_elf_region(at[0], at[1], size, name=path))
        after = os.stat(at[0])
        if (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size):
            raise SourceError(f"{at[0]} changed while it was being scanned")
        return facts

    def probe_at(
        path: str, stream: IO[bytes], size: int, at: tuple[str, int]
    ) -> Callable[[], FileFacts]:
        return pool().submit(work, path, size, at).result

    return probe_at


def _selector(spool_dir: str, pool: Callable[[], Executor]) -> Selector:
    from scanner import catalog, detect
    from scanner.detect.products import is_tool_path

    def is_metadata(path: str) -> bool:
        return catalog.is_metadata_path(path) or detect.is_metadata_path(path)

    def is_candidate(path: str) -> bool:
        return detect.is_candidate_path(path) or is_tool_path(path)

    return Selector(
        is_candidate=is_candidate,
        is_metadata=is_metadata,
        probe=_make_image_probe(spool_dir),
        probe_at=_make_located_probe(pool),
        version=_probe_version(),
        databases=catalog.DATABASE_PATHS,
    )


def _probe_version() -> str:
    """Key of cached facts: changes whenever what catalogers or detectors compute changes."""
    from scanner import catalog, detect

    return f"{catalog.CATALOG_VERSION}/{detect.DETECT_VERSION}/{PROBE_VERSION}"


def _owner_of(cand: Candidate, owners: Owners) -> tuple[Package, OwnedFile] | None:
    hit = owners.get(cand.ref.path)
    if hit is not None:
        return hit
    # Some managers record the path through a symlinked directory or the alias name only.
    for alias in cand.aliases:
        hit = owners.get(alias)
        if hit is not None and hit[1].digest:
            return hit
    for alias in cand.aliases:
        hit = owners.get(alias)
        if hit is not None:
            return hit
    return None


def _analyze_host_file(host_path: str, path: str) -> ElfFacts:
    from scanner.detect import analyze_elf  # pyelftools: not for a rescan that reads no file

    return analyze_elf(host_path, name=path)


def _host_hasher(options: ScanOptions) -> HostHasher:
    return HostHasher(
        cache_path=options.resolved_cache_dir() / "host-files.json" if options.use_cache else None,
        version=_probe_version(),
        workers=options.workers,
        analyze=_analyze_host_file,
        progress=options.progress,
    )


class _Clock:
    """Seconds spent in each stage, for the result's stats."""

    def __init__(self) -> None:
        self.marks = [time.perf_counter()]

    def lap(self) -> None:
        self.marks.append(time.perf_counter())

    def stats(self) -> dict[str, float]:
        start, source, catalog, hashed, end = self.marks
        return {
            "seconds_source": round(source - start, 4),
            "seconds_catalog": round(catalog - source, 4),
            "seconds_hash": round(hashed - catalog, 4),
            "seconds_total": round(end - start, 4),
        }


def run_scan(target: str, options: ScanOptions | None = None) -> ScanResult:
    """Scan a host root or an image and return every GPU library with its verdicts."""
    from scanner.source import symlink_loops

    options = options or ScanOptions()
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # Trust material is checked before any work: a catalog that does not verify stops here.
    policy, catalogs = _load_trust(options.trust)
    clock = _Clock()
    source = _open_source(target, options)
    # --runtime's preconditions before the walk (a host scan of / takes minutes)
    root, proc = _runtime_proc(source, options) if options.runtime else ("", "")
    hasher = _host_hasher(options)
    view, selector = _read_root(source, hasher, options.progress)
    clock.lap()
    skipped: list[Skipped] = list(view.skipped)
    # Every source drops a looping library symlink; say so once here (issue 2, section 7).
    skipped.extend(symlink_loops(view.nodes, selector.is_candidate))

    catalog, ctx = _catalog(view, options, skipped)
    clock.lap()
    facts, unread = _hash(view, catalog.owners, hasher, skipped)
    clock.lap()
    ctx = _with_records(ctx, facts, catalog, catalogs)
    libraries, not_library, told = _identify(view, facts, unread, catalog.owners, ctx, skipped)
    libraries, findings = _cross_check(libraries)
    findings.extend(not_library)
    skipped = [s for s in skipped if s not in told]
    runtime, runtime_seconds = None, 0.0
    if options.runtime:
        runtime_seconds = -time.perf_counter()
        libraries, loaded_findings, runtime = _runtime(
            root, proc, view, facts, catalog.owners, ctx, libraries, options
        )
        findings.extend(loaded_findings)
        runtime_seconds += time.perf_counter()
    findings.extend(_integrity_findings(libraries))

    image_trust = None
    if policy is not None:
        _stage(options, ProgressStage.VERIFY, len(libraries))
        libraries, image_trust = _verify(source, view, options.trust, policy, catalogs, libraries)
        findings.extend(_trust_findings(libraries, catalogs, image_trust))
    # --proc (a mounted host's proc) is where its driver files are too
    node = _node(source, options, libraries)
    products, product_owners = _products(view, facts, catalog, ctx, libraries, node)
    clock.lap()
    owners_used = {lib.owner.purl: lib.owner for lib in libraries if lib.owner is not None}
    owners_used.update(product_owners)
    from scanner.detect.products import is_stack_purl

    # the GPU stack's packages that OSV records name (torch, jax, ...), owners of a file or not
    owners_used.update({p.purl: p for p in catalog.packages if is_stack_purl(p.purl)})
    return ScanResult(
        asset=view.info,
        libraries=tuple(libraries),
        packages=tuple(sorted(owners_used.values(), key=lambda p: p.purl)),
        findings=tuple(findings),
        skipped=tuple(skipped),
        started_at=started,
        tool_version=__version__,
        stats={
            **view.stats,
            **clock.stats(),
            "nodes": float(len(view.nodes)),
            "candidates": float(len(view.candidates)),
            **({"seconds_runtime": round(runtime_seconds, 4)} if runtime else {}),
        },
        image_trust=image_trust,
        runtime=runtime,
        node=node,
        products=products,
    )


def _node(
    source: Source, options: ScanOptions, libraries: Sequence[GpuLibrary]
) -> NodeFacts | None:
    """Node stage (host roots only): driver, GPUs, container-toolkit injection, L4T."""
    from scanner.source.directory import DirectorySource

    if not isinstance(source, DirectorySource) or not options.node.enabled:
        return None
    from scanner.hash import HostFactsCache
    from scanner.node.reader import read_node

    # --proc (a mounted host's proc) is where its driver files are too
    inputs = replace(options.node, proc=options.node.proc or options.proc)
    cache = HostFactsCache(
        options.resolved_cache_dir() / "node-files.json" if options.use_cache else None
    )
    return read_node(source.root, inputs, libraries, cache)


def _open_source(target: str, options: ScanOptions) -> Source:
    from scanner.source import open_source

    return open_source(
        target,
        cache_dir=options.resolved_cache_dir() / "layers",
        use_cache=options.use_cache,
        all_filesystems=options.all_filesystems,
        include=options.include,
        limits=_limits(options),
        platform=options.platform,
        registry=options.registry,
    )


def _read_root(
    source: Source, hasher: HostHasher, progress: ProgressFn | None
) -> tuple[RootView, Selector]:
    """Source stage: the squashed view of the target. Host candidates start hashing as the
    walk finds them; image candidates are hashed and analyzed as their layer streams by."""
    spool_dir = tempfile.mkdtemp(prefix="gpuprov-", dir=_spool_parent())
    selector = _selector(spool_dir, lambda: hasher.pool)
    try:
        view = source.open_view(replace(selector, on_candidate=hasher.early, on_progress=progress))
    except BaseException:
        hasher.shutdown()
        raise
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)
    return view, selector


def _catalog(
    view: RootView, options: ScanOptions, skipped: list[Skipped]
) -> tuple[CatalogResult, DetectContext]:
    """Catalog stage: owner packages of the root, and what its metadata says for detection."""
    from scanner.catalog import catalog_view
    from scanner.detect import build_context

    _stage(options, ProgressStage.CATALOG, len(view.candidates))
    catalog = catalog_view(view)
    skipped.extend(catalog.skipped)
    ctx = build_context(view.metadata, view.info)
    skipped.extend(ctx.skipped)
    return catalog, ctx


def _hash(
    view: RootView, owners: Owners, hasher: HostHasher, skipped: list[Skipped]
) -> tuple[dict[str, FileFacts], dict[str, str]]:
    """Hash stage: facts of every candidate (images': from the source already), and why a
    candidate could not be read (path -> reason)."""
    facts = {c.ref.path: c.facts for c in view.candidates if c.facts is not None}
    unread: dict[str, str] = {}

    def need_md5(cand: Candidate) -> bool:
        owner = _owner_of(cand, owners)
        return owner is not None and (owner[1].algorithm or "").lower() == "md5"

    facts.update(hasher.finish(view.candidates, need_md5, skipped, unread))
    return facts, unread


def _with_records(
    ctx: DetectContext,
    facts: dict[str, FileFacts],
    catalog: CatalogResult,
    catalogs: Sequence[VerifiedCatalog],
) -> DetectContext:
    """Other records of the same bytes, wherever the file lies: a relocated toolkit's wheel
    RECORD, a signed catalog (issue 7: hosts had no version where images had the config)."""
    from scanner.detect import digest_records

    records = digest_records(
        {f.digests.sha256 for f in facts.values()},
        catalog.packages,
        [
            (
                f"catalog {c.name} (signed by {c.signer})",
                [(e.name, e.sha256, e.family, e.version, e.cuda_major) for e in c.entries],
            )
            for c in catalogs
        ],
    )
    return replace(ctx, records=records)


def _identify(
    view: RootView,
    facts: dict[str, FileFacts],
    unread: dict[str, str],
    owners: Owners,
    ctx: DetectContext,
    skipped: list[Skipped],
) -> tuple[list[GpuLibrary], list[Finding], set[Skipped]]:
    """Detect stage: each candidate as a GPU library with its integrity verdict, or as a
    finding when it is none; and the source's skipped records those findings replace.

    A candidate is a GPU library only when its bytes were read and are an ELF shared library;
    anything else is reported once, as a finding of its own kind, in every format (issue 7: a
    non-ELF file was listed as cuDNN *and* skipped; an unreadable one was a table row, counted
    by a finding, and missing from the CycloneDX).
    """
    from scanner.detect.identify import identify
    from scanner.detect.products import is_tool_path

    libraries: list[GpuLibrary] = []
    not_library: list[Finding] = []
    # Why an image source did not read a candidate (a sparse tar entry) becomes the reason of
    # its finding rather than a second, skipped, record of the same file.
    not_read = {
        s.path: s for s in skipped if s.stage == "source" and "content not read" in s.reason
    }
    told: set[Skipped] = set()
    for cand in sorted(view.candidates, key=lambda c: c.ref.path):
        if is_tool_path(cand.ref.path):
            continue  # a tool binary is a product (`_products`), not a library
        f = facts.get(cand.ref.path)
        hit = _owner_of(cand, owners)
        owner, record = (hit[0], hit[1]) if hit else (None, None)
        if f is None:
            source_skip = not_read.get(cand.ref.path)
            if source_skip is not None:
                told.add(source_skip)
            reason = unread.get(cand.ref.path) or (
                source_skip.reason if source_skip is not None else "its content was not read"
            )
            not_library.append(_unreadable(cand, reason, owner, record))
            continue
        if f.not_elf:
            not_library.append(_not_elf(cand, f, owner, record))
            continue
        ident = identify(cand.ref.path, f, owner, ctx, aliases=cand.aliases)
        integrity, reason = integrity_verdict(f.digests, owner, record)
        libraries.append(
            GpuLibrary(
                ref=cand.ref,
                size=cand.size,
                aliases=cand.aliases,
                ident=ident,
                digests=f.digests,
                owner=owner,
                integrity=integrity,
                integrity_reason=reason,
                error=f.error,
            )
        )
    return libraries, not_library, told


def _products(
    view: RootView,
    facts: dict[str, FileFacts],
    catalog: CatalogResult,
    ctx: DetectContext,
    libraries: Sequence[GpuLibrary],
    node: NodeFacts | None,
) -> tuple[tuple[Product, ...], dict[str, Package]]:
    """Product stage: the products bulletins name (toolkit releases, tool binaries, product
    libraries), and the packages that carry them, by purl."""
    from scanner.detect.present import find_products
    from scanner.detect.products import is_tool_path

    tools = []
    owners: dict[str, Package] = {}
    for cand in view.candidates:
        f = facts.get(cand.ref.path)
        if f is None or not is_tool_path(cand.ref.path):
            continue  # an unread tool was told as skipped by the hash stage
        hit = _owner_of(cand, catalog.owners)
        owner = hit[0] if hit else None
        if owner is not None:
            owners[owner.purl] = owner
        tools.append((cand.ref, cand.aliases, f, owner))
    build_lines = {
        lib.ref.path: f.elf.toolkit_line
        for lib in libraries
        if (f := facts.get(lib.ref.path)) is not None and f.elf is not None and f.elf.toolkit_line
    }
    labels = view.info.label_dict()
    products = find_products(
        ctx.toolkits, catalog.packages, tools, libraries, node, build_lines, labels
    )
    for pkg in catalog.packages:
        if any(p.owner == pkg.purl for p in products):
            owners[pkg.purl] = pkg
    return products, owners


def _runtime_proc(source: Source, options: ScanOptions) -> tuple[str, str]:
    """The host root and the proc directory ``--runtime`` reads, refused when the target is an
    image or the directory holds no live processes."""
    from scanner.runtime.procfs import looks_like_proc
    from scanner.source.directory import DirectorySource

    if not isinstance(source, DirectorySource):
        raise UsageError("--runtime applies to a host root (a directory), not to an image")
    proc = options.proc or os.path.join(source.root, "proc")
    if not looks_like_proc(proc):
        # an empty mount point would report a node where nothing runs: refuse instead
        raise SourceError(
            f"--runtime: {proc} holds no live processes (no PID/maps); "
            "give the host's proc directory with --proc DIR (e.g. /host/proc)"
        )
    return source.root, proc


def _runtime(
    root: str,
    proc: str,
    view: RootView,
    facts: dict[str, FileFacts],
    owners: Owners,
    ctx: DetectContext,
    libraries: list[GpuLibrary],
    options: ScanOptions,
) -> tuple[list[GpuLibrary], list[Finding], RuntimeScan]:
    """Runtime stage (``--runtime``): the GPU libraries live processes have mapped, hashed as
    loaded, on the libraries they are or as loaded copies of their own."""
    from scanner.detect import analyze_elf, is_candidate_path
    from scanner.hash import HostFactsCache
    from scanner.runtime.attach import apply_loaded
    from scanner.runtime.loaded import resolve_loaded
    from scanner.runtime.owners import owners_in_own_roots
    from scanner.runtime.procfs import walk_proc

    try:
        walk = walk_proc(proc, root, is_candidate_path)
    except OSError as e:
        raise SourceError(f"--runtime: cannot list processes in {proc}: {e.strerror or e}") from e
    disk: dict[str, tuple[StatKey, FileFacts]] = {}
    inodes: dict[tuple[int, int], str] = {}
    for cand in view.candidates:
        found = facts.get(cand.ref.path)
        if found is None or cand.stat_key is None:
            continue
        for path in (cand.ref.path, *cand.aliases):
            disk[path] = (cand.stat_key, found)
        inodes[(cand.stat_key[0], cand.stat_key[1])] = cand.ref.path

    def need_md5(path: str) -> bool:
        hit = owners.get(path)
        return hit is not None and (hit[1].algorithm or "").lower() == "md5"

    cache_dir = options.resolved_cache_dir()
    copies = resolve_loaded(
        walk,
        root,
        disk.get,
        inodes,
        HostFactsCache(cache_dir / "runtime-files.json" if options.use_cache else None),
        _probe_version(),
        lambda opened, name: analyze_elf(opened, name=name),
        need_md5,
    )
    own_roots = owners_in_own_roots(copies, walk.proc)
    return apply_loaded(copies, walk, libraries, owners, ctx, own_roots)


def _cross_check(libraries: list[GpuLibrary]) -> tuple[list[GpuLibrary], list[Finding]]:
    """What the libraries say about each other: versions from identical bytes and from
    agreeing siblings, then mixed cuDNN installs (each such library noted)."""
    from scanner.detect import fill_from_identical, fill_from_siblings, find_mixed_cudnn

    filled = fill_from_identical(
        [(lib.ref.path, lib.digests.sha256, lib.ident) for lib in libraries]
    )
    filled = fill_from_siblings(
        [(lib.ref.path, ident) for lib, ident in zip(libraries, filled, strict=True)]
    )
    libraries = [
        lib if ident is lib.ident else replace(lib, ident=ident)
        for lib, ident in zip(libraries, filled, strict=True)
    ]
    findings = list(find_mixed_cudnn([(lib.ref.path, lib.ident) for lib in libraries]))
    mixed_paths = {p for fnd in findings for p in fnd.paths}
    if mixed_paths:
        libraries = [
            _with_note(lib, "mixed-cudnn") if lib.ref.path in mixed_paths else lib
            for lib in libraries
        ]
    return libraries, findings


def _integrity_findings(libraries: Sequence[GpuLibrary]) -> list[Finding]:
    findings = []
    for kind in (Integrity.MODIFIED, Integrity.UNOWNED, Integrity.NO_RECORD):
        hits = tuple(lib.ref.path for lib in libraries if lib.integrity is kind)
        if hits:
            findings.append(
                Finding(
                    FindingKind(kind.value),
                    f"{len(hits)} GPU librar{'y' if len(hits) == 1 else 'ies'} {kind.value}",
                    hits,
                )
            )
    return findings


def _verify(
    source: Source,
    view: RootView,
    inputs: TrustInputs,
    policy: TrustPolicy,
    catalogs: Sequence[VerifiedCatalog],
    libraries: list[GpuLibrary],
) -> tuple[list[GpuLibrary], ImageTrust | None]:
    """Verify stage: provenance against the signed catalogs; an image's signatures."""
    from scanner.verify.scan_trust import apply_provenance

    if catalogs:
        libraries = apply_provenance(libraries, catalogs)
    image_trust = None
    if view.info.kind is AssetKind.IMAGE:
        image_trust = _image_trust(source, view, inputs, policy)
    return libraries, image_trust


def _trust_findings(
    libraries: Sequence[GpuLibrary],
    catalogs: Sequence[VerifiedCatalog],
    image_trust: ImageTrust | None,
) -> list[Finding]:
    findings = []
    hits = tuple(lib.ref.path for lib in libraries if lib.provenance == Provenance.CONFLICT)
    if catalogs and hits:
        findings.append(
            Finding(FindingKind.CONFLICT, f"{len(hits)} file(s) contradict a signed catalog", hits)
        )
    if image_trust is not None and not image_trust.signed:
        rejected = "; ".join(image_trust.rejected) or "image not signed"
        findings.append(Finding(FindingKind.UNSIGNED, rejected))
    return findings


def _limits(options: ScanOptions) -> Limits:
    """The scan's `Limits`: the defaults, with what the options override; UsageError if bad."""
    from scanner.source import Limits

    overrides: dict[str, float | int] = {}
    if options.max_ratio is not None:
        overrides["max_ratio"] = options.max_ratio
    if options.max_total_bytes is not None:
        overrides["max_image_bytes"] = options.max_total_bytes
    if options.max_layer_bytes is not None:
        overrides["max_layer_bytes"] = options.max_layer_bytes
    try:
        return Limits(**overrides)  # type: ignore[arg-type]
    except ValueError as e:
        raise UsageError(f"{e} (--max-ratio, --max-size and --max-layer-size must be > 0)") from e


def _stage(options: ScanOptions, stage: ProgressStage, candidates: int) -> None:
    """Tell the progress display that a stage without counts of its own has started."""
    if options.progress is not None:
        options.progress(Progress(stage, candidates=candidates))


def _load_trust(inputs: TrustInputs) -> tuple[TrustPolicy | None, list[VerifiedCatalog]]:
    if not inputs.wanted:
        return None, []
    from scanner.verify.scan_trust import load_catalogs, load_policy

    policy = load_policy(inputs)
    if policy is None:
        return None, []
    return policy, load_catalogs(inputs, policy)


def _image_trust(
    source: Source, view: RootView, inputs: TrustInputs, policy: TrustPolicy
) -> ImageTrust:
    """Signatures from the registry (when the image came from one) and local files."""
    from scanner.imageref import split_name
    from scanner.verify.cosign import CosignLayer
    from scanner.verify.scan_trust import image_trust, layer_from_file

    layers = [("*", layer_from_file(p)) for p in inputs.attestations]
    digests = source.digests
    for sl in source.signature_material():
        layers.append((sl.subject, CosignLayer(sl.media_type, sl.data, sl.annotations, sl.digest)))
    if not digests and view.info.digest:
        digests = (view.info.digest,)
    repository = split_name(view.info.name)[0]
    return image_trust(repository, digests, layers, policy)


def _named(cand: Candidate) -> str:
    """The candidate's path, with the aliases that made it one."""
    if not cand.aliases:
        return cand.ref.path
    return f"{cand.ref.path} (as {', '.join(cand.aliases)})"


def _integrity_kinds(
    digests: Digests | None, owner: Package | None, record: OwnedFile | None
) -> tuple[tuple[FindingKind, ...], str]:
    """The integrity ``--fail-on`` kinds a file that is no library still matches, and why.

    Fail safe: a file a package recorded a digest for but that could not be read may be
    modified, so it matches ``modified`` as well as its own verdict.
    """
    verdict, reason = integrity_verdict(digests, owner, record)
    kinds = [] if verdict is Integrity.VERIFIED else [FindingKind(verdict.value)]
    if digests is None and record is not None and record.digest:
        kinds.append(FindingKind.MODIFIED)
    return tuple(kinds), f"integrity {verdict.value}: {reason}"


def _not_elf(
    cand: Candidate, facts: FileFacts, owner: Package | None, record: OwnedFile | None
) -> Finding:
    also, integrity = _integrity_kinds(facts.digests, owner, record)
    return Finding(
        FindingKind.NOT_ELF,
        f"{_named(cand)} is named like a GPU library but is no ELF shared library "
        f"({facts.error}); sha256 {facts.digests.sha256}; {integrity}",
        (cand.ref.path, *cand.aliases),
        also,
    )


def _unreadable(
    cand: Candidate, reason: str, owner: Package | None, record: OwnedFile | None
) -> Finding:
    also, integrity = _integrity_kinds(None, owner, record)
    return Finding(
        FindingKind.UNREADABLE,
        f"{_named(cand)} is named like a GPU library but could not be read ({reason}); "
        f"its digest and identity are unknown; {integrity}",
        (cand.ref.path, *cand.aliases),
        also,
    )


def _with_note(lib: GpuLibrary, note: str) -> GpuLibrary:
    return replace(lib, notes=(*lib.notes, note))
