"""Service commands (`gpuprov serve`, `gpuprov db upgrade`, `gpuprov token ...`) and `main()`,
which assembles the whole `gpuprov` command line.

FastAPI, SQLAlchemy and uvicorn are imported inside the commands so ``gpuprov --help`` and the
scanner's commands start fast. Secrets go to stdout alone; every message goes to stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from app.settings import Settings

EXIT_FAILURE = 1
EXIT_USAGE = 2

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL; default $GPUPROV_DATABASE_URL or sqlite:///./gpuprov.db",
        show_default=False,
    ),
]


def _err(message: str) -> None:
    typer.echo(message, err=True)


def _settings(database_url: str | None = None) -> Settings:
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        if database_url:
            return Settings(database_url=database_url)
        return Settings()
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, x['loc'])) or 'settings'}: {x['msg']}" for x in e.errors()
        )
        _err(f"gpuprov: invalid settings: {problems}")
        raise typer.Exit(EXIT_USAGE) from e


def _require_current_schema(settings: Settings, *, unreachable_ok: bool = False) -> None:
    """Refuse in one line a database this command cannot use: a SQLite file that does not exist
    (never created empty here), a schema behind the code or unknown to it, an unreachable
    server (unless `unreachable_ok`: a replica may start before its database)."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.storage.migrate import missing_sqlite_file, schema_state
    from app.storage.session import make_engine

    missing = missing_sqlite_file(settings.database_url)
    if missing is not None:
        _err(
            f"gpuprov: no database at {missing}: run `gpuprov db upgrade` to create it "
            "(or set GPUPROV_DATABASE_URL / --database-url to the one in use)"
        )
        raise typer.Exit(EXIT_FAILURE)
    engine = make_engine(settings)
    try:
        state = schema_state(engine)
    except SQLAlchemyError as e:
        if unreachable_ok:
            return
        _err(f"gpuprov: cannot reach the database: {str(e).splitlines()[0]}")
        raise typer.Exit(EXIT_FAILURE) from e
    finally:
        engine.dispose()
    if not state.up_to_date:
        _err(f"gpuprov: {state.describe()}")
        raise typer.Exit(EXIT_FAILURE)


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Run the API service (settings from GPUPROV_* environment variables)."""
    import uvicorn

    from app.http.server import uvicorn_options

    # refuse bad settings and an unusable database here, in one line, before forking workers
    _require_current_schema(_settings(), unreachable_ok=True)
    uvicorn.run(
        "app.main:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        **uvicorn_options(),
    )


db_app = typer.Typer(help="Database schema.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(
    database_url: DatabaseUrl = None,
    revision: Annotated[str, typer.Option(help="target revision")] = "head",
) -> None:
    """Apply the migrations (creates the SQLite file when needed)."""
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    from app.storage.migrate import upgrade

    settings = _settings(database_url)
    try:
        upgrade(settings.database_url, revision)
    except (SQLAlchemyError, CommandError) as e:
        # CommandError: a revision these migrations do not know (the database's, or --revision)
        _err(f"gpuprov: cannot migrate the database: {str(e).splitlines()[0]}")
        raise typer.Exit(EXIT_FAILURE) from e
    _err(f"database schema is at revision {revision}")


@db_app.command("current")
def db_current(database_url: DatabaseUrl = None) -> None:
    """Say whether the database schema is current."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.storage.migrate import missing_sqlite_file, schema_state
    from app.storage.session import make_engine

    settings = _settings(database_url)
    missing = missing_sqlite_file(settings.database_url)
    if missing is not None:  # connecting would create it: say so, create nothing
        typer.echo(f"no database at {missing}: run `gpuprov db upgrade` to create it")
        raise typer.Exit(EXIT_FAILURE)
    engine = make_engine(settings)
    try:
        state = schema_state(engine)
    except SQLAlchemyError as e:
        _err(f"gpuprov: cannot reach the database: {str(e).splitlines()[0]}")
        raise typer.Exit(EXIT_FAILURE) from e
    finally:
        engine.dispose()
    typer.echo(state.describe())
    if not state.up_to_date:
        raise typer.Exit(EXIT_FAILURE)


token_app = typer.Typer(help="API tokens (work directly on the database).", no_args_is_help=True)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="who or what uses the token")],
    scope: Annotated[
        list[str],
        typer.Option("--scope", help="report:write, inventory:read, gate or admin (repeatable)"),
    ],
    asset: Annotated[
        list[str] | None,
        typer.Option("--asset", help="asset-name pattern a report:write token may report for"),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a token and print its secret alone on stdout (shown only once)."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.domain.tokens import create_token
    from app.errors import AppError
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        with db.transaction(write=True) as session:
            new = create_token(session, name, scope, asset or [])
            token_id = new.token.id
    except AppError as e:
        _err(f"gpuprov: {e.message}")
        raise typer.Exit(EXIT_USAGE) from e
    except SQLAlchemyError as e:
        _err(
            f"gpuprov: cannot store the token: {str(e).splitlines()[0]} "
            "(has `gpuprov db upgrade` run?)"
        )
        raise typer.Exit(EXIT_FAILURE) from e
    finally:
        db.dispose()
    _err(f"created token {token_id} {name!r} with scopes {', '.join(sorted(set(scope)))}")
    typer.echo(new.secret)


@token_app.command("list")
def token_list(database_url: DatabaseUrl = None) -> None:
    """List tokens (never their secrets)."""
    from app.domain.tokens import list_tokens
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        with db.transaction() as session:
            for t in list_tokens(session):
                state = "revoked" if t.revoked_at else "active"
                assets = f" assets={','.join(t.asset_patterns)}" if t.asset_patterns else ""
                typer.echo(f"{t.id}\t{t.name}\t{t.prefix}…\t{','.join(t.scopes)}\t{state}{assets}")
    finally:
        db.dispose()


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="id from `gpuprov token list`")],
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke a token."""
    from app.domain.tokens import revoke_token
    from app.errors import AppError
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        with db.transaction(write=True) as session:
            revoke_token(session, token_id)
    except AppError as e:
        _err(f"gpuprov: {e.message}")
        raise typer.Exit(EXIT_FAILURE) from e
    finally:
        db.dispose()
    _err(f"revoked token {token_id}")


def register(app: typer.Typer) -> None:
    """Add the service commands to the `gpuprov` command line."""
    app.command("serve")(serve)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")


def main() -> None:
    """Entry point of the ``gpuprov`` console script: scanner, agent and service commands."""
    import sys

    from scanner.cli import app, register_all

    register_all(sys.argv)
    register(app)
    app()
