"""Service commands: `gpuprov serve`, `gpuprov db upgrade|current|prune`, `gpuprov token ...`.

`register(app)` adds them to a command line; the `gpuprov` entry (gpuprov/cli.py) composes
them with the scanner's. FastAPI, SQLAlchemy and uvicorn are imported inside the commands so
``gpuprov --help`` stays light. Secrets go to stdout alone; every message goes to stderr.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scanner.cli_common import StrictCommand, fail, say, split_list, typer_app
from scanner.terminal import printable

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

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


class LogLevel(StrEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"
    TRACE = "trace"


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
        raise fail(f"invalid settings: {problems}", EXIT_USAGE) from e


def _require_current_schema(settings: Settings, *, unreachable_ok: bool = False) -> None:
    """Refuse in one line a database this command cannot use: a SQLite file that does not exist
    (never created empty here), a schema behind the code or unknown to it, an unreachable
    server (unless `unreachable_ok`: a replica may start before its database)."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.storage.migrate import missing_sqlite_file, schema_state
    from app.storage.session import make_engine

    missing = missing_sqlite_file(settings.database_url)
    if missing is not None:
        raise fail(
            f"no database at {missing}: run `gpuprov db upgrade` to create it "
            "(or set GPUPROV_DATABASE_URL / --database-url to the one in use)",
            EXIT_FAILURE,
        )
    engine = make_engine(settings)
    try:
        state = schema_state(engine)
    except SQLAlchemyError as e:
        if unreachable_ok:
            return
        raise fail(f"cannot reach the database: {_first_line(e)}", EXIT_FAILURE) from e
    finally:
        engine.dispose()
    if not state.up_to_date:
        raise fail(state.describe(), EXIT_FAILURE)


def serve(
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option("--workers", min=1, help="worker processes")] = 1,
    log_level: Annotated[
        LogLevel, typer.Option("--log-level", help="uvicorn log level")
    ] = LogLevel.INFO,
) -> None:
    """Run the API service (settings from GPUPROV_* environment variables)."""
    import uvicorn

    from app.http.server import uvicorn_options

    # refuse bad settings and an unusable database here, in one line, before forking workers
    settings = _settings()
    _require_current_schema(settings, unreachable_ok=True)
    if not settings.secret_key:
        # one key for every worker, so a dashboard session works whichever worker answers
        os.environ["GPUPROV_SECRET_KEY"] = secrets.token_hex(32)
        say(
            "warning: GPUPROV_SECRET_KEY is not set: dashboard sessions are signed with a "
            "random key and end when the service restarts"
        )
    uvicorn.run(
        "app.main:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level.value,
        **uvicorn_options(settings.log_format, settings.forwarded_allow_ips),
    )


db_app = typer_app(help="Database schema.")


@db_app.command("upgrade", cls=StrictCommand)
def db_upgrade(
    database_url: DatabaseUrl = None,
    revision: Annotated[str, typer.Option("--revision", help="target revision")] = "head",
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
        raise fail(f"cannot migrate the database: {_first_line(e)}", EXIT_FAILURE) from e
    say(f"database schema is at revision {revision}")


@db_app.command("current", cls=StrictCommand)
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
        raise fail(f"cannot reach the database: {_first_line(e)}", EXIT_FAILURE) from e
    finally:
        engine.dispose()
    typer.echo(state.describe())
    if not state.up_to_date:
        raise typer.Exit(EXIT_FAILURE)


@db_app.command("prune", cls=StrictCommand)
def db_prune(
    keep_scans: Annotated[
        int | None,
        typer.Option(
            "--keep-scans",
            min=1,
            help="keep each asset's N newest scans; default $GPUPROV_RETENTION_KEEP_SCANS",
            show_default=False,
        ),
    ] = None,
    keep_days: Annotated[
        int | None,
        typer.Option(
            "--keep-days",
            min=1,
            max=36_500,
            help="keep each asset's scans of the last D days; default $GPUPROV_RETENTION_DAYS "
            "(with --keep-scans too, a scan stays while either keeps it)",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="count what would be pruned, change nothing")
    ] = False,
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", min=1, max=100_000, help="scans deleted per transaction"),
    ] = 1_000,
    database_url: DatabaseUrl = None,
) -> None:
    """Prune scan history past the retention rules; an asset's latest scan always stays."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.clock import utcnow
    from app.domain.retention import RetentionPolicy, prune
    from app.storage.session import Database

    settings = _settings(database_url)
    keep_scans = keep_scans if keep_scans is not None else settings.retention_keep_scans
    keep_days = keep_days if keep_days is not None else settings.retention_days
    if keep_scans is None and keep_days is None:
        raise fail(
            "nothing to prune by: give --keep-scans or --keep-days (or set "
            "GPUPROV_RETENTION_KEEP_SCANS / GPUPROV_RETENTION_DAYS)",
            EXIT_USAGE,
        )
    policy = RetentionPolicy(keep_scans, keep_days)
    _require_current_schema(settings)
    # a request's statement timeout is not meant for a fleet-wide maintenance query
    db = Database(settings.model_copy(update={"database_statement_timeout": 3600.0}))
    try:
        result = prune(db, policy, utcnow(), dry_run=dry_run, batch_size=batch_size)
    except SQLAlchemyError as e:
        raise _database_failure("cannot prune the scan history", e) from e
    finally:
        db.dispose()
    rows = result.rows
    verb = "would prune" if dry_run else "pruned"
    dropped = ", ".join(result.partitions) or "none"
    say(
        f"{verb} {rows.scan} scan(s) of {rows.asset} asset(s): raw reports {rows.raw_bom}, "
        f"library files {rows.artifact}, packages {rows.package}; whole partitions "
        f"{'to drop' if dry_run else 'dropped'}: {dropped}"
    )
    say(f"kept: {policy.describe()}")


token_app = typer_app(help="API tokens (work directly on the database).")


@token_app.command("create", cls=StrictCommand)
def token_create(
    name: Annotated[str, typer.Option("--name", help="who or what uses the token")],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="report:write, inventory:read, gate, triage, policy:write or admin (repeatable, "
            "or comma-separated)",
        ),
    ],
    asset: Annotated[
        list[str] | None,
        typer.Option(
            "--asset",
            help="asset-name pattern a report:write token may report for (repeatable)",
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help="the only policy a gate token may gate under (repeatable; default any)",
        ),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires",
            help="when the token stops working: a duration (30d, 12h, 2w), a date "
            "(2027-01-31, the start of that day UTC) or an RFC 3339 time; default never",
        ),
    ] = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team", help="the team whose asset scope confines the token (docs/teams.md)"
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a token and print its secret alone on stdout (shown only once)."""

    from app.clock import utcnow
    from app.domain.audit import cli_actor
    from app.domain.tokens import create_token, parse_expiry
    from app.errors import AppError

    scopes = split_list(scope)
    try:
        expires_at = parse_expiry(expires.strip(), utcnow()) if expires else None
    except AppError as e:
        raise fail(e.message, EXIT_USAGE) from e
    with _transaction(database_url, "cannot store the token", refused=EXIT_USAGE) as session:
        # typed on a command line: spaces around a value are not meant (an empty one is refused)
        patterns = [a.strip() for a in asset or []]
        new = create_token(
            session,
            name.strip(),
            scopes,
            patterns,
            expires_at=expires_at,
            actor=cli_actor(),
            policy_names=policy or [],
            team=team.strip() if team else None,
        )
        token_id = new.token.id
    until = f", expires {expires_at.isoformat()}" if expires_at else ""
    say(f"created token {token_id} {name!r} with scopes {', '.join(sorted(set(scopes)))}{until}")
    typer.echo(new.secret)


#: the fields of `token list`, in order (its header line)
TOKEN_LIST_FIELDS = ("id", "name", "prefix", "scopes", "state")


@token_app.command("list", cls=StrictCommand)
def token_list(database_url: DatabaseUrl = None) -> None:
    """List tokens (never their secrets): a header line, then one token a line, tab-separated."""

    from app.clock import utcnow
    from app.domain.teams import list_teams
    from app.domain.tokens import TokenState, list_tokens, token_state

    now = utcnow()
    with _transaction(database_url, "cannot list the tokens", write=False) as session:
        tokens_team = {team.id: team.name for team in list_teams(session)}
        lines = []
        for t in list_tokens(session):
            known = token_state(t, now)
            until = t.expires_at.isoformat() if t.expires_at else ""
            state = {
                TokenState.REVOKED: "revoked",
                TokenState.EXPIRED: f"expired {until}",
                TokenState.GRACE: f"in grace until {until}",
                TokenState.ACTIVE: f"expires {until}" if until else "active",
            }[known]
            if t.replaced_by_id is not None:
                state += f" replaced by {t.replaced_by_id}"
            assets = f" assets={','.join(t.asset_patterns)}" if t.asset_patterns else ""
            assets += f" policies={','.join(t.policy_names)}" if t.policy_names else ""
            assets += f" team={tokens_team[t.team_id]}" if t.team_id in tokens_team else ""
            # tab-separated fields, each printable: a name stored through the API could hold a
            # tab, a newline (a forged row) or an escape sequence for the terminal
            fields = (t.id, t.name, f"{t.prefix}…", ",".join(t.scopes), state + assets)
            lines.append("\t".join(printable(f) for f in fields))
    # the header names the fields (`tail -n +2` drops it; `cut -f2` still takes the names)
    typer.echo("\t".join(TOKEN_LIST_FIELDS))
    for line in lines:
        typer.echo(line)


#: the most a token file holds (a secret is 47 characters; a file this long holds none)
_MAX_SECRET_FILE = 4096


def _secret_of(path: Path) -> str:
    """The token secret a file holds (as `token create` wrote it), refused when unreadable."""
    try:
        with path.open("rb") as fh:
            data = fh.read(_MAX_SECRET_FILE + 1)
    except OSError as e:
        raise fail(f"cannot read {path}: {e.strerror or e}", EXIT_USAGE) from e
    try:
        secret = data.decode("ascii").strip()
    except UnicodeDecodeError:
        secret = ""
    if len(data) > _MAX_SECRET_FILE or not secret or not secret.isprintable():
        raise fail(f"{path} does not hold a token secret", EXIT_USAGE)
    return secret


@token_app.command("revoke", cls=StrictCommand)
def token_revoke(
    token_id: Annotated[
        int | None, typer.Argument(help="id from `gpuprov token list`", show_default=False)
    ] = None,
    secret_file: Annotated[
        Path | None,
        typer.Option(
            "--secret-file",
            help="revoke the token whose secret this file holds (as `token create` wrote it)",
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke a token, by id or by its secret (exactly one)."""

    from app.domain.audit import cli_actor
    from app.domain.tokens import revoke_by_secret, revoke_token

    if (token_id is None) == (secret_file is None):
        raise fail("give a token id or --secret-file FILE (one of them)", EXIT_USAGE)
    secret = _secret_of(secret_file) if secret_file is not None else None
    with _transaction(database_url, "cannot revoke the token") as session:
        if secret is not None:
            token_id = revoke_by_secret(session, secret, cli_actor()).id
        else:
            assert token_id is not None
            revoke_token(session, token_id, cli_actor())
    say(f"revoked token {token_id}")


@token_app.command("rotate", cls=StrictCommand)
def token_rotate(
    token_id: Annotated[int, typer.Argument(help="id from `gpuprov token list`")],
    grace: Annotated[
        str | None,
        typer.Option(
            "--grace",
            help="how long the old secret keeps working (15m, 24h, 7d); default: revoked now",
        ),
    ] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Replace a token's secret (same name, scopes, assets and lifetime); prints the new secret
    alone on stdout."""
    from datetime import timedelta

    from app.domain.audit import cli_actor
    from app.domain.tokens import parse_duration, rotate_token
    from app.errors import AppError

    try:
        period = parse_duration(grace.strip()) if grace else timedelta(0)
    except AppError as e:
        raise fail(e.message, EXIT_USAGE) from e
    with _transaction(database_url, "cannot rotate the token") as session:
        new = rotate_token(session, token_id, period, cli_actor())
        new_id = new.token.id
    old = f"works for {grace} more" if grace else "is revoked"
    say(f"token {token_id} rotated: the new token is {new_id}; the old secret {old}")
    typer.echo(new.secret)


@contextmanager
def _transaction(
    database_url: str | None, what: str, *, write: bool = True, refused: int = EXIT_FAILURE
) -> Iterator[Session]:
    """One command's transaction on a database at the current schema: the domain refusing
    (`AppError`) exits with ``refused`` and its message, a database failure says ``what``
    could not be done."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.errors import AppError
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        with db.transaction(write=write) as session:
            yield session
    except AppError as e:
        raise fail(e.message, refused) from e
    except SQLAlchemyError as e:
        raise _database_failure(what, e) from e
    finally:
        db.dispose()


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def _database_failure(what: str, e: Exception) -> typer.Exit:
    return fail(f"{what}: {_first_line(e)} (has `gpuprov db upgrade` run?)", EXIT_FAILURE)


def register(app: typer.Typer) -> None:
    """Add `serve`, `db` and `token` to a `gpuprov` command line."""
    app.command("serve", cls=StrictCommand)(serve)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")
