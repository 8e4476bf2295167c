"""`gpuprov gate`: scan or BOM in, decision out (text, JSON, SARIF, JUnit), exit codes, VSA."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import typer
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from tests.fixtures import keys
from tests.scanner import scenarios as sc

SARIF_SCHEMA = Path(__file__).resolve().parents[3] / ".." / "shared/fixtures/sarif"
HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\n"
PROD = (
    HEAD
    + """rules:
  integrity: {}
  ownership: {allow_unowned: ["/opt/app/**"]}
  mixed_cudnn: {action: warn}
  image_signature: {}
  scan_age: {max_hours: 24}
"""
)
LENIENT = HEAD + "rules:\n  scan_age: {max_hours: 24}\n  cuda_pairing: {}\n"
WARNING = LENIENT + "  slsa: {action: warn}\n"


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path_factory.mktemp("gpuprov-cache")))


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    return cli_app


def run(app: typer.Typer, *args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _policy(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def host_bom(
    app: typer.Typer, policy_world: sc.World, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("bom") / "host.cdx.json"
    code, _, err = run(app, "scan", policy_world.root, "-f", "cyclonedx", "-o", out, "--no-cache")
    assert code == 0, err
    return out


def test_gate_scans_the_target_with_scan_options_and_denies(
    app: typer.Typer, policy_world: sc.World, tmp_path: Path
) -> None:
    policy = _policy(tmp_path, PROD)
    code, out, err = run(
        app, "gate", policy_world.root, "--policy-file", policy, "--no-cache", "-f", "json"
    )
    assert code == 1, err
    doc = json.loads(out)
    assert doc["decision"] == "deny"
    assert doc["policy"]["name"] == "prod" and len(doc["policy"]["sha256"]) == 64
    assert doc["subject"]["kind"] == "host" and doc["subject"]["name"] == sc.HOSTNAME
    assert [r["rule"] for r in doc["reasons"]] == ["integrity", "ownership", "mixed_cudnn"]
    assert doc["controls"]["CIS-2.6"] == "fail" and doc["controls"]["ID.AM-02"] == "pass"
    assert doc["controls"]["PR.DS-01"] == "fail"  # integrity fails, image_signature n/a
    # a scan option reaches the scan: --include narrows the walk to the clean CUDA tree
    code, out, err = run(
        app,
        "gate",
        policy_world.root,
        "--include",
        sc.CUDA_DIR,
        "--policy-file",
        policy,
        "--no-cache",
        "-f",
        "json",
    )
    assert code == 0, err
    assert json.loads(out)["decision"] == "allow"


def test_gate_refuses_scan_output_options_and_bad_input(
    app: typer.Typer, policy_world: sc.World, tmp_path: Path
) -> None:
    policy = _policy(tmp_path, PROD)
    code, _, err = run(app, "gate", policy_world.root, "--policy-file", policy, "--fail-on", "x")
    assert code == 2 and "not a gate option: --fail-on" in err
    code, _, err = run(app, "gate", policy_world.root, "--policy-file", policy, "--bogus")
    assert code == 2 and "--bogus" in err
    code, _, err = run(app, "gate", tmp_path / "missing", "--policy-file", policy)
    assert code == 2
    bad = _policy(tmp_path, HEAD + "rules: {slsa: {min_level: 9}}\n", "bad.yaml")
    code, _, err = run(app, "gate", "--bom", tmp_path / "x.json", "--policy-file", bad)
    assert code == 2 and "rules.slsa.min_level" in err
    code, _, err = run(app, "gate", "--policy-file", policy)
    assert code == 2 and "TARGET" in err
    (tmp_path / "x.json").write_text("{}")
    code, _, err = run(app, "gate", "--bom", tmp_path / "x.json", "--policy-file", policy)
    assert code == 2 and "not a CycloneDX" in err
    # regression (issue 12): a deeply nested BOM was a RecursionError traceback
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run(app, "gate", "--bom", tmp_path / "deep.json", "--policy-file", policy)
    assert code == 2 and "not a JSON document" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        (HEAD + "rules: {slsa: {min_level: " + "9" * 5000 + "}}\n", "5000 digits"),
        ("[" * 50_000 + "]" * 50_000, "nesting"),
        (HEAD + "rules: {scan_age: {max_hours: 1e300}}\n", "rules.scan_age.max_hours"),
        (HEAD + "rules: {integrity: {}}\nrules: {}\n", "duplicate key 'rules'"),
    ],
)
def test_a_hostile_policy_file_is_an_error_never_a_deny(
    app: typer.Typer, host_bom: Path, tmp_path: Path, policy: str, reason: str
) -> None:
    """Exit 2 with the reason: it was a traceback and exit 1, which CI reads as a deny."""
    path = _policy(tmp_path, policy)
    code, _, err = run(app, "gate", "--bom", host_bom, "--policy-file", path)
    assert code == 2, err
    assert reason in err and "Traceback" not in err


def test_gate_refuses_a_bom_over_the_size_limit(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scanner import cli_gate

    monkeypatch.setattr(cli_gate, "MAX_INPUT_BYTES", 100)
    (tmp_path / "big.json").write_text("{" + " " * 200 + "}")
    policy = _policy(tmp_path, PROD)
    code, _, err = run(app, "gate", "--bom", tmp_path / "big.json", "--policy-file", policy)
    assert code == 2 and "larger than 100 bytes" in err


def test_gate_bom_of_ours_matches_the_scan(
    app: typer.Typer, host_bom: Path, tmp_path: Path
) -> None:
    code, out, _ = run(app, "gate", "--bom", host_bom, "--policy-file", _policy(tmp_path, PROD))
    assert code == 1
    assert out.startswith("decision: DENY")
    assert "FAIL  integrity (deny)" in out and "n/a   image_signature" in out
    assert "warn" in out  # mixed_cudnn is a warn rule


def test_an_unwritable_decision_file_is_a_clear_error_and_leaves_nothing(
    app: typer.Typer, host_bom: Path, tmp_path: Path
) -> None:
    """Written like every command's result (scanner.cli_common.write_output): a temporary file
    beside the target used to stay behind when the rename failed."""
    policy = _policy(tmp_path, PROD)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = sorted(tmp_path.iterdir())
    code, _, err = run(app, "gate", "--bom", host_bom, "--policy-file", policy, "-o", out_dir)
    assert code == 2 and f"gpuprov: error: cannot write {out_dir}: " in err
    assert sorted(tmp_path.iterdir()) == before and list(out_dir.iterdir()) == []


def _syft_like(host_bom: Path) -> bytes:
    """Our BOM's GPU files as Syft writes files of a root (`syft dir:/host`): name, SHA-256, no
    gpuprov properties, and the root's operating system."""
    ours = json.loads(host_bom.read_text())
    files = [
        {
            "bom-ref": f"file-{n}",
            "type": "file",
            "name": next(p["value"] for p in c["properties"] if p["name"] == "gpuprov:file:path"),
            "hashes": c["hashes"],
        }
        for n, c in enumerate(ours["components"])
        if c["type"] == "file"
    ]
    doc = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {
            "timestamp": ours["metadata"]["timestamp"],
            "tools": {"components": [{"type": "application", "name": "syft", "version": "1.4.1"}]},
            "component": {"type": "file", "name": "/host"},
        },
        "components": [
            *files,
            {"bom-ref": "os:debian@12", "type": "operating-system", "name": "debian"},
        ],
    }
    return json.dumps(doc).encode()


def test_gate_foreign_bom_says_verdicts_are_missing(
    app: typer.Typer, host_bom: Path, tmp_path: Path
) -> None:
    foreign = tmp_path / "syft.cdx.json"
    foreign.write_bytes(_syft_like(host_bom))
    policy = _policy(
        tmp_path, HEAD + "rules:\n  integrity: {}\n  versions: {minimum: {cudart: '12'}}\n"
    )
    code, out, _ = run(app, "gate", "--bom", foreign, "--policy-file", policy, "-f", "json")
    assert code == 1
    doc = json.loads(out)
    reason, versions = doc["reasons"]
    assert reason["rule"] == "integrity" and reason["missing_input"] is True
    assert "syft 1.4.1" in reason["message"] and "no integrity verdict" in reason["message"]
    # Syft names no version for libcudart.so.12 (a bare ABI major): the rule says so
    assert versions["rule"] == "versions" and versions["missing_input"] is True
    assert "version of" in versions["message"] and "unknown" in versions["message"]


def test_sarif_is_valid_and_junit_well_formed(
    app: typer.Typer, host_bom: Path, tmp_path: Path
) -> None:
    policy = _policy(tmp_path, PROD)
    sarif = tmp_path / "gate.sarif"
    code, _, _ = run(
        app, "gate", "--bom", host_bom, "--policy-file", policy, "-f", "sarif", "-o", sarif
    )
    assert code == 1
    doc = json.loads(sarif.read_text())
    schema_file = SARIF_SCHEMA / "sarif-schema-2.1.0.json"
    # A user's clone has no ../shared; CI always has it, so there its absence is a failure.
    if schema_file.is_file():
        import jsonschema

        jsonschema.validate(doc, json.loads(schema_file.read_text()))
    elif os.environ.get("CI"):
        pytest.fail("../shared/fixtures/sarif is absent: the SARIF schema check cannot run")
    results = doc["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["integrity", "ownership", "mixed_cudnn"]
    assert results[0]["level"] == "error" and results[2]["level"] == "warning"
    assert "CIS-2.6" in results[0]["properties"]["controls"]
    junit = tmp_path / "gate.xml"
    code, _, _ = run(
        app, "gate", "--bom", host_bom, "--policy-file", policy, "-f", "junit", "-o", junit
    )
    assert code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["integrity", "ownership", "mixed_cudnn", "image_signature", "scan_age"]
    assert cases["integrity"].find("failure") is not None
    assert cases["image_signature"].find("skipped") is not None
    assert cases["mixed_cudnn"].find("failure") is None  # warn: reported, not failed
    assert suite.get("failures") == "2" and suite.get("skipped") == "1"


@pytest.fixture(scope="module")
def image_bom(
    app: typer.Typer, policy_world: sc.World, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str]:
    target, _ = policy_world.image_target("oci")
    out = tmp_path_factory.mktemp("img") / "image.cdx.json"
    code, _, err = run(app, "scan", target, "-f", "cyclonedx", "-o", out, "--no-cache")
    assert code == 0, err
    component = json.loads(out.read_text())["metadata"]["component"]
    digest = next(
        p["value"] for p in component["properties"] if p["name"] == "gpuprov:image:digest"
    )
    return out, digest


def test_vsa_is_signed_on_allow_and_verify_checks_it(
    app: typer.Typer, image_bom: tuple[Path, str], tmp_path: Path
) -> None:
    bom, digest = image_bom
    key, pub = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ecdsa"))
    vsa = tmp_path / "vsa.json"
    policy = _policy(tmp_path, LENIENT)
    code, out, err = run(
        app,
        "gate",
        "--bom",
        bom,
        "--policy-file",
        policy,
        "--vsa-key",
        key,
        "--vsa-out",
        vsa,
        "--policy-uri",
        "https://policies.example/prod.yaml",
    )
    assert code == 0, err
    assert out.startswith("decision: ALLOW")
    envelope = json.loads(vsa.read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    assert statement["predicateType"] == "https://slsa.dev/verification_summary/v1"
    assert statement["subject"][0]["digest"]["sha256"] == digest.removeprefix("sha256:")
    predicate = statement["predicate"]
    assert predicate["verificationResult"] == "PASSED"
    assert predicate["verifiedLevels"] == ["SLSA_BUILD_LEVEL_0"]
    assert predicate["policy"]["uri"] == "https://policies.example/prod.yaml"
    assert (
        predicate["policy"]["digest"]["sha256"]
        == json.loads(run(app, "gate", "--bom", bom, "--policy-file", policy, "-f", "json")[1])[
            "policy"
        ]["sha256"]
    )
    assert predicate["resourceUri"].endswith("@" + digest)

    code, out, err = run(app, "verify", digest, "--bundle", vsa, "--key", pub)
    assert code == 0, err
    assert "VSA PASSED" in out and "https://policies.example/prod.yaml" in out
    # another artifact, another key, a tampered payload: rejected
    other = "sha256:" + "0" * 64
    assert run(app, "verify", other, "--bundle", vsa, "--key", pub)[0] == 1
    _, other_pub = keys.write_keypair(tmp_path / "k2", "x", keys.generate("ecdsa"))
    assert run(app, "verify", digest, "--bundle", vsa, "--key", other_pub)[0] == 1
    forged = dict(statement, predicate=dict(predicate, verifiedLevels=["SLSA_BUILD_LEVEL_3"]))
    envelope["payload"] = base64.b64encode(json.dumps(forged).encode()).decode()
    vsa.write_text(json.dumps(envelope))
    assert run(app, "verify", digest, "--bundle", vsa, "--key", pub)[0] == 1


def test_no_vsa_on_deny_or_warn_and_none_for_a_host(
    app: typer.Typer, host_bom: Path, image_bom: tuple[Path, str], tmp_path: Path
) -> None:
    key, _ = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ed25519"))
    vsa = tmp_path / "vsa.json"
    code, _, err = run(
        app,
        "gate",
        "--bom",
        host_bom,
        "--policy-file",
        _policy(tmp_path, PROD),
        "--vsa-key",
        key,
        "--vsa-out",
        vsa,
    )
    assert code == 1 and not vsa.exists() and "no VSA" in err
    # warn: exit 0 but no VSA (a VSA says PASSED; a warning names a failing rule)
    code, _, err = run(
        app,
        "gate",
        "--bom",
        image_bom[0],
        "--policy-file",
        _policy(tmp_path, WARNING, "w.yaml"),
        "--vsa-key",
        key,
        "--vsa-out",
        vsa,
    )
    assert code == 0 and not vsa.exists() and "no VSA: the decision is warn" in err
    code, _, err = run(
        app,
        "gate",
        "--bom",
        host_bom,
        "--policy-file",
        _policy(tmp_path, LENIENT, "l.yaml"),
        "--vsa-key",
        key,
        "--vsa-out",
        vsa,
    )
    assert code == 2 and not vsa.exists() and "sha256 digest" in err


PARITY = HEAD + "rules:\n  parity: {label: env, baseline: staging, target: prod}\n"


def test_parity_with_baseline_boms(
    app: typer.Typer, host_bom: Path, image_bom: tuple[Path, str], tmp_path: Path
) -> None:
    policy = _policy(tmp_path, PARITY)
    # the image runs exactly what the host runs: every version has run in "staging"
    image, _ = image_bom
    code, out, err = run(
        app, "gate", "--bom", image, "--policy-file", policy, "--baseline", host_bom, "-f", "json"
    )
    assert code == 0, err
    assert json.loads(out)["decision"] == "allow"
    # a candidate running a version staging never ran (cuDNN 9.3.0 of /opt/mixed) against a
    # staging fleet without it
    staging = json.loads(host_bom.read_text())
    staging["components"] = [
        c
        for c in staging["components"]
        if not any(p.get("value", "").startswith("/opt/mixed") for p in c.get("properties", []))
    ]
    baseline = tmp_path / "staging.cdx.json"
    baseline.write_text(json.dumps(staging))
    code, out, _ = run(
        app,
        "gate",
        "--bom",
        host_bom,
        "--policy-file",
        policy,
        "--baseline",
        baseline,
        "-f",
        "json",
    )
    assert code == 1
    (reason,) = json.loads(out)["reasons"]
    assert "never ran in env=staging" in reason["message"] and "cudnn 9.3.0" in reason["message"]
    code, out, _ = run(app, "gate", "--bom", host_bom, "--policy-file", policy, "-f", "json")
    assert code == 1 and json.loads(out)["reasons"][0]["missing_input"] is True


def test_console_script_gates_a_scan(policy_world: sc.World, tmp_path: Path) -> None:
    """Through the installed entry point (app/cli.py composes the CLIs): exit 1 on deny."""
    import subprocess
    import sys

    script = Path(sys.executable).parent / "gpuprov"
    policy = _policy(tmp_path, PROD)
    done = subprocess.run(
        [script, "gate", policy_world.root, "--policy-file", policy, "--no-cache", "-f", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GPUPROV_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["decision"] == "deny"


#: a directory name with what each format must escape its own way (issue 17): C0 controls and an
#: escape sequence (XML forbids them, a terminal runs them), U+FFFE (no XML document may hold it),
#: a space, "#", "?", "%" and ":" (a URI changes meaning or breaks), an undecodable byte of a
#: file name (a lone surrogate) and a newline (a forged line of text)
ODD_DIR = "/opt/my libs/v#1?x=%41:\x01\x1b[2J\ufffe\udcff\n=/"


@pytest.fixture(scope="module")
def odd_bom(host_bom: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The host BOM with every GPU file moved under `ODD_DIR`."""
    doc = json.loads(host_bom.read_text())
    paths = []
    for n, component in enumerate(c for c in doc["components"] if c["type"] == "file"):
        for prop in component["properties"]:
            if prop["name"] == "gpuprov:file:path":
                prop["value"] = f"{ODD_DIR}{n}/{prop['value'].rpartition('/')[2]}"
                component["name"] = prop["value"]
                paths.append(prop["value"])
    out = tmp_path_factory.mktemp("odd") / "odd.cdx.json"
    out.write_text(json.dumps(doc))  # ASCII: the surrogate as a \udcff escape
    return out, paths


def _schema_validator() -> object:
    import jsonschema

    schema_file = SARIF_SCHEMA / "sarif-schema-2.1.0.json"
    if not schema_file.is_file():
        pytest.fail(f"{schema_file} is absent: the SARIF schema check cannot run")
    checker = jsonschema.FormatChecker()
    # a format without a checker passes silently: this test is about the uri formats
    assert {"uri", "uri-reference"} <= set(checker.checkers), sorted(checker.checkers)
    return jsonschema.Draft4Validator(json.loads(schema_file.read_text()), format_checker=checker)


def test_odd_paths_in_every_format(
    app: typer.Typer, odd_bom: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """JUnit stays well-formed XML, SARIF valid with format checking on (uri-reference), text
    without a control character, JSON with the paths exactly."""
    from urllib.parse import quote

    bom, paths = odd_bom
    policy = _policy(tmp_path, PROD, "my policy.yaml")
    outputs = {}
    for fmt in ("junit", "sarif", "text", "json"):
        out = tmp_path / f"gate.{fmt}"
        code, _, err = run(app, "gate", "--bom", bom, "--policy-file", policy, "-f", fmt, "-o", out)
        assert code == 1, err
        outputs[fmt] = out.read_bytes().decode()
    # JUnit: parsed by expat, which refuses what XML 1.0 forbids; the path shown escaped
    suite = ET.fromstring(outputs["junit"].encode()).find("testsuite")
    assert suite is not None
    failure = next(c for c in suite.iter("testcase") if c.get("name") == "integrity")
    text = failure.findtext("failure") or ""
    assert "/opt/my libs/v#1?x=%41:\\x01\\x1b[2J\\ufffe\\udcff\\n=/" in text
    # SARIF: the schema's formats checked; every file located by its percent-encoded path
    doc = json.loads(outputs["sarif"])
    errors = [e.message for e in _schema_validator().iter_errors(doc)]  # type: ignore[attr-defined]
    assert errors == []
    located = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in doc["runs"][0]["results"]
        for loc in r["locations"]
        if "uriBaseId" in loc["physicalLocation"]["artifactLocation"]
    }
    encoded = {quote(p.encode("utf-8", "surrogateescape").lstrip(b"/"), safe="/") for p in paths}
    assert located and located <= encoded
    assert all(
        u.startswith("opt/my%20libs/v%231%3Fx%3D%2541%3A%01%1B%5B2J%EF%BF%BE%FF%0A%3D")
        for u in located
    )
    policy_uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in doc["runs"][0]["results"]
        for loc in r["locations"]
    } - located
    assert policy_uris <= {"my%20policy.yaml"}
    # text: nothing a terminal would act on, no forged line
    assert not [ch for ch in outputs["text"] if ch != "\n" and (ord(ch) < 0x20 or ch == "\x7f")]
    assert "\\x1b[2J" in outputs["text"]
    assert not [line for line in outputs["text"].splitlines() if line.startswith("=")]
    # JSON: the paths exactly as the BOM gave them
    reasons = json.loads(outputs["json"])["reasons"]
    assert {f["path"] for r in reasons for f in r["files"]} <= set(paths)


def test_policy_uri_must_be_a_uri(app: typer.Typer, host_bom: Path, tmp_path: Path) -> None:
    policy = _policy(tmp_path, PROD)
    for bad in ("my policy.yaml", "https://x.example/a%zz", "https://x.example/[p]"):
        code, _, err = run(
            app, "gate", "--bom", host_bom, "--policy-file", policy, "--policy-uri", bad
        )
        assert code == 2 and "is not a URI" in err, err
