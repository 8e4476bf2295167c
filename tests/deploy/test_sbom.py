"""`make sbom` (scripts/sbom.py): gpuprov's own CycloneDX SBOM is valid CycloneDX 1.6 (checked
again here by the schema gate the service's ingest uses), names gpuprov at its version as the
root, and holds exactly the locked distributions with their versions, purls and the lock's
SHA-256 digests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import scanner
from app.domain.schema import schema_problems
from tests.deploy.dockerfile import CHECKOUT


def test_make_sbom_describes_the_locked_service(tmp_path: Path) -> None:
    output = tmp_path / "gpuprov.cdx.json"
    done = subprocess.run(
        [sys.executable, str(CHECKOUT / "scripts" / "sbom.py"), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"SOURCE_DATE_EPOCH": "1767225600", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stderr
    text = output.read_text()
    bom = json.loads(text)
    assert bom["specVersion"] == "1.6" and bom["bomFormat"] == "CycloneDX"
    assert schema_problems(bom, text, "1.6", 5) == []
    assert bom["metadata"]["timestamp"].startswith("2026-01-01")  # reproducible
    root = bom["metadata"]["component"]
    assert (root["name"], root["version"]) == ("gpuprov", scanner.__version__)
    assert root["purl"] == f"pkg:pypi/gpuprov@{scanner.__version__}"

    lock = (CHECKOUT / "requirements.lock").read_text()
    pinned = {}
    for name, version, hashes in re.findall(
        r"^([A-Za-z0-9][\w.-]*)==(\S+)((?:\s*\\\n\s+--hash=\S+)+)", lock, re.M
    ):
        pinned[re.sub(r"[-_.]+", "-", name).lower()] = (
            version,
            set(re.findall(r"sha256:([0-9a-f]{64})", hashes)),
        )
    components = {re.sub(r"[-_.]+", "-", c["name"]).lower(): c for c in bom["components"]}
    assert set(components) == set(pinned)
    # the figure docs/deploy.md states (it said 81 when the lock pinned 82: issue 18 §6)
    deploy = " ".join((CHECKOUT / "docs" / "deploy.md").read_text().split())
    stated = re.search(r"(\d+) components, one per pin of `requirements.lock`", deploy)
    assert stated is not None and int(stated.group(1)) == len(components) == len(pinned)
    for name, (version, hashes) in pinned.items():
        component = components[name]
        assert component["version"] == version
        assert component["purl"] == component["bom-ref"]
        assert component["purl"].startswith("pkg:pypi/") and component["purl"].endswith(
            f"@{version}"
        )
        recorded = {
            h["content"] for ref in component["externalReferences"] for h in ref.get("hashes", [])
        }
        assert recorded == hashes, name
    [graph] = [d for d in bom["dependencies"] if d["ref"] == root["bom-ref"]]
    assert {components["fastapi"]["bom-ref"], components["sqlalchemy"]["bom-ref"]} <= set(
        graph["dependsOn"]
    )
    assert set(graph["dependsOn"]) <= {c["bom-ref"] for c in components.values()}
