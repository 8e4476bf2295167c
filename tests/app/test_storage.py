"""Schema: migrations match the models on both databases, start-up refuses a schema that is
behind, and the hot current-state queries are index-backed."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.main import SchemaBehindError, create_app
from app.settings import Settings
from app.storage.base import Base
from app.storage.migrate import head_revision, upgrade
from tests.app.conftest import Service


def test_models_and_migrations_agree(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert context.get_current_revision() == head_revision()
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_start_up_refuses_a_schema_that_is_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    app = create_app(Settings(database_url=url))
    with pytest.raises(SchemaBehindError, match=r"run `gpuprov db upgrade`"):
        with TestClient(app):
            pass
    upgrade(url)
    with TestClient(create_app(Settings(database_url=url))) as client:
        assert client.get("/readyz").json() == {"status": "ready", "schema": head_revision()}


def _plan(service: Service, sql: str, params: dict[str, object]) -> str:
    with service.db.session() as session:
        if service.backend == "postgresql":
            session.execute(text("SET LOCAL enable_seqscan = off"))
            rows = session.execute(text("EXPLAIN " + sql), params).scalars().all()
        else:
            rows = [r[-1] for r in session.execute(text("EXPLAIN QUERY PLAN " + sql), params)]
    return "\n".join(rows)


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (
            "SELECT count(DISTINCT asset_id) FROM asset_library WHERE family = :f "
            "AND version_key >= :lo AND version_key < :hi",
            # either (family, version_key, asset_id) or (family, version, asset_id): on an
            # empty table the planner's pick between the two is arbitrary; a seq scan is not
            "ix_asset_library_family_version",
        ),
        (
            "SELECT asset_id FROM artifact WHERE {current} AND sha256 = :s",
            "ix_artifact_current_sha256",
        ),
        (
            "SELECT id FROM artifact WHERE {current} AND asset_id = :a",
            "ix_artifact_current_asset_id",
        ),
    ],
)
def test_current_state_queries_use_their_indexes(service: Service, sql: str, index: str) -> None:
    # the predicate spelled the way SQLAlchemy renders `where(Artifact.is_current)` per dialect
    current = (
        "artifact.is_current" if service.backend == "postgresql" else "artifact.is_current = 1"
    )
    params = {"f": "cudnn", "lo": "0", "hi": "9", "s": "0" * 64, "a": 1}
    assert index in _plan(service, sql.format(current=current), params)
