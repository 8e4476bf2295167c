"""CLI: `gpuprov verify`, `gpuprov catalog ...`, `gpuprov trust ...` with their exit codes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from scanner.cli_provenance import register
from tests.fixtures import keys
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore, statement
from tests.fixtures.tuf_repo import TufRepo
from tests.scanner.refcatalog.conftest import make_wheel

ARTIFACT = b"an artifact to verify\n"


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never read or write the user's cache (a refreshed public-good root lives there)."""
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path_factory.mktemp("gpuprov-cache")))


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    cli = typer.Typer()
    register(cli)
    return cli


@pytest.fixture(scope="module")
def instance() -> PrivateSigstore:
    return PrivateSigstore(name="cli-test")


@pytest.fixture
def files(tmp_path: Path, instance: PrivateSigstore) -> dict[str, Path]:
    out = {
        "artifact": tmp_path / "artifact.bin",
        "root": tmp_path / "trusted_root.json",
        "bundle": tmp_path / "artifact.sigstore.json",
        "keybundle": tmp_path / "artifact.key.sigstore.json",
    }
    out["artifact"].write_bytes(ARTIFACT)
    out["root"].write_bytes(instance.trusted_root_json())
    out["bundle"].write_text(json.dumps(instance.sign_blob(ARTIFACT)))
    key = keys.shared("ecdsa", "cli")
    out["key"], out["pub"] = keys.write_keypair(tmp_path / "keys", "signer", key)
    out["keybundle"].write_text(json.dumps(instance.key_bundle(key, data=ARTIFACT)))
    return out


def run(app: typer.Typer, *args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_verify_keyless(app: typer.Typer, files: dict[str, Path]) -> None:
    base = [
        "verify",
        files["artifact"],
        "--bundle",
        files["bundle"],
        "--trusted-root",
        files["root"],
    ]
    code, out, _ = run(
        app, *base, "--certificate-identity", SUBJECT, "--certificate-oidc-issuer", ISSUER
    )
    assert code == 0 and out.startswith("OK: ") and SUBJECT in out
    digest = "sha256:" + hashlib.sha256(ARTIFACT).hexdigest()
    code, out, _ = run(
        app,
        "verify",
        digest,
        *base[2:],
        "--certificate-identity-regexp",
        r"https://git\.example\.test/acme/.*",
        "--certificate-oidc-issuer",
        ISSUER,
    )
    assert code == 0, out
    code, _, err = run(
        app, *base, "--certificate-identity", SUBJECT + "x", "--certificate-oidc-issuer", ISSUER
    )
    assert code == 1 and err.startswith("gpuprov: rejected: ") and "not trusted" in err
    files["artifact"].write_bytes(ARTIFACT + b"!")
    code, _, err = run(
        app, *base, "--certificate-identity", SUBJECT, "--certificate-oidc-issuer", ISSUER
    )
    assert code == 1 and "artifact differs" in err


def test_verify_public_good_root_rejects_private_bundle(
    app: typer.Typer, files: dict[str, Path]
) -> None:
    code, _, err = run(
        app,
        "verify",
        files["artifact"],
        "--bundle",
        files["bundle"],
        "--certificate-identity",
        SUBJECT,
        "--certificate-oidc-issuer",
        ISSUER,
    )
    assert code == 1 and "public-good does not know" in err


def test_verify_with_key(app: typer.Typer, files: dict[str, Path], tmp_path: Path) -> None:
    base = ["verify", files["artifact"], "--trusted-root", files["root"]]
    code, out, err = run(app, *base, "--bundle", files["keybundle"], "--key", files["pub"])
    assert code == 0, err
    assert "ecdsa-p256 key" in out
    _, other = keys.write_keypair(tmp_path / "other", "o", keys.generate("ecdsa"))
    code, _, err = run(app, *base, "--bundle", files["keybundle"], "--key", other)
    assert code == 1 and "does not verify with a trusted key" in err
    # A plain DSSE envelope signed with the key: the statement must name the artifact.
    from scanner.verify.dsse import sign_envelope

    stmt = statement([("artifact.bin", hashlib.sha256(ARTIFACT).hexdigest())], "https://p/v1", {})
    envelope = tmp_path / "a.dsse.json"
    envelope.write_text(
        sign_envelope("application/vnd.in-toto+json", stmt, keys.shared("ecdsa", "cli")).to_json()
    )
    code, out, err = run(app, *base, "--bundle", envelope, "--key", files["pub"])
    assert code == 0, err
    assert "no transparency log" in out
    code, _, err = run(
        app, "verify", "sha256:" + "00" * 32, "--bundle", envelope, "--key", files["pub"]
    )
    assert code == 1 and "in-toto subject does not match" in err


@pytest.mark.parametrize(
    "args",
    [
        ["--certificate-identity", SUBJECT],  # no issuer
        [],  # neither key nor identity
        ["--key", "PUB", "--certificate-identity", SUBJECT, "--certificate-oidc-issuer", ISSUER],
        [
            "--certificate-identity",
            SUBJECT,
            "--certificate-identity-regexp",
            ".*",
            "--certificate-oidc-issuer",
            ISSUER,
        ],
    ],
)
def test_verify_usage_errors(app: typer.Typer, files: dict[str, Path], args: list[str]) -> None:
    args = [str(files["pub"]) if a == "PUB" else a for a in args]
    code, _, err = run(app, "verify", files["artifact"], "--bundle", files["bundle"], *args)
    assert code == 2 and err.startswith("gpuprov: error: ")


def test_verify_unreadable_inputs(app: typer.Typer, files: dict[str, Path], tmp_path: Path) -> None:
    ident = ["--certificate-identity", SUBJECT, "--certificate-oidc-issuer", ISSUER]
    code, _, err = run(app, "verify", tmp_path / "missing", "--bundle", files["bundle"], *ident)
    assert code == 2 and "is not a file" in err
    code, _, err = run(app, "verify", files["artifact"], "--bundle", tmp_path / "none", *ident)
    assert code == 2 and "cannot read" in err
    code, _, err = run(app, "verify", "sha256:xyz", "--bundle", files["bundle"], *ident)
    assert code == 2 and "not a SHA-256 digest" in err
    bad_root = tmp_path / "root.json"
    bad_root.write_text("{}")
    code, _, err = run(
        app,
        "verify",
        files["artifact"],
        "--bundle",
        files["bundle"],
        "--trusted-root",
        bad_root,
        *ident,
    )
    assert code == 2 and "invalid" in err
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    code, _, err = run(app, "verify", files["artifact"], "--bundle", garbage, *ident)
    assert code == 1 and "not valid JSON" in err


def test_catalog_flow(app: typer.Typer, files: dict[str, Path], tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path,
        "nvidia-cuda-runtime-cu12",
        "12.4.127",
        {"nvidia/cuda_runtime/lib/libcudart.so.12": b"cudart bytes"},
    )
    catalog, signed = tmp_path / "catalog.json", tmp_path / "catalog.dsse.json"
    code, _, err = run(app, "catalog", "from-wheel", wheel, "-o", catalog)
    assert code == 0 and "1 file\n" in err
    assert json.loads(catalog.read_text())["subject"][0]["name"].endswith("libcudart.so.12")
    code, _, err = run(app, "catalog", "sign", catalog, "--key", files["key"], "-o", signed)
    assert code == 0, err
    code, out, _ = run(app, "catalog", "verify", signed, "--trust-key", files["pub"])
    assert code == 0 and "1 file\n" in out and "signer.pub" in out
    _, other = keys.write_keypair(tmp_path / "other", "o", keys.generate("ed25519"))
    code, _, err = run(app, "catalog", "verify", signed, "--trust-key", other)
    assert code == 1 and err.startswith("gpuprov: rejected: ")
    code, _, err = run(app, "catalog", "verify", catalog, "--trust-key", files["pub"])
    assert code == 1 and "is not signed" in err
    policy = tmp_path / "trust.yaml"
    policy.write_text(
        yaml.safe_dump(
            {"signers": [{"name": "nv", "key": str(files["pub"]), "families": ["cudnn"]}]}
        )
    )
    code, out, _ = run(app, "catalog", "verify", signed, "--trust", policy)
    assert code == 0 and "0 files, 1 outside the signer's scope" in out
    code, _, err = run(app, "catalog", "verify", signed)
    assert code == 2 and "exactly one of --trust" in err


def test_an_unwritable_output_is_a_clear_error_and_leaves_nothing(
    app: typer.Typer, tmp_path: Path
) -> None:
    """Written like every command's result (scanner.cli_common.write_output): a temporary file
    beside the target used to stay behind when the rename failed."""
    wheel = make_wheel(
        tmp_path,
        "nvidia-cuda-runtime-cu12",
        "12.4.127",
        {"nvidia/cuda_runtime/lib/libcudart.so.12": b"cudart bytes"},
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = sorted(tmp_path.iterdir())
    code, _, err = run(app, "catalog", "from-wheel", wheel, "-o", out_dir)
    assert code == 2 and f"gpuprov: error: cannot write {out_dir}: " in err
    assert sorted(tmp_path.iterdir()) == before and list(out_dir.iterdir()) == []


def test_catalog_build_errors(app: typer.Typer, tmp_path: Path) -> None:
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"junk")
    code, _, err = run(app, "catalog", "from-wheel", junk)
    assert code == 1 and "not a readable wheel" in err
    manifest = tmp_path / "redistrib.json"
    manifest.write_text(json.dumps({"release_label": "1"}))
    code, _, err = run(app, "catalog", "from-redist", manifest, junk)
    assert code == 1 and "not listed" in err
    code, _, err = run(app, "catalog", "from-scan", junk)
    assert code == 1 and "not JSON" in err


def test_trust_commands(
    app: typer.Typer,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    instance: PrivateSigstore,
) -> None:
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "cache"))
    # An unrelated private trusted_root.json is not a public-good root: refused, nothing pinned.
    code, _, err = run(app, "trust", "refresh-root", files["root"])
    assert code == 1 and "not a directory of TUF metadata" in err
    meta = TufRepo().publish(tmp_path / "meta", files["root"].read_bytes())
    code, _, err = run(app, "trust", "refresh-root", meta)
    assert code == 1 and err.startswith("gpuprov: rejected: TUF verification")
    assert not (tmp_path / "cache" / "trust" / "public-good.json").exists()
    code, _, err = run(
        app,
        "verify",
        files["artifact"],
        "--bundle",
        files["bundle"],
        "--certificate-identity",
        SUBJECT,
        "--certificate-oidc-issuer",
        ISSUER,
    )
    assert code == 1 and "public-good does not know" in err
    policy = tmp_path / "trust.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "signers": [
                    {
                        "name": "ngc",
                        "key": str(files["pub"]),
                        "images": ["nvcr.io/*"],
                        "unsafe": ["ignore-tlog"],
                    }
                ]
            }
        )
    )
    code, out, _ = run(app, "trust", "check", policy)
    assert code == 0 and "UNSAFE: ignore-tlog" in out and "images nvcr.io/*" in out
