"""A PostgreSQL database created in the C locale is SQL_ASCII (Debian's `pg_createcluster` or
`initdb` where LANG is unset, a minimal container): psycopg then returns text as bytes, and
SQLAlchemy failed with a traceback at the first connection of `gpuprov db upgrade` (seen while
running docker-compose.yml on such a database). Both engines now ask for UTF-8: the schema is
migrated, the token commands work, and the service stores and answers a report whose label is
not ASCII."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.app.boms import encode, gpuprov_bom
from tests.app.conftest import JSON_HEADERS, PG_ADMIN, auth

GPUPROV = str(Path(sys.executable).parent / "gpuprov")


@pytest.fixture
def sql_ascii_url() -> Iterator[str]:
    name = f"gpuprov_ascii_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL at 127.0.0.1:5432 is required: {e}")
    with admin:
        admin.execute(
            f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'SQL_ASCII' "
            "LC_COLLATE 'C' LC_CTYPE 'C'"
        )
        try:
            yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _gpuprov(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPROV_")}
    env["GPUPROV_DATABASE_URL"] = url
    return subprocess.run([GPUPROV, *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_sql_ascii_database_is_migrated_and_served(sql_ascii_url: str) -> None:
    with psycopg.connect(sql_ascii_url.replace("+psycopg", "")) as probe:
        encoding = probe.execute("SHOW server_encoding").fetchone()
    assert encoding == (b"SQL_ASCII",)  # what psycopg returns there by default: bytes
    upgraded = _gpuprov(sql_ascii_url, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "Traceback" not in upgraded.stderr
    current = _gpuprov(sql_ascii_url, "db", "current")
    assert current.returncode == 0, current.stdout + current.stderr
    writer = _gpuprov(sql_ascii_url, "token", "create", "--name", "w", "--scope", "report:write")
    reader = _gpuprov(sql_ascii_url, "token", "create", "--name", "r", "--scope", "inventory:read")
    assert writer.returncode == 0 and reader.returncode == 0, writer.stderr + reader.stderr

    app = create_app(Settings(database_url=sql_ascii_url, environment="test"))
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        body = encode(gpuprov_bom(labels={"team": "Vision-Zürich-東京"}))
        stored = client.post(
            "/api/v1/reports", content=body, headers=auth(writer.stdout.strip(), **JSON_HEADERS)
        )
        assert stored.status_code in (200, 201), stored.text
        assets = client.get("/api/v1/assets", headers=auth(reader.stdout.strip()))
    assert assets.status_code == 200, assets.text
    [asset] = assets.json()["items"]
    assert asset["labels"]["team"] == "Vision-Zürich-東京"
