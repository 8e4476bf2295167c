"""The package a deployment installs works: the wheel is built from the files git tracks (what a
clean clone holds), installed into a fresh virtualenv outside the checkout, and the installed
`gpuprov` (run from a directory outside the checkout) migrates a database, creates tokens,
serves, takes a pushed report and answers a query. Every data file the code loads at run time
must come from the installed package: the migrations, the pinned Sigstore roots, the CycloneDX
schemas.

The fresh venv gets the third-party dependencies through a ``.pth`` line naming this venv's
site-packages: what is under test is gpuprov's own wheel, and ``.pth`` lines are not followed
recursively, so the editable install of the checkout stays invisible (asserted below). This keeps
the test offline and at a few seconds of installation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.app.conftest import free_port

CHECKOUT = Path(__file__).resolve().parents[1]
# What an sdist or a clean clone holds for the build; the rest of the checkout is not needed.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "alembic.ini")
TREES = ("gpuprov", "scanner", "app", "migrations")


@dataclass(frozen=True)
class Installed:
    venv: Path
    site: Path
    work: Path  # the cwd of every command: outside the checkout
    env: dict[str, str]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        return done

    def gpuprov(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        """The installed `gpuprov` with ``args`` under ``env``, its exit status unchecked."""
        return subprocess.run(
            [str(self.venv / "bin" / "gpuprov"), *args],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def serve(self, port: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`gpuprov serve` on ``port``, answering /readyz with 200 when this returns."""
        server = subprocess.Popen(
            [str(self.venv / "bin" / "gpuprov"), "serve", "--port", str(port)],
            cwd=self.work,
            env=env or self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                        return server
                except httpx.HTTPError:
                    pass
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.2)
            raise AssertionError(f"gpuprov serve on port {port} was not ready in 60 s")
        except BaseException:
            server.kill()
            server.wait(timeout=30)
            raise


def _tracked() -> list[str]:
    """The files of a clean clone that the build reads (untracked files left around in this
    checkout are not part of it)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *SOURCES, *TREES],
        cwd=CHECKOUT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [name for name in listed.split("\0") if name]


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "src"
    for name in _tracked():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CHECKOUT / name, source / name)
    wheels = tmp / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = wheels.glob("gpuprov-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    wheel = _build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp / "work"
    work.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GPUPROV_", "PYTHON", "VIRTUAL"))
    }
    env.update(
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "cache"),
        XDG_DATA_HOME=str(tmp / "data"),
        GPUPROV_DATABASE_URL=f"sqlite:///{tmp / 'db' / 'gpuprov.db'}",
        PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
    )
    (tmp / "db").mkdir()
    print(f"wheel built and installed in {time.monotonic() - started:.1f} s")  # noqa: T201
    yield Installed(venv, site, work, env)


def test_the_wheel_carries_every_runtime_data_file(installed: Installed) -> None:
    [wheel] = installed.venv.parent.glob("wheels/gpuprov-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "app/storage/migrations/env.py",
        "app/storage/migrations/script.py.mako",
        "scanner/verify/roots/public-good.json",
        "scanner/verify/roots/sigstore-tuf-root.json",
    } | {
        f"app/storage/migrations/versions/{p.name}"
        for p in (CHECKOUT / "migrations" / "versions").glob("*.py")
    }
    # and whatever data file a package holds now or later (templates, schemas, roots, ...)
    expected |= {
        name for name in _tracked() if name.startswith(("scanner/", "app/")) and name[-3:] != ".py"
    }
    assert expected <= names, expected - names
    assert not [n for n in names if n.startswith("migrations/")]  # no top-level "migrations"


def test_the_installed_code_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    probe = (
        "import json, app, scanner, app.storage.migrate as m; "
        "print(json.dumps([app.__file__, scanner.__file__, str(m.MIGRATIONS_DIR)]))"
    )
    paths = json.loads(installed.run("python", "-c", probe).stdout)
    for path in paths:
        assert Path(path).is_relative_to(installed.site), path
        assert not Path(path).is_relative_to(CHECKOUT), path


def test_the_installed_package_loads_its_data_files(installed: Installed) -> None:
    probe = (
        "from scanner.verify.trusted_roots import SigstoreRoot; "
        "from scanner.verify.tuf_refresh import pinned_tuf_root; "
        "from app.domain.schema import schema_problems; "
        "root = SigstoreRoot.public_good(); "
        "bad = schema_problems({'bomFormat': 1}, '{}', '1.6', 5); "
        "print(len(root.authorities), len(root.tlogs), len(pinned_tuf_root()), len(bad))"
    )
    authorities, tlogs, tuf, problems = installed.run("python", "-c", probe).stdout.split()
    assert int(authorities) > 0 and int(tlogs) > 0 and int(tuf) > 0 and int(problems) > 0
    # the node facts' NVIDIA tables and the policy's controls and drivers (packaged YAML)
    tables = (
        "from scanner.node import tables as t; "
        "from scanner.policy.controls import default_catalog; "
        "from scanner.policy.drivers import default_drivers; "
        "print(len(t.default_cuda_drivers().releases), len(t.default_jetpack().releases), "
        "len(t.default_compute_capability().models), len(default_catalog().controls), "
        "len(default_drivers().minimum))"
    )
    counts = installed.run("python", "-c", tables).stdout.split()
    assert len(counts) == 5 and all(int(n) > 0 for n in counts), counts
    version = installed.run("gpuprov", "--version").stdout
    assert version.split()[-1][0].isdigit(), version


def test_installed_gpuprov_migrates_serves_ingests_and_answers(
    installed: Installed, tmp_path: Path
) -> None:
    # its own database and directory: the test starts from nothing however often it runs
    (tmp_path / "work").mkdir()
    database = f"sqlite:///{tmp_path / 'gpuprov.db'}"
    installed = replace(
        installed, work=tmp_path / "work", env={**installed.env, "GPUPROV_DATABASE_URL": database}
    )
    run = installed.run
    current = run("gpuprov", "db", "current", check=False)
    assert current.returncode == 1 and "gpuprov db upgrade" in current.stdout + current.stderr
    run("gpuprov", "db", "upgrade")
    assert "at revision" in run("gpuprov", "db", "current").stdout
    agent = run("gpuprov", "token", "create", "--name", "agent", "--scope", "report:write").stdout
    reader = run("gpuprov", "token", "create", "--name", "ui", "--scope", "inventory:read").stdout
    (installed.work / "agent.token").write_text(agent)

    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    run("gpuprov", "scan", str(root), "-q", "-f", "cyclonedx", "-o", "host.cdx.json")
    # SPDX 2.3 from the installed wheel (issue 21): a second host, valid for spdx-tools
    spdx_root = tmp_path / "spdx-host"
    (spdx_root / "etc").mkdir(parents=True)
    (spdx_root / "etc" / "machine-id").write_text(SPDX_MACHINE_ID + "\n")
    run("gpuprov", "scan", str(spdx_root), "-q", "-f", "spdx-json", "-o", "host.spdx.json")
    spdx_text = (installed.work / "host.spdx.json").read_text()
    _valid_spdx(spdx_text)

    port = free_port()
    server = installed.serve(port)
    url = f"http://127.0.0.1:{port}"
    try:
        pushed = run(
            "gpuprov", "push", "host.cdx.json", "--server", url, "--token-file", "agent.token"
        )
        assert "stored" in pushed.stderr
        pushed = run(
            "gpuprov", "push", "host.spdx.json", "--server", url, "--token-file", "agent.token"
        )
        assert "stored" in pushed.stderr
        reading = {"Authorization": f"Bearer {reader.strip()}"}
        answer = httpx.get(f"{url}/api/v1/assets", headers=reading)
        _dashboard_renders(url, reader.strip(), answer.json()["items"][0]["name"])
        spdx_id = next(a["id"] for a in answer.json()["items"] if a["identity"] == SPDX_MACHINE_ID)
        sbom = httpx.get(f"{url}/api/v1/assets/{spdx_id}/sbom", headers=reading)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert answer.status_code == 200, answer.text
    identities = sorted((a["kind"], a["identity"]) for a in answer.json()["items"])
    assert identities == [("host", "0123456789abcdef0123456789abcdef"), ("host", SPDX_MACHINE_ID)]
    # the SPDX report is stored as it came: handed back as SPDX, the same document
    assert sbom.status_code == 200 and sbom.headers["content-type"].startswith(
        "application/spdx+json"
    )
    assert sbom.json() == json.loads(spdx_text)


SPDX_MACHINE_ID = "fedcba9876543210fedcba9876543210"


def _valid_spdx(text: str) -> None:
    """spdx-tools' own parser and full validator accept the document: SPDX 2.3."""
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    document = JsonLikeDictParser().parse(json.loads(text))
    assert validate_full_spdx_document(document) == []
    assert document.creation_info.spdx_version == "SPDX-2.3"


def _dashboard_renders(url: str, token: str, asset_name: str) -> None:
    """The dashboard's packaged templates and stylesheet load: the login form, its CSS, and
    the logged-in overview and asset list."""
    with httpx.Client(base_url=url) as browser:
        form = browser.get("/login")
        assert form.status_code == 200 and 'href="/static/dashboard.css"' in form.text
        css = browser.get("/static/dashboard.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        icon = browser.get("/favicon.ico")  # every browser asks for it (issue 18 §6)
        assert icon.status_code == 200 and icon.content.startswith(b"\0\0\1\0")
        csrf = form.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        login = browser.post("/login", data={"token": token, "csrf_token": csrf, "next": "/"})
        assert login.status_code == 303, login.text
        assert "Overview" in browser.get("/").text
        # without the break hints after the slashes of a name (a host named by its path here)
        assert f">{asset_name}<" in browser.get("/assets").text.replace("<wbr>", "")


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each backend for the installed service."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'attack.db'}"
        return
    import uuid

    import psycopg

    from tests.app.conftest import PG_ADMIN

    name = f"gpuprov_wheel_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_installed_gate_decides_only_on_stored_facts(
    installed: Installed, fresh_db: str, tmp_path: Path
) -> None:
    """The attacks of a caller holding a valid CI token, against the installed service: a
    backdated BOM, a forged Host, a laxer policy, a policy row altered in the database."""
    from sqlalchemy import create_engine, text

    from tests.app import boms
    from tests.app.test_gate_api import POLICY, _now, digest, image_bom, tampered
    from tests.fixtures import keys

    env = {**installed.env, "GPUPROV_DATABASE_URL": fresh_db}
    key, pub = keys.write_keypair(tmp_path / "keys", "gate", keys.generate("ecdsa"))
    env["GPUPROV_VSA_KEY_FILE"] = str(key)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return installed.gpuprov(env, *args)

    assert cli("db", "upgrade").returncode == 0
    admin = cli("token", "create", "--name", "ops", "--scope", "admin").stdout.strip()
    agent = cli("token", "create", "--name", "agent", "--scope", "report:write").stdout.strip()
    made = cli(
        "token", "create", "--name", "ci", "--scope", "gate,report:write", "--policy", "prod"
    )
    assert made.returncode == 0, made.stderr
    ci = made.stdout.strip()
    port = free_port()
    server = installed.serve(port, env)
    url = f"http://127.0.0.1:{port}"

    def call(
        method: str,
        path: str,
        token: str,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}", **(headers or {})}
        return httpx.request(method, f"{url}{path}", headers=headers, timeout=30, **kw)

    try:
        yaml = {"Content-Type": "application/yaml"}
        for name, document in (
            ("prod", POLICY),
            ("prod-lax", POLICY.split("rules:")[0].replace("prod", "prod-lax") + "rules: {}\n"),
        ):
            put = call("PUT", f"/api/v1/policies/{name}", admin, content=document, headers=yaml)
            assert put.status_code == 201, put.text
        bad = tampered("reg.example/ml/wheel:1")
        bad["metadata"]["timestamp"] = _now(1)
        cdx = {"Content-Type": "application/vnd.cyclonedx+json"}
        pushed = call("POST", "/api/v1/reports", agent, content=boms.encode(bad), headers=cdx)
        assert pushed.status_code == 201, pushed.text
        image = {"policy": "prod", "image": digest(bad)}
        assert call("POST", "/api/v1/gate", ci, json=image).json()["decision"] == "deny"
        # 1. the same image's BOM, verdict rewritten, three days old: refused, not signed
        forged = image_bom("reg.example/ml/wheel:1", timestamp=_now(72))
        refused = call("POST", "/api/v1/gate", ci, json={"policy": "prod", "bom": forged})
        assert refused.status_code == 409 and "not the latest" in refused.text
        # 2. a laxer stored policy: this token may not pick it
        lax = call("POST", "/api/v1/gate", ci, json={**image, "policy": "prod-lax"})
        assert lax.status_code == 403
        # 3. a forged Host on an allow: the VSA names the policy by URN
        clean = image_bom("reg.example/ml/clean:1", timestamp=_now(1))
        call("POST", "/api/v1/reports", agent, content=boms.encode(clean), headers=cdx)
        allowed = call(
            "POST",
            "/api/v1/gate",
            ci,
            json={"policy": "prod", "image": digest(clean)},
            headers={"Host": "evil.example.com"},
        ).json()
        assert allowed["decision"] == "allow", allowed
        vsa = tmp_path / "vsa.json"
        vsa.write_text(json.dumps(allowed["vsa"]))
        assert "evil" not in json.dumps(allowed)
        sha = allowed["policy"]["sha256"]
        ok = cli(
            "verify",
            digest(clean),
            "--bundle",
            str(vsa),
            "--key",
            str(pub),
            "--policy-name",
            "prod",
            "--policy-digest",
            f"sha256:{sha}",
            "--max-age",
            "1h",
        )
        assert ok.returncode == 0 and f"urn:gpuprov:policy:prod:1:sha256:{sha}" in ok.stdout, ok
        pinned = cli(
            "verify",
            digest(clean),
            "--bundle",
            str(vsa),
            "--key",
            str(pub),
            "--policy-name",
            "prod-lax",
        )
        assert pinned.returncode == 1 and "not the expected" in pinned.stderr
        # 4. the policy row altered behind the service's back: nothing is decided
        engine = create_engine(fresh_db)
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE promotion_policy SET document = :d WHERE name = 'prod'"),
                {"d": POLICY.split("rules:")[0] + "rules: {}\n"},
            )
        engine.dispose()
        altered = call("POST", "/api/v1/gate", ci, json=image)
        assert altered.status_code == 409 and "integrity check" in altered.text
        decisions = call("GET", "/api/v1/gate/decisions", admin).json()
        assert [d["decision"] for d in decisions["items"]] == ["allow", "deny"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_installed_service_checks_every_value_where_it_enters(
    installed: Installed, fresh_db: str, tmp_path: Path
) -> None:
    """Issue 17 §3 against the installed wheel: hostile YAML through the API, the dashboard and
    the CLI; a cookie that is not ASCII; an empty asset pattern; a key given twice; racing
    rotations of one token."""
    import threading

    from tests.app.test_entry_checks import HOSTILE_POLICIES

    env = {**installed.env, "GPUPROV_DATABASE_URL": fresh_db}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return installed.gpuprov(env, *args)

    assert cli("db", "upgrade").returncode == 0
    admin = cli("token", "create", "--name", "ops", "--scope", "admin").stdout.strip()
    unbound = cli("token", "create", "--name", "a", "--scope", "report:write", "--asset", "")
    assert unbound.returncode == 2 and "is empty" in unbound.stderr and unbound.stdout == ""
    root = tmp_path / "host"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "machine-id").write_text("0123456789abcdef0123456789abcdef\n")
    bom = tmp_path / "host.cdx.json"
    assert cli("scan", str(root), "-q", "-f", "cyclonedx", "-o", str(bom)).returncode == 0
    for case, (document, reason) in HOSTILE_POLICIES.items():
        policy = tmp_path / "policy.yaml"
        policy.write_text(document)
        gated = cli("gate", "--bom", str(bom), "--policy-file", str(policy))
        assert gated.returncode == 2, (case, gated.returncode, gated.stderr[-500:])  # not 1: deny
        assert reason in gated.stderr and "Traceback" not in gated.stderr, case

    port = free_port()
    server = installed.serve(port, env)
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {admin}"}
    try:
        yaml = {**auth, "Content-Type": "application/yaml"}
        with httpx.Client(base_url=url, timeout=60) as browser:
            form = browser.get("/login").text
            csrf = form.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
            login = browser.post("/login", data={"token": admin, "csrf_token": csrf})
            assert login.status_code == 303, login.text
            page = browser.get("/admin/policies").text
            session_csrf = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
            for case, (document, reason) in HOSTILE_POLICIES.items():
                put = httpx.put(f"{url}/api/v1/policies/prod", content=document, headers=yaml)
                assert put.status_code == 422 and reason in put.text, (case, put.status_code)
                posted = browser.post(
                    "/admin/policies",
                    data={"csrf_token": session_csrf, "name": "prod", "document": document},
                )
                assert posted.status_code == 422, (case, posted.status_code)
        cookie = {"Cookie": "gpuprov_session=abc.\u00e9".encode()}
        page = httpx.get(f"{url}/", headers=cookie)  # type: ignore[arg-type]
        assert page.status_code == 303
        twice = b'{"name": "a", "scopes": ["gate"], "scopes": ["admin"]}'
        json_auth = {**auth, "Content-Type": "application/json"}
        refused = httpx.post(f"{url}/api/v1/tokens", content=twice, headers=json_auth)
        assert refused.status_code == 422 and "duplicate key 'scopes'" in refused.text
        made = httpx.post(
            f"{url}/api/v1/tokens", json={"name": "ci", "scopes": ["gate"]}, headers=auth
        )
        token_id = made.json()["id"]
        barrier = threading.Barrier(6)
        statuses: list[int] = []

        def rotate() -> None:
            barrier.wait()
            answer = httpx.post(f"{url}/api/v1/tokens/{token_id}/rotate", headers=auth, timeout=60)
            statuses.append(answer.status_code)

        threads = [threading.Thread(target=rotate) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [201] + [409] * 5
        listed = httpx.get(f"{url}/api/v1/tokens", headers=auth).json()["items"]
        assert [t["name"] for t in listed].count("ci") == 2  # the token and one successor
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_installed_service_bounds_slow_and_large_bodies(
    installed: Installed, fresh_db: str, tmp_path: Path
) -> None:
    """Issue 17 §2 against the installed service: a body its caller may not send is answered
    before it is sent, a trickling token holds only its share of the ingest slots while an
    asset-bound agent's `gpuprov push` is stored, the tricklers answer 408, a client leaving
    mid-body is a 499 (no traceback), and a 100 KB header is refused."""
    from tests.app import boms
    from tests.app.test_bounded_cost import Trickler, answer_of, connect, send_head

    env = {
        **installed.env,
        "GPUPROV_DATABASE_URL": fresh_db,
        "GPUPROV_MAX_CONCURRENT_INGESTS": "4",
        "GPUPROV_BODY_TIMEOUT_SECONDS": "10",
        "GPUPROV_BODY_MIN_RATE": "100",
        "GPUPROV_METRICS_AUTH": "none",
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return installed.gpuprov(env, *args)

    assert cli("db", "upgrade").returncode == 0
    greedy = cli("token", "create", "--name", "ci", "--scope", "report:write").stdout.strip()
    gate_only = cli("token", "create", "--name", "gate", "--scope", "gate").stdout.strip()
    made = cli("token", "create", "--name", "agent", "--scope", "report:write", "--asset", "gpu-*")
    assert made.returncode == 0, made.stderr
    (installed.work / "bounded-agent.token").write_text(made.stdout)
    (installed.work / "bounded.cdx.json").write_bytes(
        boms.encode(boms.gpuprov_bom(kind="host", name="gpu-node-1"))
    )
    port = free_port()
    server = installed.serve(port, env)
    url = f"http://127.0.0.1:{port}"

    def metric(name: str) -> float:
        for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    slow: list[Trickler] = []
    try:
        # a 40 MB gate request from a token that may only gate digests: refused unsent
        with connect(port) as sock:
            headers = {"Authorization": f"Bearer {gate_only}", "Content-Type": "application/json"}
            send_head(sock, "POST", "/api/v1/gate", {**headers, "Content-Length": "40000000"})
            status, text = answer_of(sock)
            assert status == 413 and "image digest only" in text, text
        # four trickling pushes of one token: two slots (half of four), two refused at once
        cdx = {"Content-Type": "application/vnd.cyclonedx+json"}
        headers = {"Authorization": f"Bearer {greedy}", **cdx, "Content-Length": "10000000"}
        slow = [Trickler(port, "/api/v1/reports", headers, every=0.5) for _ in range(4)]
        deadline = time.monotonic() + 8
        while metric("gpuprov_ingests_refused_token_share_total") < 2:
            assert time.monotonic() < deadline, "the token's share was not enforced"
            time.sleep(0.1)
        assert metric("gpuprov_ingests_in_flight") == 2
        pushed = cli(
            "push", "bounded.cdx.json", "--server", url, "--token-file", "bounded-agent.token"
        )
        assert pushed.returncode == 0 and "stored" in pushed.stderr, pushed.stderr
        assert metric("gpuprov_ingests_in_flight") == 2  # the tricklers still trickle
        answers = [t.answer() for t in slow]
        assert sorted(status for status, _ in answers) == [408, 408, 503, 503], answers
        assert metric("gpuprov_ingests_in_flight") == 0
        # a client leaving mid-body, without a token: a 499, not a 500
        with connect(port) as sock:
            form = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "900"}
            send_head(sock, "POST", "/login", form)
            sock.sendall(b"token=")
        deadline = time.monotonic() + 8
        text = ""
        while 'route="/login",status="499"' not in text:
            assert time.monotonic() < deadline, "no 499 counted"
            time.sleep(0.1)
            text = httpx.get(f"{url}/metrics", timeout=30).text
        assert 'status="500"' not in text
        with connect(port) as sock:
            send_head(sock, "GET", "/healthz", {"X-Big": "a" * 100_000})
            try:
                refused = answer_of(sock)[0]
            except ConnectionResetError:
                # the server answered and closed with part of the head unread: TCP resets the
                # connection, and under load the reset can overtake the answer; never served
                refused = None
            assert refused in (400, 431, None)
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200  # still serving
    finally:
        for trickler in slow:
            trickler.close()
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr[-3000:]


def test_the_installed_service_signs_people_in_and_gates_keyless_ci(
    installed: Installed, fresh_db: str, tmp_path: Path
) -> None:
    """Issue 20 against the installed wheel: people sign in at a real OpenID Provider
    (oidc-provider under node) with the role their group gives, a person with no mapped group
    gets no session, a GitHub-shaped CI ID token gates an image under its trust rule's policy
    and is refused for another repository, another policy and once it has expired, a group
    mapping an admin stores gives an analyst who may change policies and, removed, ends her
    session, and a team's token sees only the assets an admin labelled for its team."""
    from tests.app.test_gate_api import digest, image_bom
    from tests.fixtures.ci_issuer import AUDIENCE, IssuerServer, github_claims
    from tests.fixtures.oidc import (
        CLIENT_ID,
        CLIENT_SECRET,
        RealProvider,
        modules_ready,
        sign_in_at_provider,
    )

    if not modules_ready():
        pytest.fail("oidc-provider is not installed: run `make oidc-provider` (npm ci)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    users = {
        "alice": {"email": "alice@example.com", "name": "Alice", "groups": ["gpuprov-admins"]},
        "bob": {"email": "bob@example.com", "name": "Bob", "groups": ["gpuprov-viewers"]},
        "carol": {"email": "carol@example.com", "name": "Carol", "groups": ["staff"]},
    }
    roles = {"gpuprov-admins": "admin", "gpuprov-viewers": "viewer"}
    (tmp_path / "op").mkdir()
    with IssuerServer() as issuers, RealProvider(tmp_path / "op", free_port(), [url]) as provider:
        provider.set_users(users)
        env = {
            **installed.env,
            "GPUPROV_DATABASE_URL": fresh_db,
            "GPUPROV_SECRET_KEY": "wheel-sso-secret-key-0123456789abcdef",
            "GPUPROV_ALLOW_LOOPBACK_ISSUERS": "1",
            "GPUPROV_OIDC_ISSUER": provider.issuer,
            "GPUPROV_OIDC_CLIENT_ID": CLIENT_ID,
            "GPUPROV_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "GPUPROV_OIDC_REDIRECT_URL": f"{url}/login/sso/callback",
            "GPUPROV_OIDC_ROLES": json.dumps(roles),
            "GPUPROV_CI_AUDIENCE": AUDIENCE,
        }

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return installed.gpuprov(env, *args)

        assert cli("db", "upgrade").returncode == 0
        admin = cli("token", "create", "--name", "ops", "--scope", "admin").stdout.strip()
        agent = cli("token", "create", "--name", "agent", "--scope", "report:write").stdout.strip()
        server = installed.serve(port, env)
        try:
            # people: the role comes from the group, no mapped group means no session
            with httpx.Client(timeout=30) as browser:
                landed = browser.get(sign_in_at_provider(browser, url, "alice", "/assets"))
                assert landed.status_code == 303 and landed.headers["location"] == "/assets"
                page = browser.get(f"{url}/assets")
                assert page.status_code == 200 and "alice@example.com · admin" in page.text
                assert browser.get(f"{url}/admin").status_code == 200
            with httpx.Client(timeout=30) as browser:
                assert browser.get(sign_in_at_provider(browser, url, "bob")).status_code == 303
                assert browser.get(f"{url}/assets").status_code == 200
                assert browser.get(f"{url}/admin").status_code == 403
            with httpx.Client(timeout=30) as browser:
                refused = browser.get(sign_in_at_provider(browser, url, "carol"))
                assert refused.status_code == 403 and "no access" in refused.text
                assert "gpuprov_user=" not in refused.headers.get("set-cookie", "")

            # keyless CI: policies, an image's report, a trust rule for acme/trainer's tags
            def call(method: str, path: str, token: str, **kw: Any) -> httpx.Response:
                headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
                return httpx.request(method, f"{url}{path}", headers=headers, timeout=30, **kw)

            yaml = {"Content-Type": "application/yaml"}
            for name in ("prod", "lax"):
                document = f"apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: {name}\n"
                document += "rules: {}\n"
                put = call("PUT", f"/api/v1/policies/{name}", admin, content=document, headers=yaml)
                assert put.status_code == 201, put.text
            bom = image_bom("registry.example/acme/trainer:1")
            cdx = {"Content-Type": "application/vnd.cyclonedx+json"}
            pushed = call("POST", "/api/v1/reports", agent, json=bom, headers=cdx)
            assert pushed.status_code == 201, pushed.text
            github = issuers.issuer("github")
            rule = {
                "issuer": github.url,
                "provider": "github",
                "claims": {
                    "repository_owner_id": "1001",
                    "repository_id": "2002",
                    "ref": "refs/tags/v*",
                },
                "scopes": ["gate"],
                "policies": ["prod"],
            }
            stored = call("PUT", "/api/v1/ci-trust/release", admin, json=rule)
            assert stored.status_code == 201, stored.text
            image = {"policy": "prod", "image": digest(bom)}
            allowed = call("POST", "/api/v1/gate", github.token(github_claims()), json=image)
            assert allowed.status_code == 200 and allowed.json()["decision"] == "allow", (
                allowed.text
            )
            another = github.token(github_claims(repository_id="31337"))
            assert call("POST", "/api/v1/gate", another, json=image).status_code == 401
            lax = call(
                "POST",
                "/api/v1/gate",
                github.token(github_claims()),
                json={**image, "policy": "lax"},
            )
            assert lax.status_code == 403, lax.text
            old = github.token(github_claims(), issued=time.time() - 3600)
            expired = call("POST", "/api/v1/gate", old, json=image)
            assert expired.status_code == 401 and "expired" in expired.text
            decisions = call("GET", "/api/v1/gate/decisions", admin).json()["items"]
            assert [d["token_name"] for d in decisions] == ["ci:release:acme/trainer"]

            # a group mapping an admin stores: carol's group now makes her an analyst in no
            # team, who may change policies; removed, she loses access at her next page
            mapped = call("PUT", "/api/v1/group-mappings/staff", admin, json={"role": "analyst"})
            assert mapped.status_code == 201, mapped.text
            with httpx.Client(timeout=30) as browser:
                assert browser.get(sign_in_at_provider(browser, url, "carol")).status_code == 303
                page = browser.get(f"{url}/admin/policies")
                assert page.status_code == 200 and "carol@example.com · analyst" in page.text
                assert browser.get(f"{url}/admin/tokens").status_code == 403
                gone = call("DELETE", "/api/v1/group-mappings/staff", admin)
                assert gone.status_code == 200, gone.text
                ended = browser.get(f"{url}/assets")
                assert (
                    ended.status_code == 303 and "ended=access-removed" in ended.headers["location"]
                )

            # teams: a team's token sees its team's assets only; another team's is not found
            other = image_bom("registry.example/prod/serving:1")
            pushed = call("POST", "/api/v1/reports", agent, json=other, headers=cdx)
            assert pushed.status_code == 201, pushed.text
            assets = {
                a["name"]: a["id"] for a in call("GET", "/api/v1/assets", admin).json()["items"]
            }
            for team in ("ml", "prod"):
                made = call("PUT", f"/api/v1/teams/{team}", admin, json={"labels": {"team": team}})
                assert made.status_code == 201, made.text
            for name, team in (
                ("registry.example/acme/trainer:1", "ml"),
                ("registry.example/prod/serving:1", "prod"),
            ):
                labelled = call(
                    "PUT",
                    f"/api/v1/assets/{assets[name]}/labels",
                    admin,
                    json={"labels": {"team": team}},
                )
                assert labelled.status_code == 200, labelled.text
            made = cli(
                "token",
                "create",
                "--name",
                "ml-reader",
                "--scope",
                "inventory:read",
                "--team",
                "ml",
            )
            assert made.returncode == 0, made.stderr
            reader = made.stdout.strip()
            seen = [a["name"] for a in call("GET", "/api/v1/assets", reader).json()["items"]]
            assert seen == ["registry.example/acme/trainer:1"]
            hidden = call(
                "GET", f"/api/v1/assets/{assets['registry.example/prod/serving:1']}", reader
            )
            assert hidden.status_code == 404
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr[-3000:]
