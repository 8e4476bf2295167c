"""`gpuprov gate --advisories PATH`: the advisories rule offline, NVIDIA's real bulletins (the
shared PSIRT fixtures) matched here against BOMs of real-shaped roots scanned by gpuprov.

- 2023/5446: CVE-2023-0193 (MEDIUM) and CVE-2023-0196 (LOW) are in cuobjdump of every CUDA
  Toolkit prior to 12.1: a toolkit 11.8 root with cuobjdump is affected by both;
- 2025/5703: R535 Linux drivers prior to 535.274.02 are affected by CVE-2025-23280 (HIGH);
- a cuDNN-only root: no bulletin names cuDNN.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.fixtures import elf
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.node import nodetree as nt

HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n"
LIB = "usr/lib/x86_64-linux-gnu"


@pytest.fixture(autouse=True)
def _need_psirt(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path_factory.mktemp("gpuprov-cache")))


def run(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _scan(root: Path, out: Path, *extra: object) -> Path:
    code, _, err = run("scan", root, "-f", "cyclonedx", "-o", out, "--no-cache", *extra)
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def boms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("roots")
    toolkit = base / "toolkit" / "usr/local/cuda-11.8"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "version.json").write_text(
        json.dumps(
            {
                "cuda": {"name": "CUDA SDK", "version": "11.8.0"},
                "cuda_cuobjdump": {"name": "CUDA cuobjdump", "version": "11.8.86"},
            }
        )
    )
    elf.build_tool(toolkit / "bin", "cuobjdump", ["Cuda compilation tools, release 11.8, V11.8.86"])
    elf.build_cuda_library(toolkit / "lib64", "cudart", "11.8.89")
    elf.build_cuda_library(base / "cudnn" / LIB, "cudnn", "8.9.7")
    old = nt.gpu_node(base / "host-old", driver="535.129.03")
    patched = nt.gpu_node(base / "host-patched", driver="535.274.02")
    out = tmp_path_factory.mktemp("boms")
    # the hosts' saved nvidia-smi output says bare metal: their driver is the datacenter one
    smi = {}
    for driver in ("535.129.03", "535.274.02"):
        smi[driver] = base / f"smi-{driver}.xml"
        smi[driver].write_text(nt.nvidia_smi_xml("None").replace(nt.DRIVER, driver))
    return {
        "toolkit": _scan(base / "toolkit", out / "toolkit.json"),
        "cudnn": _scan(base / "cudnn", out / "cudnn.json"),
        "old": _scan(old, out / "old.json", "--nvidia-smi-xml", smi["535.129.03"]),
        "patched": _scan(patched, out / "patched.json", "--nvidia-smi-xml", smi["535.274.02"]),
        "patched-unknown": _scan(patched, out / "patched-unknown.json"),
    }


def _policy(tmp_path: Path, rule: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(HEAD + rule)
    return path


def gate(bom: Path, policy: Path, *advisories: Path) -> tuple[int, dict[str, Any], str]:
    feeds = [a for p in advisories for a in ("--advisories", p)]
    code, out, err = run("gate", "--bom", bom, "--policy-file", policy, "-f", "json", *feeds)
    doc = json.loads(out) if out.strip() else {}
    return code, doc, err


def advisories_of(doc: dict[str, Any]) -> dict[str, Any]:
    (result,) = [r for r in doc["rules"] if r["rule"] == "advisories"]
    return result


def test_an_affected_toolkit_component_denies(boms: dict[str, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, "  advisories: {min_severity: medium}\n")
    code, doc, err = gate(boms["toolkit"], policy, PSIRT / "2023/5446")
    assert code == 1, err
    result = advisories_of(doc)
    assert (result["status"], result["missing_input"]) == ("fail", False)
    assert result["message"].startswith(
        "1 known vulnerability at or above medium affects the asset: CVE-2023-0193 (medium, "
        "cuda-toolkit/cuobjdump 11.8.86"
    )
    assert result["evidence"]["affected"] == "CVE-2023-0193"  # CVE-2023-0196 is LOW
    assert result["evidence"]["feed_documents"] == "1"
    assert result["controls"] == ["ID.RA-01", "ID.RA-08", "PR.PS-02", "CIS-7.5", "CIS-7.7"]
    assert doc["controls"]["ID.RA-01"] == "fail"
    low = _policy(tmp_path, "  advisories: {min_severity: low}\n")
    _, doc, _ = gate(boms["toolkit"], low, PSIRT / "2023/5446")
    assert advisories_of(doc)["evidence"]["affected"] == "CVE-2023-0193,CVE-2023-0196"
    high = _policy(tmp_path, "  advisories: {min_severity: high}\n")
    code, doc, _ = gate(boms["toolkit"], high, PSIRT / "2023/5446")
    assert code == 0 and advisories_of(doc)["status"] == "pass"


def test_the_driver_is_judged_on_its_branch(boms: dict[str, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, "  advisories: {min_severity: high}\n")
    code, doc, _ = gate(boms["old"], policy, PSIRT / "2025/5703")
    assert code == 1
    result = advisories_of(doc)
    assert "CVE-2025-23280 (high, driver 535.129.03)" in result["message"]
    # 5703's JSON does not match its published .sha256 (the fixture README): read and named
    assert result["evidence"]["feed"].endswith("; 1 not matching their .sha256")
    code, doc, _ = gate(boms["patched"], policy, PSIRT / "2025/5703")
    assert code == 0, advisories_of(doc)
    assert advisories_of(doc)["status"] == "pass"
    # the same host without its virtualization mode: it could be a vGPU guest, whose R535
    # line's fix reads "575.274.02" (for review), so the gate does not pass it
    code, doc, _ = gate(boms["patched-unknown"], policy, PSIRT / "2025/5703")
    assert code == 1 and "CVE-2025-23280 (high, driver 535.274.02)" in advisories_of(doc)["message"]


def test_an_ignore_in_force_passes_and_an_expired_one_no_longer_does(
    boms: dict[str, Path], tmp_path: Path
) -> None:
    rule = (
        "  advisories:\n    min_severity: medium\n    ignore:\n"
        "      - {cve: CVE-2023-0193, reason: cuobjdump is never run, expires: EXPIRES}\n"
    )
    policy = _policy(tmp_path, rule.replace("EXPIRES", "2999-01-01"))
    code, doc, _ = gate(boms["toolkit"], policy, PSIRT / "2023/5446")
    result = advisories_of(doc)
    assert code == 0 and result["status"] == "pass"
    assert result["evidence"]["ignored"] == "CVE-2023-0193"
    assert result["message"].endswith("; 1 ignored by the policy")
    policy = _policy(tmp_path, rule.replace("EXPIRES", "2020-01-01"))
    code, doc, _ = gate(boms["toolkit"], policy, PSIRT / "2023/5446")
    result = advisories_of(doc)
    assert code == 1 and result["status"] == "fail"
    assert result["evidence"]["ignores_expired"] == "CVE-2023-0193"


def test_without_a_feed_the_rule_fails_and_says_so(boms: dict[str, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, "  advisories: {min_severity: critical}\n")
    code, doc, err = gate(boms["cudnn"], policy)
    assert code == 1
    result = advisories_of(doc)
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert "no advisory feed was given" in result["message"]
    assert "the advisories rule has no feed (give --advisories PATH)" in " ".join(err.split())


def test_a_cudnn_only_root_is_affected_by_no_bulletin(
    boms: dict[str, Path], tmp_path: Path
) -> None:
    policy = _policy(tmp_path, "  advisories: {min_severity: low}\n")
    code, doc, err = gate(boms["cudnn"], policy, PSIRT)
    assert code == 0, err
    result = advisories_of(doc)
    assert result["status"] == "pass"
    assert result["message"].startswith("no known vulnerability at or above low affects")
    assert result["evidence"]["feed_documents"] == "131"


def test_under_investigation_is_a_missing_input(boms: dict[str, Path], tmp_path: Path) -> None:
    """NVIDIA's bulletins state no under_investigation product: 5446 as it would read if NVIDIA
    had not yet known which versions are affected (its own tracking id)."""
    doc = json.loads((PSIRT / "2023/5446/5446.json").read_text())
    doc["document"]["tracking"]["id"] = "5446-investigation"
    for vuln in doc["vulnerabilities"]:
        status = vuln["product_status"]
        status["under_investigation"] = status.pop("known_affected")
        status.pop("fixed", None)
        vuln.pop("remediations", None)
    feed = tmp_path / "feed"
    feed.mkdir()
    (feed / "5446-investigation.json").write_text(json.dumps(doc))
    policy = _policy(tmp_path, "  advisories: {min_severity: medium}\n")
    code, out, err = gate(boms["toolkit"], policy, feed)
    assert code == 1, err
    result = advisories_of(out)
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert result["message"].startswith(
        "1 vulnerability at or above medium is under investigation by the vendor"
    )
    assert result["evidence"]["under_investigation"] == "CVE-2023-0193"


def test_a_feed_older_than_its_limit_is_a_missing_input(
    boms: dict[str, Path], tmp_path: Path
) -> None:
    feed = tmp_path / "5446"
    shutil.copytree(PSIRT / "2023/5446", feed)
    policy = _policy(tmp_path, "  advisories: {min_severity: critical, max_feed_age_hours: 48}\n")
    code, doc, _ = gate(boms["cudnn"], policy, feed)
    assert code == 0 and advisories_of(doc)["status"] == "pass"  # just copied
    week = 7 * 86400
    for path in feed.iterdir():
        stat = path.stat()
        os.utime(path, (stat.st_atime - week, stat.st_mtime - week))
    code, doc, _ = gate(boms["cudnn"], policy, feed)
    result = advisories_of(doc)
    assert code == 1 and (result["status"], result["missing_input"]) == ("fail", True)
    assert "more than max_feed_age_hours 48: import the feed again" in result["message"]


def test_a_document_that_cannot_be_read_is_an_error(boms: dict[str, Path], tmp_path: Path) -> None:
    feed = tmp_path / "feed"
    shutil.copytree(PSIRT / "2023/5446", feed)
    (feed / "broken.json").write_text("{not json")
    policy = _policy(tmp_path, "  advisories: {min_severity: low}\n")
    code, _, err = gate(boms["toolkit"], policy, feed)
    assert code == 2
    assert "broken.json: not_json: not JSON" in " ".join(err.split())
    code, _, err = gate(boms["toolkit"], policy, tmp_path / "absent.json")
    assert code == 2 and "cannot read" in err


def test_advisories_belong_to_the_local_gate(boms: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = run(
        "gate", "--bom", boms["cudnn"], "--policy", "prod", "--advisories", PSIRT / "2023/5446"
    )
    assert code == 2 and "--advisories applies to --policy-file only" in err
    policy = _policy(tmp_path, "  scan_age: {max_hours: 876000}\n")
    code, _, err = gate(boms["cudnn"], policy, PSIRT / "2023/5446")
    assert code == 0 and "the policy has no advisories rule" in " ".join(err.split())


def test_only_a_hosts_bom_gives_the_matcher_condition_facts() -> None:
    from scanner.policy.advisory_feed import FeedError, products_of_bom

    def bom(*props: tuple[str, str]) -> dict[str, object]:
        named = [{"name": n, "value": v} for n, v in props]
        return {"metadata": {"component": {"type": "operating-system", "properties": named}}}

    cdi = ("gpuprov:condition:cdi_mode", "true")
    source = ("gpuprov:condition:cdi_mode:source", "/etc/nvidia-container-runtime/config.toml")
    newer = ("gpuprov:condition:future_flag", "true")
    assert products_of_bom(bom(cdi, source, newer), [], host=True).facts == {"cdi_mode": "true"}
    # an image is no node: its BOM claiming a host's fact is refused, never used
    with pytest.raises(FeedError, match="no host but claims host conditions"):
        products_of_bom(bom(cdi), [], host=False)
    with pytest.raises(FeedError, match="cdi_mode"):
        products_of_bom(bom(("gpuprov:condition:cdi_mode", "maybe")), [], host=True)
    assert products_of_bom(bom(), [], host=False).facts == {}
