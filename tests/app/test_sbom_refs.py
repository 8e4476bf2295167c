"""The bom-refs of the normalized SBOM (app/domain/inventory/sbom.py): what a report stored (a
purl, valid or not) never takes a reference the encoder invents (the asset's, a package's
without a purl, a file's), two rows of one purl are two components, and the same rows are the
same bytes."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect

from app.domain.inventory import sbom
from app.storage.tables import Artifact, Asset, Package, Scan
from tests.app import boms
from tests.app.conftest import Service, auth

ASSET_ID = 3
SHA = "c" * 64


def _asset() -> Asset:
    return Asset(
        id=ASSET_ID,
        kind="image",
        name="registry.example.com/ml/refs:1",
        labels={},
        details={"digest": "sha256:" + "a" * 64},
    )


def _scan() -> Scan:
    return Scan(
        id=11,
        content_sha256="b" * 64,
        scanned_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        tool="gpuprov 0.1.0",
        signature_rejected=[],
    )


def _package(
    id: int, purl: str | None, name: str = "torch", version: str | None = "2.0"
) -> Package:
    return Package(id=id, purl=purl, name=name, version=version)


def _file(
    name: str,
    path: str | None,
    owner: str | None = None,
    loaded_copy: bool = False,
    sha256: str | None = SHA,
) -> Artifact:
    return Artifact(
        kind="file",
        name=name,
        path=path,
        family="cudnn",
        sha256=sha256,
        provenance="unknown",
        owner_purl=owner,
        aliases=[],
        notes=[],
        loaded_processes=1 if loaded_copy else 0,
        loaded_containers=0,
        loaded_copy=loaded_copy,
        loaded_deleted=False,
        loaded_by=[],
    )


def _doc(packages: list[Package], files: list[Artifact]) -> dict[str, Any]:
    """The document of these rows, encoded twice from fresh objects: the same bytes."""
    first = sbom.encode_normalized(_asset(), _scan(), packages, files)
    again = sbom.encode_normalized(_asset(), _scan(), _copies(packages), _copies(files))
    assert first == again, "the same rows, other bytes"
    doc: dict[str, Any] = json.loads(first)
    return doc


def _copies(rows: list[Any]) -> list[Any]:
    """Fresh rows of the same columns."""
    return [
        type(r)(**{a.key: getattr(r, a.key) for a in inspect(type(r)).column_attrs}) for r in rows
    ]


def _refs(doc: dict[str, Any]) -> list[str]:
    return [
        doc["metadata"]["component"]["bom-ref"],
        *(c["bom-ref"] for c in doc.get("components", [])),
    ]


def _by_kind(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c for c in doc.get("components", []) if c["type"] == kind]


def _path(component: dict[str, Any]) -> str | None:
    for p in component.get("properties", []):
        if p["name"] == "gpuprov:file:path":
            return str(p["value"])
    return None


def _depends_on(doc: dict[str, Any], ref: str) -> list[str]:
    (entry,) = [d for d in doc["dependencies"] if d["ref"] == ref]
    return list(entry.get("dependsOn", []))


def _check_graph(doc: dict[str, Any]) -> None:
    """Every reference is unique and one of the library's own (none random), and the
    dependencies name each component once and point only at components of the document."""
    refs = _refs(doc)
    assert len(refs) == len(set(refs)), Counter(r for r in refs if refs.count(r) > 1)
    assert not [r for r in refs if r.startswith("BomRef")]
    top = [d["ref"] for d in doc["dependencies"]]
    assert sorted(top) == sorted(refs)
    for entry in doc["dependencies"]:
        assert set(entry.get("dependsOn", [])) <= set(refs)
    # each component under exactly one other: a file under its package or the asset
    parents = Counter(r for e in doc["dependencies"] for r in e.get("dependsOn", []))
    assert parents == Counter(refs[1:])
    # the invented namespaces: packages never take a file's or the asset's
    for c in _by_kind(doc, "file"):
        assert c["bom-ref"].startswith(("file:", "loaded:"))
    for c in _by_kind(doc, "library"):
        assert not c["bom-ref"].startswith(("asset:", "file:", "loaded:"))


def test_a_purl_spelled_like_the_assets_reference_is_not_the_asset() -> None:
    doc = _doc(
        [_package(1, f"asset:{ASSET_ID}")], [_file("libcudnn.so.9", "/usr/lib/libcudnn.so.9")]
    )
    _check_graph(doc)
    assert doc["metadata"]["component"]["bom-ref"] == f"asset:{ASSET_ID}"
    (library,) = _by_kind(doc, "library")
    assert library["bom-ref"] == f"purl:asset:{ASSET_ID}"
    assert set(_depends_on(doc, f"asset:{ASSET_ID}")) == {
        f"purl:asset:{ASSET_ID}",
        "file:/usr/lib/libcudnn.so.9",
    }


def test_a_purl_spelled_like_a_package_reference_drops_no_package() -> None:
    # row 2 has no purl (its reference is package:2); row 1's purl is spelled the same
    doc = _doc([_package(1, "package:2", name="a"), _package(2, None, name="b")], [])
    _check_graph(doc)
    refs = {c["name"]: c["bom-ref"] for c in _by_kind(doc, "library")}
    assert refs == {"a": "purl:package:2", "b": "package:2"}
    # ... and a file whose owner purl is spelled so belongs to the purl, not to row 2
    owned = _doc(
        [_package(1, "package:2", name="a"), _package(2, None, name="b")],
        [_file("libx.so", "/x/libx.so", owner="package:2")],
    )
    assert _depends_on(owned, "purl:package:2") == ["file:/x/libx.so"]
    assert _depends_on(owned, "package:2") == []


def test_a_purl_spelled_like_a_files_reference_leaves_the_file_its_own() -> None:
    files = [
        _file("libcudnn.so.9", "/usr/lib/libcudnn.so.9"),
        _file("libcudnn.so.9", "/usr/lib/libcudnn.so.9", loaded_copy=True),
    ]
    alone = _doc([], files)
    clash = _doc(
        [
            _package(1, "file:/usr/lib/libcudnn.so.9"),
            _package(2, f"loaded:{SHA}:/usr/lib/libcudnn.so.9"),
            _package(3, "file:/usr/lib/libcudnn.so.9#"),
        ],
        files,
    )
    _check_graph(clash)
    # the files keep the references they have without those packages
    assert (
        {c["bom-ref"] for c in _by_kind(clash, "file")}
        == {c["bom-ref"] for c in _by_kind(alone, "file")}
        == {"file:/usr/lib/libcudnn.so.9", f"loaded:{SHA}:/usr/lib/libcudnn.so.9"}
    )
    assert sorted(c["bom-ref"] for c in _by_kind(clash, "library")) == [
        "purl:file:/usr/lib/libcudnn.so.9",
        "purl:file:/usr/lib/libcudnn.so.9#",
        f"purl:loaded:{SHA}:/usr/lib/libcudnn.so.9",
    ]


def test_two_rows_of_one_purl_are_two_components() -> None:
    purl = "pkg:pypi/nvidia-cudnn-cu12@9.1.0"
    doc = _doc(
        [
            _package(7, purl, name="nvidia-cudnn-cu12", version="9.1.0"),
            _package(8, None, name="other", version=None),
            _package(9, purl, name="nvidia-cudnn-cu12", version="9.1.0"),
        ],
        [_file("libcudnn.so.9", "/usr/lib/libcudnn.so.9", owner=purl)],
    )
    _check_graph(doc)
    libraries = _by_kind(doc, "library")
    assert len(libraries) == 3
    assert sorted(c["bom-ref"] for c in libraries) == sorted([purl, "package:8", "package:9"])
    assert [c.get("purl") for c in libraries if c["name"] == "nvidia-cudnn-cu12"] == [purl] * 2
    # the file goes under the first row of its owner's purl
    assert _depends_on(doc, purl) == ["file:/usr/lib/libcudnn.so.9"]
    assert _depends_on(doc, "package:9") == []


def test_stored_refs_are_never_invented_ones_and_never_shared() -> None:
    values = ["pkg:pypi/a@1", "not a purl", "purl:x", "purl:purl:x", "x", "asset:1", "file:/a"]
    escaped = [sbom.stored_ref(v) for v in values]
    assert len(set(escaped)) == len(values)
    assert escaped[:2] == values[:2]  # what other tools write, as before
    assert not [r for r in escaped if r.startswith(sbom.INVENTED)]


# -------------------------------------------------------------------- property

_PATHS = ["/a", "/a#", "/a##", "/usr/lib/libx.so", None]
_NAMES = ["libx.so", "torch", "Torch", "ünï"]
_IDS = list(range(1, 7))


@st.composite
def _invented(draw: st.DrawFn) -> str:
    """A value shaped like a reference the encoder invents (or escapes), or a plain purl."""
    path = draw(st.sampled_from([p for p in _PATHS if p] + _NAMES))
    return draw(
        st.sampled_from(
            [
                f"asset:{ASSET_ID}",
                f"asset:{ASSET_ID + 1}",
                *(f"package:{i}" for i in _IDS),
                f"file:{path}",
                f"file:{path}#",
                f"loaded:{SHA}:{path}",
                f"loaded:None:{path}",
                f"purl:file:{path}",
                f"purl:package:{_IDS[0]}",
                "pkg:pypi/torch@2.0",
                "pkg:pypi/torch",
                "not a purl",
            ]
        )
    )


_purls = st.none() | st.just("") | _invented()


@st.composite
def _scans(draw: st.DrawFn) -> tuple[list[Package], list[Artifact]]:
    ids = draw(st.lists(st.sampled_from(_IDS), unique=True, max_size=len(_IDS)))
    packages = [
        _package(
            i,
            draw(_purls),
            name=draw(st.sampled_from(_NAMES)),
            version=draw(st.sampled_from([None, "1.0", "2.0"])),
        )
        for i in sorted(ids)
    ]
    files = [
        _file(
            draw(st.sampled_from(_NAMES)),
            draw(st.sampled_from(_PATHS)),
            owner=draw(_purls),
            loaded_copy=draw(st.booleans()),
            sha256=draw(st.sampled_from([SHA, None])),
        )
        for _ in range(draw(st.integers(0, 8)))
    ]
    return packages, files


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scans())
def test_any_rows_are_one_deterministic_document_of_every_row(
    rows: tuple[list[Package], list[Artifact]],
) -> None:
    packages, files = rows
    doc = _doc(packages, files)  # encoded twice: the same bytes
    _check_graph(doc)
    assert Counter((c["name"], c.get("version")) for c in _by_kind(doc, "library")) == Counter(
        (p.name, p.version or None) for p in packages
    )
    assert Counter((c["name"], _path(c)) for c in _by_kind(doc, "file")) == Counter(
        (f.name, f.path) for f in files
    )
    # a file whose owner purl is a stored package's sits under that package, else under the asset
    stored = {p.purl for p in packages if p.purl}
    under_asset = set(_depends_on(doc, f"asset:{ASSET_ID}"))
    assert len([c for c in _by_kind(doc, "file") if c["bom-ref"] in under_asset]) == len(
        [f for f in files if f.owner_purl not in stored]
    )


# -------------------------------------------------------------------- through the service


def test_a_report_cannot_take_the_assets_reference(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """A report whose owner package's purl is spelled ``asset:<id>`` (and a file's owner
    ``package:<id>``): the document asked twice, encoded afresh each time, is the same bytes."""
    first = post_report(boms.encode(boms.gpuprov_bom(serial=uuid.UUID(int=1).urn)))
    assert first.status_code == 201, first.text
    asset = first.json()["asset_id"]
    wheel = boms.cudnn_wheel()
    evil = f"asset:{asset}"
    libs = [replace(lib, owner_purl=evil) for lib in wheel.libs]
    libs[-1] = replace(libs[-1], owner_purl="package:1")
    report = boms.gpuprov_bom(
        serial=uuid.UUID(int=2).urn, owners=[boms.Owner(evil, "evil", "1", libs)]
    )
    second = post_report(boms.encode(report))
    assert second.status_code == 201, second.text
    assert second.json()["asset_id"] == asset
    reader = service.token("inventory:read")
    docs = []
    for _ in range(2):
        sbom.KEPT.clear()
        answer = service.client.get(
            f"/api/v1/assets/{asset}/sbom", params={"format": "normalized"}, headers=auth(reader)
        )
        assert answer.status_code == 200, answer.text
        docs.append(answer.text)
    assert docs[0] == docs[1]
    doc = json.loads(docs[0])
    _check_graph(doc)
    assert doc["metadata"]["component"]["bom-ref"] == evil
    (package,) = _by_kind(doc, "library")
    assert package["bom-ref"] == "purl:" + evil
    assert len(_depends_on(doc, "purl:" + evil)) == len(libs) - 1
    assert len(_by_kind(doc, "file")) == len(libs)
