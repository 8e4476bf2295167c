"""Readiness: whether the database is reachable and its schema current (the ``/readyz`` answer).

Kept out of the route so the HTTP layer never touches the engine or SQLAlchemy's errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from app.storage.migrate import schema_state
from app.storage.session import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadyState:
    """The probe's verdict and the body that says why."""

    ready: bool
    body: dict[str, str]


def readiness(db: Database) -> ReadyState:
    """Ready when the database answers and its schema is at the head revision."""
    try:
        state = schema_state(db.engine)
    except SQLAlchemyError as e:
        # the driver's text names hosts, ports and databases: it goes to the log only
        log.warning("readiness: database unreachable: %s", str(e).splitlines()[0])
        return ReadyState(False, {"status": "unavailable", "database": "unreachable"})
    if not state.up_to_date:
        return ReadyState(False, {"status": "unavailable", "database": state.describe()})
    return ReadyState(True, {"status": "ready", "schema": state.head})
