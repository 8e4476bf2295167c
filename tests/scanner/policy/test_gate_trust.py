"""`gpuprov gate` on a real OCI layout with cosign-format attestations and on signed catalogs:
unsigned image, wrong signer, SLSA level too low, allowed; provenance verified / conflict.

The trust inputs are the scan's own options (--trust, --attestation, --catalog, --trust-key),
passed through the gate untouched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.fixtures import cosign as cs
from tests.fixtures import elf, keys
from tests.fixtures.images import Image, Layer, file, write_oci_layout
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore

BUILDER = (
    "https://git.example.test/slsa/builder/.github/workflows/generator_container_slsa3.yml"
    "@refs/tags/v2.1.0"
)
LOCAL_BUILDER = "https://ci.acme.test/runners/local@v1"
SOURCE = "https://git.example.test/acme/ml"
NAME = "registry.acme.test/ml/train"
HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: release\n"
RELEASE = HEAD + "rules:\n  image_signature: {signers: [ci]}\n  slsa: {min_level: 2}\n"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "gpuprov-cache"))


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


def run(app: typer.Typer, *args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("gate-trust")
    instance = PrivateSigstore()
    (base / "root.json").write_bytes(instance.trusted_root_json())
    release = keys.generate("ecdsa")
    keys.write_keypair(base, "release", release)
    (base / "trust.yaml").write_text(
        f"""\
version: 1
roots:
  - path: root.json
    name: acme-private
signers:
  - name: release-key
    key: release.pub
    images: ["{NAME}*"]
  - name: ci
    issuer: {ISSUER}
    subject: {SUBJECT}
    images: ["{NAME}*"]
slsa:
  builders:
    - id: {BUILDER}
      level: 3
      signers: [ci]
    - id_regex: 'https://ci\\.acme\\.test/runners/local@.*'
      level: 1
"""
    )
    graph = elf.build_cudnn_library(base / "libs", "cudnn_graph")
    image = Image(
        [Layer([file("usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0", graph.read_bytes())])]
    )
    built = write_oci_layout(
        base / "layout", image, "v1", annotations={"v1": {"io.containerd.image.name": f"{NAME}:v1"}}
    )
    digest = built.manifest_digest
    docs = {
        "sign": instance.sign_dsse(cs.cosign_sign_statement(digest)),
        "provenance": instance.sign_dsse(cs.slsa_provenance(digest, BUILDER, SOURCE)),
        "local-provenance": instance.sign_dsse(cs.slsa_provenance(digest, LOCAL_BUILDER, SOURCE)),
        "key-sign": instance.key_bundle(release, payload=cs.cosign_sign_statement(digest)),
    }
    files = {}
    for name, doc in docs.items():
        files[name] = base / f"{name}.json"
        files[name].write_text(json.dumps(doc))
    return {
        "target": f"oci:{base / 'layout'}:v1",
        "digest": digest,
        "trust": base / "trust.yaml",
        "files": files,
        "base": base,
    }


def _gate(
    app: typer.Typer, signed: dict[str, Any], tmp_path: Path, *attestations: str
) -> tuple[int, dict[str, Any]]:
    policy = tmp_path / "release.yaml"
    policy.write_text(RELEASE)
    args: list[object] = ["gate", signed["target"], "--policy-file", policy, "-f", "json"]
    args += ["--trust", signed["trust"], "--no-cache"]
    for name in attestations:
        args += ["--attestation", signed["files"][name]]
    code, out, err = run(app, *args)
    assert code in (0, 1), err
    return code, json.loads(out)


def _rules(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rule"]: r for r in doc["rules"]}


def test_signed_image_at_slsa_level_3_is_allowed(
    app: typer.Typer, signed: dict[str, Any], tmp_path: Path
) -> None:
    code, doc = _gate(app, signed, tmp_path, "sign", "provenance")
    assert code == 0 and doc["decision"] == "allow", doc["reasons"]
    assert doc["subject"]["digest"] == signed["digest"]
    assert doc["controls"]["SLSA_BUILD_LEVEL_2"] == "pass"
    assert "SLSA_BUILD_LEVEL_3" not in doc["controls"]  # the policy asks for level 2


def test_unsigned_image_is_denied(app: typer.Typer, signed: dict[str, Any], tmp_path: Path) -> None:
    code, doc = _gate(app, signed, tmp_path)
    assert code == 1 and doc["decision"] == "deny"
    rules = _rules(doc)
    assert rules["image_signature"]["status"] == "fail"
    assert "no signature or attestation found" in rules["image_signature"]["message"]
    assert rules["slsa"]["status"] == "fail"


def test_slsa_level_too_low_is_denied(
    app: typer.Typer, signed: dict[str, Any], tmp_path: Path
) -> None:
    code, doc = _gate(app, signed, tmp_path, "sign", "local-provenance")
    assert code == 1
    rules = _rules(doc)
    assert rules["image_signature"]["status"] == "pass"
    assert rules["slsa"]["status"] == "fail"
    assert "level 1 is below the required 2" in rules["slsa"]["message"]
    assert doc["controls"]["SLSA_BUILD_LEVEL_2"] == "fail"


def test_image_signed_by_another_trusted_signer_is_denied(
    app: typer.Typer, signed: dict[str, Any], tmp_path: Path
) -> None:
    code, doc = _gate(app, signed, tmp_path, "key-sign")
    assert code == 1
    message = _rules(doc)["image_signature"]["message"]
    assert "signed by release-key" in message and "not by ci" in message


@pytest.fixture(scope="module")
def catalog(app: typer.Typer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("gate-catalog")
    root = base / "root"
    lib = root / "opt" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    for component in ("cudnn_graph", "cudnn_ops"):
        elf.build_cudnn_library(lib, component, filename=f"lib{component}.so.9.1.0")
    report = base / "golden.cdx.json"
    assert run(app, "scan", root, "--no-cache", "-f", "cyclonedx", "-o", report)[0] == 0
    unsigned = base / "catalog.json"
    assert run(app, "catalog", "from-scan", report, "-o", unsigned)[0] == 0
    priv, pub = keys.write_keypair(base, "nvidia-catalog", keys.generate("ecdsa"))
    signed_catalog = base / "catalog.dsse.json"
    assert run(app, "catalog", "sign", unsigned, "--key", priv, "-o", signed_catalog)[0] == 0
    return {"root": root, "catalog": signed_catalog, "pub": pub}


def test_provenance_verified_allows_and_conflict_denies(
    app: typer.Typer, catalog: dict[str, Path], tmp_path: Path
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(HEAD + "rules:\n  provenance: {require: verified}\n")
    trust = ["--catalog", catalog["catalog"], "--trust-key", catalog["pub"], "--no-cache"]
    code, out, err = run(app, "gate", catalog["root"], "--policy-file", policy, *trust)
    assert code == 0, out + err
    assert "pass  provenance" in out
    root = tmp_path / "root"
    shutil.copytree(catalog["root"], root, symlinks=True)
    target = root / "opt" / "cudnn" / "lib" / "libcudnn_ops.so.9.1.0"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    code, out, _ = run(app, "gate", root, "--policy-file", policy, *trust, "-f", "json")
    assert code == 1
    (reason,) = json.loads(out)["reasons"]
    assert reason["rule"] == "provenance" and "contradict a signed reference" in reason["message"]
    assert reason["files"][0]["path"] == "/opt/cudnn/lib/libcudnn_ops.so.9.1.0"
