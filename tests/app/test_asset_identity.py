"""A stored asset keeps its identity (issue 18 §5), end to end with the CLI against a live
service: an image pushed from its OCI layout as `demo-oci:demo` with `env=demo`, then gated
from an OCI archive of the same image (which names it `image:demo`), pushed again without
labels, gated from its BOM, and pushed with one label changed: one asset throughout, its
first name, its image config label and every label no report changed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.app import boms
from tests.app.conftest import LiveServer, Service, auth, free_port
from tests.app.test_gate_api import POLICY, put_policy
from tests.fixtures import images as im

IMAGE = im.Image(
    [im.Layer([im.file("usr/lib/x86_64-linux-gnu/libnccl.so.2", b"\x7fELF nccl")])],
    labels={"org.opencontainers.image.vendor": "acme"},
)


def _cli(*args: object, env: dict[str, str]) -> Any:
    result = CliRunner().invoke(cli_app, [str(a) for a in args], env=env)
    return result


def _assets(service: Service) -> list[dict[str, Any]]:
    reader = auth(service.token("inventory:read"))
    answer = service.client.get("/api/v1/assets", headers=reader)
    assert answer.status_code == 200, answer.text
    return [
        {"name": a["name"], "labels": a["labels"], "identity": a["identity"]}
        for a in answer.json()["items"]
    ]


def test_gate_and_push_keep_the_stored_name_and_labels(service: Service, tmp_path: Path) -> None:
    put_policy(service, POLICY)
    # one image, written once as an OCI layout directory and as an OCI archive of it
    files, built = im.oci_layout_files({"demo": IMAGE})
    layout = tmp_path / "demo-oci"
    layout.mkdir()
    for name, data in files.items():
        (layout / name).parent.mkdir(parents=True, exist_ok=True)
        (layout / name).write_bytes(data)
    archive = tmp_path / "image.tar"
    im.write_tar(archive, files)
    digest = built["demo"].manifest_digest  # type: ignore[union-attr]
    token = tmp_path / "ci.token"
    token.write_text(service.token("gate", "report:write", name="ci"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "GPUPROV_SPOOL": str(tmp_path / "spool")}
    port = free_port()
    remote = ["--server", f"http://127.0.0.1:{port}", "--token-file", token]
    first = {
        "name": "demo-oci:demo",
        "labels": {"env": "demo", "org.opencontainers.image.vendor": "acme"},
        "identity": digest,
    }
    with LiveServer(service.settings, port):
        pushed = _cli(
            "scan", f"oci:{layout}:demo", "-q", "-f", "json", "-o", tmp_path / "first.json",
            "--push", *remote, "--label", "env=demo", env=env,
        )  # fmt: skip
        assert pushed.exit_code == 0, pushed.output
        assert _assets(service) == [first]

        # the case: the gate of the archive renamed it `image:demo` and dropped env=demo
        gated = _cli(
            "gate", f"oci-archive:{archive}", "--policy", "prod", *remote, "-f", "json", env=env
        )
        assert gated.exit_code == 0, gated.output
        assert json.loads(gated.stdout)["subject"]["digest"] == digest
        assert _assets(service) == [first]

        # a push of the archive's scan without labels, then a gate of that BOM
        scanned = _cli("scan", f"oci-archive:{archive}", "-f", "cyclonedx", "-o",
                       tmp_path / "archive.cdx.json", env=env)  # fmt: skip
        assert scanned.exit_code in (0, 1), scanned.output
        bom = tmp_path / "archive.cdx.json"
        assert json.loads(bom.read_bytes())["metadata"]["component"]["name"] == "image:demo"
        again = _cli("push", bom, *remote, env=env)
        assert again.exit_code == 0, again.output
        assert _assets(service) == [first]
        gated_bom = _cli("gate", "--bom", bom, "--policy", "prod", *remote, env=env)
        assert gated_bom.exit_code == 0, gated_bom.output
        assert _assets(service) == [first]

        # a label given again changes its value; the others stay
        relabelled = _cli(
            "scan", f"oci-archive:{archive}", "-q", "-f", "json", "-o", tmp_path / "last.json",
            "--push", *remote, "--label", "team=vision", "--label", "env=prod", env=env,
        )  # fmt: skip
        assert relabelled.exit_code == 0, relabelled.output
    labels = {"env": "prod", "team": "vision", "org.opencontainers.image.vendor": "acme"}
    assert _assets(service) == [{**first, "labels": labels}]
    assert service.count("scan") >= 3 and service.count("gate_decision") == 2
    # the asset's details follow the latest report: where it was read from last
    reader = auth(service.token("inventory:read"))
    (item,) = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    detail = service.client.get(f"/api/v1/assets/{item['id']}", headers=reader).json()
    assert detail["details"]["reference"] == f"oci-archive:{archive}"


def test_labels_kept_across_reports_stay_within_the_cap(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Labels add up across reports, so the cap counts the stored ones too: a report that
    would take the asset past GPUPROV_MAX_ASSET_LABELS is a 413 and changes nothing."""
    cap = service.settings.max_asset_labels
    half = cap // 2 + 1

    def labelled(prefix: str) -> bytes:
        labels = {f"{prefix}{n}": "x" for n in range(half)}
        return boms.encode(boms.gpuprov_bom(name="registry.example.com/capped:1", labels=labels))

    assert post_report(labelled("a")).status_code == 201
    before = service.stored()
    refused = post_report(labelled("b"))
    assert refused.status_code == 413, refused.text
    message = refused.json()["error"]["message"]
    assert f"would carry {2 * half} labels" in message and "GPUPROV_MAX_ASSET_LABELS" in message
    assert service.stored() == before
    (asset,) = _assets(service)
    assert set(asset["labels"]) == {f"a{n}" for n in range(half)}
