"""Asset facts from a scan result built here (scanner/policy/facts.py): every field a rule reads,
the defaults that say "not looked at", the subject of a decision, scan times and the driver.
test_facts_roundtrip.py checks that a scanned world's facts equal those of its BOM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from msgspec.structs import replace

from scanner.model import (
    AssetInfo,
    AssetKind,
    Digests,
    DriverFacts,
    FileRef,
    Finding,
    FindingKind,
    GpuLibrary,
    Identification,
    ImageTrust,
    Integrity,
    L4tFacts,
    LoadedBy,
    NodeFacts,
    Package,
    PackageManager,
    RuntimeScan,
    ScanResult,
    Sha256,
)
from scanner.policy.facts import AssetFacts, FileFact, facts_from_scan, file_fact, parse_time

A, B = Sha256("a" * 64), Sha256("b" * 64)
OWNER = Package(PackageManager.PIP, "nvidia-cublas-cu12", "12.4.5.8", "pkg:pypi/nvidia-cublas-cu12")


def lib(
    path: str, family: str, version: str | None, *loaders: LoadedBy, **kw: object
) -> GpuLibrary:
    return GpuLibrary(
        ref=FileRef(path, kw.pop("layer", None)),
        size=1,
        aliases=(),
        ident=Identification(family, family, version, 12, "x86_64"),
        digests=Digests(1, A),
        owner=kw.pop("owner", None),
        integrity=kw.pop("integrity", Integrity.UNOWNED),
        integrity_reason="why",
        loaded_by=loaders,
        **kw,
    )


def scan(*libraries: GpuLibrary, **kw: object) -> ScanResult:
    return ScanResult(
        asset=kw.pop("asset", AssetInfo(AssetKind.HOST, "node-1", "/", machine_id="m1")),
        libraries=libraries,
        packages=(),
        findings=kw.pop("findings", ()),
        skipped=(),
        started_at=kw.pop("started_at", "2026-12-02T04:00:00Z"),
        tool_version="1.2.3",
        **kw,
    )


def test_a_file_fact_by_default_was_loaded_by_nobody() -> None:
    # what another tool's BOM or the fleet baseline builds: nothing known of processes
    fact = FileFact("/lib/libcudnn.so.9", "cudnn", "cudnn", "9.1.0", 12, None)
    assert (fact.loaded_processes, fact.loaded_containers) == (0, 0)
    assert (fact.loaded_deleted, fact.loaded_copy, fact.disk_sha256) == (False, False, None)
    assert (fact.integrity, fact.provenance, fact.layer, fact.owner) == (None, None, None, None)
    assert fact.summary() == {
        "path": "/lib/libcudnn.so.9",
        "family": "cudnn",
        "version": "9.1.0",
        "sha256": None,
        "layer": None,
    }


def test_the_facts_of_each_library() -> None:
    host = LoadedBy(10, "/usr/bin/python3", sha256=A)
    again = LoadedBy(10, "/usr/bin/python3", sha256=A)  # the same process twice
    inside = LoadedBy(11, "/bin/app", "c" * 64, deleted=True, sha256=A)
    sibling = LoadedBy(12, "/bin/app", "c" * 64, sha256=A)
    other = LoadedBy(13, "/bin/app", "d" * 64, sha256=A)
    result = scan(
        lib(
            "/usr/lib/libcublas.so.12",
            "cublas",
            "12.4.5.8",
            host,
            again,
            inside,
            sibling,
            other,
            owner=OWNER,
            integrity=Integrity.VERIFIED,
            layer="sha256:" + "e" * 64,
            provenance="verified",
            provenance_signer="nvidia (ecdsa)",
            provenance_reason="in catalog x",
            loaded_copy=True,
            disk_sha256=B,
        ),
        lib("/opt/libcudart.so.12", "cudart", None, LoadedBy(20, None, sha256=A)),
        lib("/opt/libnccl.so.2", "nccl", "2.21.5"),
    )
    cublas, cudart, nccl = facts_from_scan(result).files
    assert cublas == FileFact(
        path="/usr/lib/libcublas.so.12",
        family="cublas",
        component="cublas",
        version="12.4.5.8",
        cuda_major=12,
        sha256=A,
        layer="sha256:" + "e" * 64,
        integrity="verified",
        integrity_reason="why",
        provenance="verified",
        provenance_signer="nvidia (ecdsa)",
        provenance_reason="in catalog x",
        owner="pkg:pypi/nvidia-cublas-cu12",
        loaded_processes=4,  # processes, not mappings
        loaded_containers=2,
        loaded_deleted=True,  # one of them maps it deleted
        loaded_copy=True,
        disk_sha256=B,
    )
    assert (cudart.loaded_processes, cudart.loaded_containers, cudart.loaded_deleted) == (
        1,
        0,
        False,
    )
    assert cudart.integrity == "unowned" and cudart.owner is None and cudart.version is None
    assert (nccl.loaded_processes, nccl.loaded_copy) == (0, False)


def test_the_asset_facts_of_a_scan() -> None:
    trust = ImageTrust(True, "ci (ecdsa)", 2, "https://builder", None, 3, ("one refused",))
    image = AssetInfo(
        AssetKind.IMAGE,
        "reg.example/app:1",
        "reg.example/app:1",
        digest="sha256:" + "1" * 64,
        config_digest="sha256:" + "2" * 64,
        labels=(("env", "prod"),),
    )
    findings = (Finding(FindingKind.UNREADABLE, "could not read x", ("/x",)),)
    facts = facts_from_scan(scan(asset=image, image_trust=trust, findings=findings))
    assert (facts.kind, facts.name, facts.digest) == (
        AssetKind.IMAGE,
        "reg.example/app:1",
        "sha256:" + "1" * 64,
    )
    assert facts.scanned_at == datetime(2026, 12, 2, 4, tzinfo=UTC)
    assert facts.labels == (("env", "prod"),) and facts.label("env") == "prod"
    assert facts.label("team") is None
    assert facts.image_trust is not None
    assert (facts.image_trust.signer, facts.image_trust.slsa_level) == ("ci (ecdsa)", 2)
    assert (facts.image_trust.builder, facts.image_trust.rejected) == (
        "https://builder",
        ("one refused",),
    )
    assert facts.findings == (("unreadable", "could not read x"),)
    assert facts.producer == "gpuprov 1.2.3"
    assert (facts.runtime, facts.runtime_unreadable) == (False, ())
    # an image known by its config only, a host by its machine id
    config_only = replace(image, digest=None)
    assert facts_from_scan(scan(asset=config_only)).digest == "sha256:" + "2" * 64
    assert facts_from_scan(scan()).digest == "m1"
    assert facts_from_scan(scan()).image_trust is None  # no trust policy was applied


@pytest.mark.parametrize(
    ("runtime", "unreadable"),
    [
        (RuntimeScan("/proc", 10, 1), ()),
        (RuntimeScan("/proc", 10, 1, (7,)), ("the memory maps of 1 process(es)",)),
        (RuntimeScan("/proc", 10, 1, (), 3), ("the loaded bytes of 3 mapping(s)",)),
        (
            RuntimeScan("/proc", 10, 1, (7, 8), 2),
            ("the memory maps of 2 process(es)", "the loaded bytes of 2 mapping(s)"),
        ),
    ],
)
def test_what_a_runtime_scan_could_not_read(
    runtime: RuntimeScan, unreadable: tuple[str, ...]
) -> None:
    facts = facts_from_scan(scan(runtime=runtime))
    assert facts.runtime and facts.runtime_unreadable == unreadable


def test_the_driver_of_a_host() -> None:
    libs = (
        lib("/usr/lib/libcuda.so.550.54.15", "libcuda", "550.54.15"),
        lib("/usr/lib/libnvidia-ml.so.535.129.03", "nvidia-ml", "535.129.03"),
        lib("/usr/lib/libcudart.so.12", "cudart", "12.4.127"),  # not a driver library
    )
    # no node facts: the lowest version the driver libraries state
    facts = facts_from_scan(scan(*libs))
    assert (facts.driver_version, facts.driver_cuda_max) == ("535.129.03", None)
    assert facts_from_scan(scan(libs[2])).driver_version is None
    # the loaded kernel module is the driver, whatever lies on disk
    node = NodeFacts(driver=DriverFacts("560.35.03", cuda_max="12.6"))
    facts = facts_from_scan(scan(*libs, node=node))
    assert (facts.driver_version, facts.driver_cuda_max) == ("560.35.03", "12.6")
    # a module of unknown version: back to the libraries, with the CUDA it runs
    node = NodeFacts(driver=DriverFacts(None, cuda_max="12.2"))
    assert facts_from_scan(scan(*libs, node=node)).driver_version == "535.129.03"
    # a Jetson's driver is L4T's: its libraries state no desktop driver
    jetson = NodeFacts(l4t=L4tFacts("36.4.0", "/etc/nv_tegra_release"))
    assert facts_from_scan(scan(*libs, node=jetson)).driver_version is None
    assert facts_from_scan(scan(*libs, node=NodeFacts())).driver_version == "535.129.03"


@pytest.mark.parametrize(
    ("text", "when"),
    [
        (None, None),
        ("", None),
        ("yesterday", None),
        ("2026-12-02T04:00:00Z", datetime(2026, 12, 2, 4, tzinfo=UTC)),
        ("2026-12-02T04:00:00", datetime(2026, 12, 2, 4, tzinfo=UTC)),  # naive: UTC
        (
            "2026-12-02T06:00:00+02:00",
            datetime(2026, 12, 2, 6, tzinfo=timezone(timedelta(hours=2))),
        ),
    ],
)
def test_scan_times(text: str | None, when: datetime | None) -> None:
    parsed = parse_time(text)
    assert parsed == when
    if parsed is not None:
        assert parsed.utcoffset() is not None
    assert facts_from_scan(scan(started_at=text or "")).scanned_at == when


def test_the_subject_of_a_decision() -> None:
    facts = AssetFacts(
        AssetKind.IMAGE,
        "reg.example/app:1",
        "sha256:" + "1" * 64,
        datetime(2026, 12, 2, 4, tzinfo=UTC),
        (),
        labels=(("env", "prod"),),
        producer="trivy 0.50",
    )
    assert facts.subject() == {
        "kind": "image",
        "name": "reg.example/app:1",
        "digest": "sha256:" + "1" * 64,
        "scanned_at": "2026-12-02T04:00:00+00:00",
        "labels": {"env": "prod"},
        "producer": "trivy 0.50",
    }
    assert replace(facts, scanned_at=None).subject()["scanned_at"] is None
    assert (facts.runtime, facts.runtime_unreadable, facts.driver_version) == (False, (), None)


def test_facts_are_frozen() -> None:
    # one evaluation's facts are shared by every rule: none may change them for the next
    facts = facts_from_scan(scan(lib("/opt/libnccl.so.2", "nccl", "2.21.5")))
    trust = facts_from_scan(
        scan(
            asset=AssetInfo(AssetKind.IMAGE, "i", "i"),
            image_trust=ImageTrust(True, "ci (x)", None, None, None, 1),
        )
    ).image_trust
    assert trust is not None
    for value, attribute in ((facts, "files"), (facts.files[0], "integrity"), (trust, "signer")):
        with pytest.raises(AttributeError):
            setattr(value, attribute, None)


def _stored(**kw: object) -> SimpleNamespace:
    """A stored row of a GPU library's facts (app.storage), as `file_fact` reads it."""
    row: dict[str, object] = {
        "name": "libcublas.so.12",
        "path": None,
        "family": "cublas",
        "component": None,
        "version": "12.4.5.8",
        "cuda_major": 12,
        "sha256": "a" * 64,
        "layer": None,
        "integrity": None,
        "integrity_reason": None,
        "provenance": None,
        "provenance_signer": None,
        "provenance_reason": None,
        "owner_purl": None,
        "loaded_processes": None,
        "loaded_containers": None,
        "loaded_deleted": None,
        "loaded_copy": None,
        "disk_sha256": None,
    }
    return SimpleNamespace(**{**row, **kw})


def test_a_stored_row_without_its_optional_columns() -> None:
    # another tool's package: no path, no component, no verdicts, nothing loaded
    fact = file_fact(_stored())
    assert (fact.path, fact.component) == ("libcublas.so.12", "cublas")
    assert (fact.integrity_reason, fact.provenance_reason) == ("", "")
    assert (fact.loaded_processes, fact.loaded_containers) == (0, 0)
    assert (fact.loaded_deleted, fact.loaded_copy) == (False, False)


def test_a_stored_row_with_every_column() -> None:
    fact = file_fact(
        _stored(
            path="/usr/lib/libcublas.so.12",
            component="cublasLt",
            integrity="modified",
            integrity_reason="sha256 differs",
            provenance="conflict",
            provenance_signer="n (x)",
            provenance_reason="catalog says b",
            owner_purl="pkg:pypi/nvidia-cublas-cu12@12.4.5.8",
            loaded_processes=3,
            loaded_containers=2,
            loaded_deleted=1,
            loaded_copy=1,
            disk_sha256="b" * 64,
            layer="sha256:" + "c" * 64,
        )
    )
    assert fact == FileFact(
        path="/usr/lib/libcublas.so.12",
        family="cublas",
        component="cublasLt",
        version="12.4.5.8",
        cuda_major=12,
        sha256="a" * 64,
        layer="sha256:" + "c" * 64,
        integrity="modified",
        integrity_reason="sha256 differs",
        provenance="conflict",
        provenance_signer="n (x)",
        provenance_reason="catalog says b",
        owner="pkg:pypi/nvidia-cublas-cu12@12.4.5.8",
        loaded_processes=3,
        loaded_containers=2,
        loaded_deleted=True,
        loaded_copy=True,
        disk_sha256="b" * 64,
    )
