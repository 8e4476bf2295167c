"""Alembic environment: the database URL comes from the Alembic config when the service set it,
else from the service settings (``GPUPROV_DATABASE_URL``); the target is the storage metadata."""

from __future__ import annotations

import logging.config

from alembic import context
from sqlalchemy import create_engine, pool

from app.settings import Settings
from app.storage import tables  # noqa: F401  (registers every table on the metadata)
from app.storage.base import Base
from app.storage.session import POSTGRES_CONNECT_ARGS

config = context.config
if config.config_file_name is not None:
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = _url()
    arguments = POSTGRES_CONNECT_ARGS if url.startswith("postgresql") else {}
    engine = create_engine(url, poolclass=pool.NullPool, connect_args=arguments)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
