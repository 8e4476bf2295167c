"""`gpuprov webhooks deliver`: one run of the webhook delivery worker (docs/webhooks.md), for
installs that deliver from a CronJob instead of (or besides) the service's own worker
(GPUPROV_WEBHOOK_WORKER_SECONDS=0). Claims never overlap, so both may run at once."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from scanner.cli_common import StrictCommand, out, typer_app

webhooks_app = typer_app(help="Webhook deliveries (work directly on the database).")


@webhooks_app.command("deliver", cls=StrictCommand)
def deliver(
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, max=1_000_000, help="attempts made at most in this run"),
    ] = 1000,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="SQLAlchemy URL; default $GPUPROV_DATABASE_URL or sqlite:///./gpuprov.db",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Deliver the webhook events that are due now (retries included) and write the
    token.expiring events that are due; prints what was done as JSON. Exit 0 even when
    receivers failed (their deliveries are retried later); 1 when the database failed."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.cli import _database_failure, _require_current_schema, _settings
    from app.domain.webhook_delivery import delivery_config, run_once
    from app.storage.session import Database

    settings = _settings(database_url)
    _require_current_schema(settings)
    db = Database(settings)
    try:
        summary = run_once(db, delivery_config(settings), limit=limit)
    except SQLAlchemyError as e:
        raise _database_failure("cannot deliver webhooks", e) from e
    finally:
        db.dispose()
    out(json.dumps(summary.as_dict(), sort_keys=True))


def register(app: typer.Typer) -> None:
    """Add `webhooks` to a `gpuprov` command line."""
    app.add_typer(webhooks_app, name="webhooks")
