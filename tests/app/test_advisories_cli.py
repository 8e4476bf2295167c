"""`gpuprov advisories import` on both databases: the JSON summary's exact shape, .sha256
checks (imported and marked by default, refused with --strict), refusals by name with exit 1
while the rest is kept, the configured size limit, usage errors with exit 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app as gpuprov_app
from tests.app.conftest import Service
from tests.scanner.advisories.documents import PSIRT, csaf, encode, osv

KEYS = [
    "imported",
    "unchanged",
    "refused",
    "digest_mismatches",
    "vulnerabilities",
    "unparsed_versions",
]


def run(service: Service, *args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        gpuprov_app, list(args), env={"GPUPROV_DATABASE_URL": service.url, **env}
    )
    return result.exit_code, result.stdout, result.stderr


def write(path: Path, data: bytes, digest: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if digest is not None:
        path.with_name(path.name + ".sha256").write_text(digest)
    return path


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    """A mirror laid out as NVIDIA's: a good bulletin, one whose .sha256 is stale, an OSV
    record, a file that is not JSON and a JSON file that is no advisory."""
    root = tmp_path / "feed"
    good = encode(csaf(tracking_id="A-1"))
    write(root / "2026/A-1/A-1.json", good, hashlib.sha256(good).hexdigest())
    stale = encode(csaf(tracking_id="B-2"))
    write(root / "2026/B-2/B-2.json", stale, hashlib.sha256(b"older bytes").hexdigest())
    write(root / "osv/GHSA-aaaa-bbbb-cccc.json", encode(osv()))
    # not JSON, and its .sha256 says so: listed as refused, not as a mismatch
    write(root / "2026/C-3/C-3.json", b"<html>not found</html>", "0" * 64)
    write(root / "2026/D-4/D-4.json", encode({"hello": "world"}))
    return root


def test_import_summary_marks_mismatches_and_refuses_by_name(service: Service, feed: Path) -> None:
    code, out, _ = run(service, "advisories", "import", str(feed), "--format", "json")
    assert code == 1
    summary = json.loads(out)
    assert list(summary) == KEYS
    assert (summary["imported"], summary["unchanged"]) == (3, 0)
    assert summary["digest_mismatches"] == [str(feed / "2026/B-2/B-2.json")]
    refused = {Path(r["path"]).name: r["error"] for r in summary["refused"]}
    assert refused["C-3.json"].startswith("not_json: ")
    assert refused["D-4.json"].startswith("unknown_format: ")
    assert summary["vulnerabilities"] == 3  # CVE-2026-0001, EX-BUG-7, CVE-2026-1111
    assert summary["unparsed_versions"] == []
    assert service.count("advisory_document") == 3
    # again: nothing new, the same refusals
    code, out, _ = run(service, "advisories", "import", str(feed), "--format", "json")
    again = json.loads(out)
    assert code == 1 and (again["imported"], again["unchanged"]) == (0, 3)


def test_strict_refuses_a_mismatch(service: Service, feed: Path) -> None:
    target = feed / "2026/B-2/B-2.json"
    code, out, _ = run(service, "advisories", "import", str(target), "--strict", "--format", "json")
    summary = json.loads(out)
    assert code == 1 and summary["imported"] == 0 and summary["digest_mismatches"] == []
    assert summary["refused"] == [
        {"path": str(target), "error": "digest_mismatch: does not match its .sha256"}
    ]
    assert service.count("advisory_document") == 0


def test_exit_zero_and_text_summary(service: Service, feed: Path) -> None:
    code, out, err = run(service, "advisories", "import", str(feed / "2026/A-1"))
    assert code == 0
    assert out.strip() == (
        "imported 1, unchanged 0, refused 0, digest mismatches 0, vulnerabilities 2, "
        "unparsed versions 0"
    )


def test_configured_limit_refuses_by_name(service: Service, feed: Path) -> None:
    code, out, _ = run(
        service,
        "advisories",
        "import",
        str(feed / "2026/A-1"),
        "--format",
        "json",
        GPUPROV_MAX_ADVISORY_BYTES="2048",
    )
    (refused,) = json.loads(out)["refused"]
    assert code == 1 and refused["error"].startswith("too_large: ")
    assert "2048-byte limit" in refused["error"]


def test_missing_path_is_refused_and_usage_errors_exit_2(service: Service, tmp_path: Path) -> None:
    code, out, _ = run(
        service, "advisories", "import", str(tmp_path / "nope.json"), "--format", "json"
    )
    (refused,) = json.loads(out)["refused"]
    assert code == 1 and refused["error"].startswith("unreadable: ")
    assert run(service, "advisories", "import")[0] == 2
    assert run(service, "advisories", "import", str(tmp_path), "--format", "xml")[0] == 2


@pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")
def test_shared_bulletins(service: Service) -> None:
    code, out, _ = run(service, "advisories", "import", str(PSIRT), "--format", "json")
    summary: dict[str, Any] = json.loads(out)
    assert code == 0 and summary["refused"] == []
    assert (summary["imported"], summary["vulnerabilities"]) == (131, 455)
    assert sorted(Path(p).relative_to(PSIRT).as_posix() for p in summary["digest_mismatches"]) == [
        "2023/5449/5449.json",
        "2024/5586/5586.json",
        "2025/5703/5703.json",
        "2025/5708/5708.json",
    ]
    assert all(set(u) == {"cve", "product", "text"} for u in summary["unparsed_versions"])
    code, out, _ = run(service, "advisories", "import", str(PSIRT), "--strict", "--format", "json")
    strict = json.loads(out)
    assert code == 1 and len(strict["refused"]) == 4 and strict["unchanged"] == 127


def test_a_database_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    data = encode(csaf())
    doc = write(tmp_path / "a.json", data)
    result = CliRunner().invoke(
        gpuprov_app,
        ["advisories", "import", str(doc)],
        env={"GPUPROV_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}"},
    )
    assert result.exit_code == 1 and "gpuprov db upgrade" in result.stderr
    assert not (tmp_path / "none.db").exists()
