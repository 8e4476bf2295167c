"""Alembic glue: where the migrations live, upgrading a database, and the start-up schema check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(database_url: str) -> Config:
    """An Alembic configuration for the project's migrations and the given database."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision``."""
    command.upgrade(alembic_config(database_url), revision)


def head_revision() -> str:
    """The revision the code expects."""
    heads = ScriptDirectory(str(MIGRATIONS_DIR)).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads; expected exactly one")
    return heads[0]


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Where a database's schema stands against the code."""

    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        """A message that says what to run when the schema is behind."""
        if self.up_to_date:
            return f"database schema is at revision {self.head}"
        at = self.current or "none (empty database)"
        return (
            f"database schema is at revision {at} but this version of gpuprov needs {self.head}: "
            "run `gpuprov db upgrade`"
        )


def schema_state(engine: Engine) -> SchemaState:
    """Read the database's current revision (connects; raises on an unreachable database)."""
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    return SchemaState(current=current, head=head_revision())
