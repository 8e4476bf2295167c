"""Trust policy versions, signed catalog import and the re-evaluation of stored verdicts without a
rescan, image trust facts on scans, and legacy docker-archive identities, on both databases."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from msgspec.structs import replace

from app.domain.provenance import NO_MATCH, NO_TRUSTED_CATALOG
from scanner import vocabulary as v
from scanner.refcatalog.model import Catalog
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, sign_envelope
from tests.app import boms, catalogs
from tests.app.catalogs import YAML, policy_yaml, signed
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.fixtures import keys
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore

GRAPH = f"{boms.SITE}/cudnn/lib/libcudnn_graph.so.9"
CUDART = f"{boms.SITE}/cuda_runtime/lib/libcudart.so.12"
NVIDIA = keys.shared("ecdsa", "nvidia")
OTHER = keys.shared("ed25519", "other")


def golden_cudnn() -> Catalog:
    """A catalog of the cuDNN wheel's eight files, from a golden scan."""
    return catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn 9.1")


def golden_cuda() -> Catalog:
    """A catalog of the CUDA runtime, cuBLAS and NCCL wheels."""
    return catalogs.catalog_from_bom(boms.gpuprov_bom(owners=boms.cuda_wheels()), "cuda 12.4")


def tampered_graph(provenance: str = "unknown") -> boms.Lib:
    """libcudnn_graph of the wheel with other bytes (the wheel's package, its path)."""
    return boms.Lib(
        path=GRAPH,
        family="cudnn",
        component="cudnn_graph",
        version="9.1.0.70",
        sha256="e" * 64,
        provenance=provenance,
        owner_purl="pkg:pypi/nvidia-cudnn-cu12@9.1.0.70",
    )


class Api:
    """The service as an admin and a reader see it."""

    def __init__(self, service: Service, post_report: Callable[..., Any]) -> None:
        self.service = service
        self.client = service.client
        self.post_report = post_report
        self.admin = service.token("admin", name="ops")
        self.reader = service.token("inventory:read")

    def put_policy(self, document: str, token: str | None = None) -> Any:
        headers = auth(token or self.admin, **YAML)
        return self.client.put("/api/v1/trust-policy", content=document, headers=headers)

    def post_catalog(self, raw: bytes, token: str | None = None, **params: Any) -> Any:
        headers = auth(token or self.admin, **JSON_HEADERS)
        return self.client.post("/api/v1/catalogs", content=raw, params=params, headers=headers)

    def report(self, bom: dict[str, Any]) -> int:
        answer = self.post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        return int(answer.json()["asset_id"])

    def get(self, path: str, **params: Any) -> Any:
        answer = self.client.get(path, params=params, headers=auth(self.reader))
        assert answer.status_code == 200, answer.text
        return answer.json()

    def files(self, asset_id: int) -> dict[str, dict[str, Any]]:
        return {lib["path"]: lib for lib in self.get(f"/api/v1/assets/{asset_id}")["libraries"]}


@pytest.fixture
def api(service: Service, post_report: Callable[..., Any]) -> Api:
    return Api(service, post_report)


def test_catalog_import_reevaluates_stored_files_without_a_rescan(api: Api) -> None:
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    clean = api.report(boms.gpuprov_bom(name="registry.example.com/ml/clean:1"))
    wheel = boms.cudnn_wheel()
    wheel.libs = [lib for lib in wheel.libs if "graph" not in lib.path]
    # the agent claims its tampered file is verified: the service's catalogs decide
    tampered = api.report(
        boms.gpuprov_bom(
            name="registry.example.com/ml/tampered:1",
            owners=[wheel],
            extra_libs=[tampered_graph("verified")],
        )
    )
    assert api.files(tampered)[GRAPH]["provenance"] == "verified"  # as reported, for now
    # other bytes whose forged SONAME makes them "NCCL": caught by path within the package
    forged = api.report(
        boms.gpuprov_bom(
            name="registry.example.com/ml/forged:1",
            owners=[wheel],
            extra_libs=[dataclasses.replace(tampered_graph(), family="nccl", component="nccl")],
        )
    )
    assert api.get("/api/v1/assets", verdict="conflict")["total"] == 0
    scans = api.service.count("scan")

    answer = api.post_catalog(signed(golden_cudnn(), NVIDIA))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["created"] and body["active"] and body["entries"] == 8
    assert body["name"] == "cudnn 9.1" and body["signer"].startswith("nvidia (ecdsa-p256 key")
    assert body["format"] == "dsse" and body["imported_by"] == "ops"
    assert body["reevaluation"]["mode"] == "full"

    assert api.service.count("scan") == scans  # nothing was rescanned or re-sent
    files = api.files(clean)
    for path, lib in files.items():
        if lib["family"] == "cudnn":
            assert lib["provenance"] == "verified", path
            assert lib["provenance_catalog"] == "cudnn 9.1"
            assert lib["provenance_signer"] == body["signer"]
        else:  # the catalog says nothing about cuBLAS or NCCL
            assert (lib["provenance"], lib["provenance_reason"]) == ("unknown", NO_MATCH), path
            assert lib["provenance_signer"] is None
    graph = api.files(tampered)[GRAPH]
    assert graph["provenance"] == "conflict" and graph["provenance_catalog"] == "cudnn 9.1"
    assert "this file has sha256:eeee" in graph["provenance_reason"]

    assert api.files(forged)[GRAPH]["provenance"] == "conflict"

    conflicted = api.get("/api/v1/assets", verdict="conflict")
    assert [a["id"] for a in conflicted["items"]] == [tampered, forged]
    used = api.get("/api/v1/where-used", verdict="conflict")
    assert [(i["asset"]["id"], [f["path"] for f in i["libraries"]]) for i in used["items"]] == [
        (tampered, [GRAPH]),
        (forged, [GRAPH]),
    ]
    by_family = api.get("/api/v1/where-used", family="cudnn", verdict="verified")
    assert {i["asset"]["id"] for i in by_family["items"]} == {clean, tampered, forged}
    nccl = api.get("/api/v1/where-used", family="nccl", verdict="conflict")
    assert [i["asset"]["id"] for i in nccl["items"]] == [forged]
    assert api.get("/api/v1/where-used", family="cublas", verdict="conflict")["total"] == 0

    # a report after the import gets the service's verdicts at ingest
    late = api.report(
        boms.gpuprov_bom(
            name="registry.example.com/ml/late:1", owners=[wheel], extra_libs=[tampered_graph()]
        )
    )
    late_files = api.files(late)
    assert late_files[GRAPH]["provenance"] == "conflict"
    assert sum(f["provenance"] == "verified" for f in late_files.values()) == 7
    listed = api.get("/api/v1/catalogs")
    assert listed["total"] == 1
    assert listed["items"][0]["entries"] == 8 and listed["items"][0]["active"]


def test_the_same_catalog_bytes_are_stored_once(api: Api) -> None:
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    raw = signed(golden_cudnn(), NVIDIA)
    first = api.post_catalog(raw)
    again = api.post_catalog(raw, name="renamed")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and again.json()["created"] is False
    assert again.json()["reevaluation"] is None
    assert api.get("/api/v1/catalogs")["total"] == 1


def test_a_second_catalog_is_folded_in_incrementally(api: Api) -> None:
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    asset = api.report(boms.gpuprov_bom())
    first = api.post_catalog(signed(golden_cudnn(), NVIDIA)).json()
    assert first["reevaluation"]["mode"] == "full"
    second = api.post_catalog(signed(golden_cuda(), NVIDIA))
    assert second.status_code == 201, second.text
    reevaluation = second.json()["reevaluation"]
    # only the new catalog's candidates are read: the four CUDA files, not the verified cuDNN
    assert reevaluation == {
        "mode": "incremental",
        "candidates": 4,
        "changed": 4,
        "compliance_pending": False,
    }
    files = api.files(asset)
    assert {f["provenance"] for f in files.values()} == {"verified"}
    assert files[CUDART]["provenance_catalog"] == "cuda 12.4"
    assert files[GRAPH]["provenance_catalog"] == "cudnn 9.1"
    assert [c["name"] for c in api.get("/api/v1/catalogs")["items"]] == ["cudnn 9.1", "cuda 12.4"]


def test_untrusted_catalogs_are_refused_and_nothing_is_stored(api: Api) -> None:
    asset = api.report(boms.gpuprov_bom())
    before = api.files(asset)
    catalog = golden_cudnn()
    answer = api.post_catalog(signed(catalog, NVIDIA))
    assert answer.status_code == 409 and "PUT /api/v1/trust-policy" in answer.text
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    for raw, reason in (
        (signed(catalog, OTHER), "no DSSE signature verifies with a trusted key"),
        (catalog.to_bytes(), "is not signed"),
        (b"[1, 2]", "is not a JSON object"),
        (b"{", "is not JSON"),
    ):
        answer = api.post_catalog(raw)
        assert answer.status_code == 422, answer.text
        message = answer.json()["error"]["message"]
        assert message.startswith("catalog rejected:") and reason in message
    tampered = json.loads(signed(catalog, NVIDIA))
    tampered["payload"] = tampered["payload"][:-8] + "AAAAAAA="
    assert api.post_catalog(json.dumps(tampered).encode()).status_code == 422
    # a trusted signer outside its scope vouches for nothing
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA), families=["nccl"])).status_code == 201
    answer = api.post_catalog(signed(catalog, NVIDIA))
    assert answer.status_code == 422 and "may vouch for none of its 8" in answer.text
    assert api.get("/api/v1/catalogs")["total"] == 0
    assert api.service.count("reference_catalog") == api.service.count("catalog_entry") == 0
    assert api.files(asset) == before
    headers = auth(api.admin, **{"Content-Type": "text/plain"})
    answer = api.client.post("/api/v1/catalogs", content=b"{}", headers=headers)
    assert answer.status_code == 415


def test_policy_changes_reverify_stored_catalogs(api: Api) -> None:
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    asset = api.report(boms.gpuprov_bom())
    assert api.post_catalog(signed(golden_cudnn(), NVIDIA)).status_code == 201
    assert api.post_catalog(signed(golden_cuda(), NVIDIA)).status_code == 201

    # narrower scope: the signer may now vouch for the CUDA runtime only
    answer = api.put_policy(policy_yaml(("nvidia", NVIDIA), families=["cudart"]))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["version"] == 2 and body["reevaluation"]["mode"] == "full"
    assert [(c["entries"], c["out_of_scope"], c["active"]) for c in body["catalogs"]] == [
        (0, 8, True),
        (1, 3, True),
    ]
    files = api.files(asset)
    assert files[CUDART]["provenance"] == "verified"
    assert files[GRAPH]["provenance"] == "unknown"

    # the signer is no longer trusted at all: both catalogs stop counting
    body = api.put_policy(policy_yaml(("other", OTHER))).json()
    assert [c["active"] for c in body["catalogs"]] == [False, False]
    assert "no DSSE signature verifies" in body["catalogs"][0]["rejected_reason"]
    files = api.files(asset)
    assert {(f["provenance"], f["provenance_reason"]) for f in files.values()} == {
        ("unknown", NO_TRUSTED_CATALOG)
    }
    assert api.get("/api/v1/catalogs")["items"][0]["policy_version"] == 3
    # a catalog the new signer vouches for is the only trusted one: a full pass
    cuda = api.post_catalog(signed(golden_cuda(), OTHER)).json()
    assert cuda["reevaluation"]["mode"] == "full" and cuda["active"]
    files = api.files(asset)
    assert files[CUDART]["provenance_signer"].startswith("other (ed25519")
    assert (files[GRAPH]["provenance"], files[GRAPH]["provenance_reason"]) == ("unknown", NO_MATCH)

    # trusted again: verdicts come back, still without a rescan
    body = api.put_policy(policy_yaml(("nvidia", NVIDIA))).json()
    assert [c["active"] for c in body["catalogs"]] == [True, True, False]
    files = api.files(asset)
    assert {f["provenance"] for f in files.values()} == {"verified"}
    assert files[CUDART]["provenance_signer"].startswith("nvidia (ecdsa")
    # the same policy again changes nothing
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).json()["reevaluation"] is None


def test_policy_versions_and_history(api: Api) -> None:
    assert api.client.get("/api/v1/trust-policy", headers=auth(api.admin)).status_code == 404
    first = policy_yaml(("nvidia", NVIDIA))
    second = policy_yaml(("nvidia", NVIDIA), ("other", OTHER))
    assert api.put_policy(first).json()["version"] == 1
    created = api.put_policy(second).json()
    assert created["version"] == 2 and created["created_by"] == "ops"
    assert created["signers"][1].startswith("other (ed25519 key sha256:")
    current = api.client.get("/api/v1/trust-policy", headers=auth(api.admin)).json()
    assert current["version"] == 2 and current["document"] == second
    history = api.client.get("/api/v1/trust-policy/history", headers=auth(api.admin)).json()
    assert [(p["version"], p["document"]) for p in history["items"]] == [(2, second), (1, first)]
    assert history["total"] == 2


PEM_LINES = keys.public_pem(NVIDIA).decode().splitlines()


@pytest.mark.parametrize(
    ("document", "status", "fragment"),
    [
        ("signers: [", 422, "is not valid YAML"),
        ("version: 1\nsigners: []\n", 422, "trusts no signer"),
        ("- just\n- a list\n", 422, "policy must be a mapping"),
        ("", 422, "the trust policy is empty"),
        ("version: 2\nsigners: []\n", 422, "unsupported policy version"),
        (
            "signers:\n  - name: n\n    families: ['*']\n    key: keys/n.pub\n",
            422,
            "inline it as key_pem",
        ),
        (
            "roots:\n  - path: roots/acme.json\nsigners:\n  - name: n\n    families: ['*']\n"
            "    key_pem: |\n" + "".join(f"      {line}\n" for line in PEM_LINES),
            422,
            "give its JSON inline as trusted_root",
        ),
        (
            "signers:\n  - name: n\n    families: ['*']\n    key_pem: not a key\n",
            422,
            "not a PEM public key",
        ),
        (
            "signers:\n  - name: n\n    families: ['*']\n    key_pem: 42\n",
            422,
            "invalid trust policy",
        ),
    ],
)
def test_bad_policies_are_refused(api: Api, document: str, status: int, fragment: str) -> None:
    answer = api.put_policy(document)
    assert answer.status_code == status, answer.text
    assert fragment in answer.json()["error"]["message"]
    assert api.service.count("trust_policy") == 0


def test_policy_needs_admin_and_yaml(api: Api) -> None:
    document = policy_yaml(("nvidia", NVIDIA))
    for scope in ("inventory:read", "report:write", "gate"):
        token = api.service.token(scope)
        assert api.put_policy(document, token).status_code == 403
        assert api.post_catalog(signed(golden_cudnn(), NVIDIA), token).status_code == 403
        assert api.client.get("/api/v1/trust-policy", headers=auth(token)).status_code == 403
    headers = auth(api.admin, **{"Content-Type": "application/x-www-form-urlencoded"})
    answer = api.client.put("/api/v1/trust-policy", content=document, headers=headers)
    assert answer.status_code == 415 and "application/yaml" in answer.text
    assert api.put_policy("x" * (1024 * 1024 + 1)).status_code == 413
    assert api.service.count("trust_policy") == 0


def _with_trust(bom: dict[str, Any], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    bom["metadata"]["component"]["properties"] += [{"name": n, "value": val} for n, val in pairs]
    return bom


BUILDER = "https://github.com/slsa-framework/slsa-github-generator/.github/workflows/x.yml@v2"


def test_image_trust_facts_are_stored_and_filterable(api: Api) -> None:
    attested = api.report(
        _with_trust(
            boms.gpuprov_bom(name="registry.example.com/ml/attested:1"),
            [
                (v.IMAGE_SIGNER, "release-ci (https://ci.example/release)"),
                (v.SLSA_BUILD_LEVEL, "3"),
                (v.SLSA_BUILDER, BUILDER),
                (v.SLSA_SOURCE_REPO, "https://github.com/acme/ml-images"),
                (v.IMAGE_SIGNATURE_REJECTED, "sha256-abc.sig: signed for another image"),
            ],
        )
    )
    signed_only = api.report(
        _with_trust(
            boms.gpuprov_bom(name="registry.example.com/ml/signed:1"),
            [(v.IMAGE_SIGNER, "ngc (ecdsa-p256 key sha256:0123)"), (v.SLSA_BUILD_LEVEL, "1")],
        )
    )
    unsigned = api.report(
        _with_trust(
            boms.gpuprov_bom(name="registry.example.com/ml/unsigned:1"),
            [
                (v.IMAGE_SIGNATURE_REJECTED, "no signature or attestation found for the image"),
                (v.IMAGE_SIGNATURE_REJECTED, "attestation: builder not allowed"),
            ],
        )
    )
    plain = api.report(boms.gpuprov_bom(name="registry.example.com/ml/plain:1"))
    host = api.report(boms.gpuprov_bom(kind="host", name="gpu-node-1"))

    detail = api.get(f"/api/v1/assets/{attested}")
    assert detail["latest_scan"]["image_trust"] == {
        "signed": True,
        "signer": "release-ci (https://ci.example/release)",
        "slsa_level": 3,
        "slsa_builder": BUILDER,
        "slsa_source_repo": "https://github.com/acme/ml-images",
        "signature_rejected": ["sha256-abc.sig: signed for another image"],
    }
    assert detail["history"][0]["image_trust"]["slsa_level"] == 3
    trust = api.get(f"/api/v1/assets/{unsigned}")["latest_scan"]["image_trust"]
    assert trust["signed"] is False and len(trust["signature_rejected"]) == 2
    assert api.get(f"/api/v1/assets/{plain}")["latest_scan"]["image_trust"] is None

    def ids(**params: Any) -> set[int]:
        return {a["id"] for a in api.get("/api/v1/assets", **params)["items"]}

    assert ids(min_slsa_level=2) == {attested}
    assert ids(min_slsa_level=1) == {attested, signed_only}
    assert ids(min_slsa_level=0, family="cudnn") == {attested, signed_only}
    assert ids(signed="true") == {attested, signed_only}
    assert ids(signed="false") == {unsigned, plain, host}
    assert ids(signed="false", kind="image") == {unsigned, plain}
    answer = api.client.get(
        "/api/v1/assets", params={"min_slsa_level": 4}, headers=auth(api.reader)
    )
    assert answer.status_code == 400  # a query parameter: 400, as every one

    normalized = api.get(f"/api/v1/assets/{attested}/sbom", format="normalized")
    props = {p["name"]: p["value"] for p in normalized["metadata"]["component"]["properties"]}
    assert props[v.SLSA_BUILD_LEVEL] == "3" and props[v.SLSA_SOURCE_REPO].endswith("ml-images")


@pytest.mark.parametrize("value", ["4", "high", "-1"])
def test_bad_slsa_level_is_refused(api: Api, value: str) -> None:
    bom = _with_trust(boms.gpuprov_bom(), [(v.SLSA_BUILD_LEVEL, value)])
    answer = api.post_report(boms.encode(bom))
    assert answer.status_code == 422 and v.SLSA_BUILD_LEVEL in answer.text


def _legacy(bom: dict[str, Any], config: str) -> dict[str, Any]:
    """What the scanner writes for a legacy `docker save` archive: no manifest digest at all."""
    component = bom["metadata"]["component"]
    del component["version"], component["purl"]
    component["properties"] = [
        p for p in component["properties"] if p["name"] != v.IMAGE_DIGEST
    ] + [{"name": v.IMAGE_ID, "value": config}]
    return bom


def test_legacy_docker_archive_is_identified_by_its_config_digest(api: Api) -> None:
    config = "sha256:" + boms.digest_of("config", "legacy")
    first = api.report(_legacy(boms.gpuprov_bom(name="legacy/app:1"), config))
    detail = api.get(f"/api/v1/assets/{first}")
    assert detail["identity"] == f"config:{config}" and detail["kind"] == "image"
    assert detail["details"]["config_digest"] == config and "digest" not in detail["details"]
    again = api.report(_legacy(boms.gpuprov_bom(name="legacy/app:1"), config))
    assert again == first and len(api.get(f"/api/v1/assets/{first}")["history"]) == 2
    normalized = api.get(f"/api/v1/assets/{first}/sbom", format="normalized")
    props = {p["name"]: p["value"] for p in normalized["metadata"]["component"]["properties"]}
    assert props[v.IMAGE_ID] == config and v.IMAGE_DIGEST not in props

    bad = _legacy(boms.gpuprov_bom(name="legacy/app:2"), "not-a-digest")
    answer = api.post_report(boms.encode(bad))
    assert answer.status_code == 422 and v.IMAGE_ID in answer.json()["error"]["message"]


def test_reported_provenance_is_kept_until_the_service_holds_catalogs(api: Api) -> None:
    lib = tampered_graph("conflict")
    bom = boms.gpuprov_bom(owners=[], extra_libs=[lib])
    component = next(c for c in bom["components"] if c["type"] == "file")
    component["properties"] += [
        {"name": v.PROVENANCE_SIGNER, "value": "agent-side signer"},
        {"name": v.PROVENANCE_CATALOG, "value": "agent catalog"},
        {"name": v.PROVENANCE_REASON, "value": "catalog agent catalog lists another digest"},
    ]
    asset = api.report(bom)
    stored = api.files(asset)[GRAPH]
    assert (stored["provenance"], stored["provenance_catalog"]) == ("conflict", "agent catalog")
    assert stored["provenance_reason"] == "catalog agent catalog lists another digest"
    normalized = api.get(f"/api/v1/assets/{asset}/sbom", format="normalized")
    file_props = {
        p["name"]: p["value"]
        for c in normalized["components"]
        if c["type"] == "file"
        for p in c["properties"]
    }
    assert file_props[v.PROVENANCE_REASON].startswith("catalog agent catalog")
    for verdict in ("conflict", "modified"):
        assert api.get("/api/v1/assets", verdict=verdict)["total"] == int(verdict == "conflict")
    answer = api.client.get("/api/v1/assets", params={"verdict": "bogus"}, headers=auth(api.reader))
    assert answer.status_code == 400 and "verdict must be one of" in answer.text


def test_keyless_catalog_under_an_inline_private_root(api: Api) -> None:
    instance = PrivateSigstore()
    root = json.dumps(json.loads(instance.trusted_root_json()))
    document = (
        "version: 1\n"
        f"roots:\n  - name: acme\n    trusted_root: '{root}'\n"
        "signers:\n"
        "  - name: release-ci\n"
        f"    issuer: {ISSUER}\n"
        f"    subject: {SUBJECT}\n"
        "    families: ['*']\n"
    )
    answer = api.put_policy(document)
    assert answer.status_code == 201, answer.text
    asset = api.report(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]))
    bundle = json.dumps(instance.sign_dsse(golden_cudnn().to_bytes())).encode()
    imported = api.post_catalog(bundle)
    assert imported.status_code == 201, imported.text
    assert imported.json()["format"] == "sigstore-bundle"
    assert SUBJECT in imported.json()["signer"]
    assert {f["provenance"] for f in api.files(asset).values()} == {"verified"}
    # the same statement signed by another workflow identity is not trusted
    other = instance.sign_dsse(golden_cuda().to_bytes(), subject="https://git.example.test/x")
    refused = api.post_catalog(json.dumps(other).encode())
    assert refused.status_code == 422 and "https://git.example.test/x (issuer" in refused.text
    assert "is not trusted" in refused.text
    assert api.get("/api/v1/catalogs")["total"] == 1


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"version": "9." + "1" * 200}, "version is longer than 128 characters"),
        ({"arch": "x" * 33}, "arch is longer than 32 characters"),
        ({"family": "cudnn\x00evil"}, "family holds a NUL"),
        ({"package": "pkg:pypi/x@\ud800"}, "package holds a NUL or an unpaired surrogate"),
        ({"name": "lib/" + "a" * 300}, "basename is longer than 255 characters"),
    ],
)
def test_signed_catalog_values_the_columns_cannot_hold_are_refused(
    api: Api, change: dict[str, Any], fragment: str
) -> None:
    """A trusted signer vouches for bytes, not for fitting the columns: 422, nothing stored."""
    catalog = golden_cudnn()
    entries = [replace(catalog.entries[0], **change), *catalog.entries[1:]]
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    answer = api.post_catalog(signed(replace(catalog, entries=tuple(entries)), NVIDIA))
    assert answer.status_code == 422, answer.text
    assert fragment in answer.json()["error"]["message"]
    assert api.service.count("reference_catalog") == api.service.count("catalog_entry") == 0


@pytest.mark.parametrize("value", [2**31, 1000, -1, True, "12", 1.5])
def test_a_signed_catalog_number_out_of_its_range_is_refused(api: Api, value: object) -> None:
    """A trusted signer's cudaMajor that is no CUDA major is refused, not dropped: dropped, the
    entry would vouch for its digest under every CUDA major."""
    statement = golden_cudnn().to_statement()
    statement["predicate"]["entries"][0]["cudaMajor"] = value
    # signed as a key holder could, without `gpuprov catalog sign`'s own check of the statement
    envelope = sign_envelope(INTOTO_PAYLOAD_TYPE, json.dumps(statement).encode(), NVIDIA)
    assert api.put_policy(policy_yaml(("nvidia", NVIDIA))).status_code == 201
    answer = api.post_catalog(envelope.to_json().encode())
    assert answer.status_code == 422, answer.text
    assert "cudaMajor must be an integer from 0 to 999" in answer.json()["error"]["message"]
    assert api.service.count("reference_catalog") == api.service.count("catalog_entry") == 0
