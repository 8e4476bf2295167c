"""Alembic glue: where the migrations live, upgrading a database, and the start-up schema check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, make_url


def _migrations_dir() -> Path:
    """The wheel's copy beside this module (setup.py puts it there), else the checkout's
    top-level ``migrations/`` (an editable install, the tests)."""
    here = Path(__file__).resolve().parent
    installed = here / "migrations"
    if (installed / "env.py").is_file():
        return installed
    return here.parents[1] / "migrations"


MIGRATIONS_DIR = _migrations_dir()


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


def known_revisions() -> frozenset[str]:
    """Every revision these migrations know."""
    return frozenset(r.revision for r in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions())


def missing_sqlite_file(database_url: str) -> Path | None:
    """The file a SQLite URL names when it does not exist (connecting would create it empty);
    None for an existing file, an in-memory database or another kind of database."""
    url = make_url(database_url)
    name = url.database
    if url.get_backend_name() != "sqlite" or not name or name == ":memory:":
        return None
    if name.startswith("file:"):  # a URI filename (?uri=true): file:PATH?mode=...
        if url.query.get("mode") == "memory" or "mode=memory" in name:
            return None
        name = name.removeprefix("file:").split("?", 1)[0]
    path = Path(name)
    return None if path.exists() else path


@dataclass(frozen=True, slots=True)
class SchemaState:
    """Where a database's schema stands against the code."""

    current: str | None
    head: str
    known: bool = True  # False: a revision these migrations do not know (a newer gpuprov's)

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        """A message that says what to run when the schema is behind."""
        if self.up_to_date:
            return f"database schema is at revision {self.head}"
        if not self.known:
            return (
                f"database schema is at revision {self.current}, which this version of gpuprov "
                f"does not know (it needs {self.head}; a newer gpuprov migrated this database?)"
            )
        at = self.current or "none (empty database)"
        return (
            f"database schema is at revision {at} but this version of gpuprov needs {self.head}: "
            "run `gpuprov db upgrade`"
        )


def schema_state(engine: Engine) -> SchemaState:
    """Read the database's current revision (connects; raises on an unreachable database)."""
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    known = current is None or current in known_revisions()
    return SchemaState(current=current, head=head_revision(), known=known)
