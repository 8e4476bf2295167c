"""Facts shown together come from one file (issue 18 §1): on both backends, a fleet whose files
have their smallest path, family and version in different files, and each multi-column summary
(the overview's most urgent findings, read from the domain and from the page; drift's digest
conflicts) read back against the files the API lists for the asset it names."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from app.clock import utcnow
from app.domain.dashboard import overview
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.pages import login
from tests.app.test_gate_api import POLICY, put_policy

IMAGE = "registry.example.com/ml/pairs:1.0"
HOST = "gpu-node-pairs"


def _lib(
    path: str, family: str, version: str, integrity: str = "verified", provenance: str = "unknown"
) -> boms.Lib:
    return boms.Lib(path, family, family, version, integrity=integrity, provenance=provenance)


#: per asset, files of one finding kind whose smallest path, family and version are three
#: different files: separate MIN()s would pair the first path with another file's library
_FILES = {
    IMAGE: [
        # modified: the first path is cuDNN 9; the smallest family (cublasLt) and version
        # (12.4.5.8) are the other files'
        _lib("/a/libcudnn_cnn.so.9.1.0", "cudnn", "9.1.0.70", integrity="modified"),
        _lib("/b/libcublasLt.so.12", "cublasLt", "12.4.5.8", integrity="modified"),
        _lib("/c/libcufft.so.11", "cufft", "11.2.1.3", integrity="modified"),
        # unowned: the first path is NCCL; cublas and 10.3.5.147 come later
        _lib("/d/libnccl.so.2", "nccl", "2.21.5", integrity="unowned"),
        _lib("/e/libcublas.so.10", "cublas", "10.3.5.147", integrity="unowned"),
    ],
    HOST: [
        # a provenance conflict: the first path is the CUDA runtime 12.4.127
        _lib("/opt/x/libcudart.so.12", "cudart", "12.4.127", provenance="conflict"),
        _lib("/opt/y/libcublas.so.12", "cublas", "10.3.5.147", provenance="conflict"),
    ],
}


def _fleet(post_report: Callable[..., Any]) -> dict[str, int]:
    ids = {}
    for name, kind in ((IMAGE, "image"), (HOST, "host")):
        bom = boms.gpuprov_bom(kind=kind, name=name, owners=[], extra_libs=_FILES[name])
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        ids[name] = answer.json()["asset_id"]
    return ids


def _files(service: Service, asset_id: int) -> dict[str, tuple[str, str]]:
    """(family, version) of each file the API lists for the asset, by path."""
    answer = service.client.get(
        f"/api/v1/assets/{asset_id}", headers=auth(service.token("inventory:read"))
    )
    assert answer.status_code == 200, answer.text
    return {lib["path"]: (lib["family"], lib["version"]) for lib in answer.json()["libraries"]}


def test_each_urgent_finding_names_one_file(
    service: Service, post_report: Callable[..., Any]
) -> None:
    ids = _fleet(post_report)
    with service.db.session() as session:
        urgent = overview(session, utcnow())["urgent"]
    shown = {(f["finding"], f["asset"]["id"]): f for f in urgent}
    assert set(shown) == {
        ("provenance conflict", ids[HOST]),
        ("modified", ids[IMAGE]),
        ("unowned", ids[IMAGE]),
    }
    for (_, asset_id), finding in shown.items():
        files = _files(service, asset_id)
        path = finding["example_path"]
        assert files[path] == (finding["family"], finding["version"]), finding
    # the example is the first path of the finding's files, with that file's library
    assert shown["modified", ids[IMAGE]]["example_path"] == "/a/libcudnn_cnn.so.9.1.0"
    assert shown["unowned", ids[IMAGE]]["version"] == "2.21.5"
    assert shown["provenance conflict", ids[HOST]]["family"] == "cudart"


_ROW = re.compile(
    r'<td><a href="/assets/(\d+)">[^<]*</a>.*?</td>\s*<td class="num">\d+</td>\s*'
    r'<td class="path mono">([^<]*)</td>\s*<td>([^<]*)</td>',
    re.S,
)


def test_the_overview_page_pairs_each_path_with_its_library(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """The page as a person reads it: each row's path and library, against the API's files."""
    _fleet(post_report)
    service.client.cookies.clear()
    assert login(service.client, service.token("inventory:read")).status_code == 303
    page = service.client.get("/").text.replace("<wbr>", "")  # without break hints
    service.client.cookies.clear()
    section = page.split("Most urgent findings", 1)[1]
    rows = _ROW.findall(section)
    assert len(rows) == 3, section[:2000]
    for asset_id, path, library in rows:
        family, version = _files(service, int(asset_id))[html.unescape(path)]
        assert library.split() == [family, version], (path, library)


def test_each_drift_digest_names_a_file_with_that_digest(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Drift's digest conflicts: each digest's example path is a file of that library with
    that digest (the smallest path of the group has the other digest)."""
    placed = {
        name: boms.Lib(path, "cudnn", "cudnn", "9.1.0.70", sha256=boms.digest_of(name))
        for name, path in (("first", "/z/libcudnn.so.9"), ("second", "/a/libcudnn.so.9"))
    }
    ids = {}
    for name, lib in placed.items():
        bom = boms.gpuprov_bom(name=f"registry.example.com/{name}:1", owners=[], extra_libs=[lib])
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        ids[answer.json()["asset_id"]] = lib
    answer = service.client.get(
        "/api/v1/drift?family=cudnn", headers=auth(service.token("inventory:read"))
    )
    assert answer.status_code == 200, answer.text
    (group,) = answer.json()["digest_conflicts"]
    by_digest = {d["sha256"]: d["example_path"] for d in group["digests"]}
    assert by_digest == {lib.sha256: lib.path for lib in placed.values()}


def test_where_used_and_the_compliance_drill_down_name_files_as_the_api_lists_them(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Where-used's rows and the compliance drill-down's failing files: each path with the
    family, version and verdict of that file, on the same fleet."""
    ids = _fleet(post_report)
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    used = service.client.get("/api/v1/where-used?verdict=modified", headers=reader)
    assert used.status_code == 200, used.text
    (item,) = used.json()["items"]
    assert item["asset"]["id"] == ids[IMAGE]
    files = _files(service, ids[IMAGE])
    rows = {(f["path"], f["family"], f["version"]) for f in item["libraries"]}
    assert rows == {(p, *files[p]) for p in files if p < "/d"}  # the three modified files
    drill = service.client.get("/api/v1/compliance/controls/CIS-2.5?policy=prod", headers=reader)
    assert drill.status_code == 200, drill.text
    (failing,) = drill.json()["items"]
    assert failing["asset"]["id"] == ids[IMAGE]
    (reason,) = [r for r in failing["reasons"] if r["rule"] == "integrity"]
    shown = {f["path"]: f for f in reason["files"]}
    assert sorted(shown) == sorted(p for p in files if p < "/d")
    for path, fact in shown.items():
        assert (fact["family"], fact["version"]) == files[path], fact
