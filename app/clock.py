"""The service's clock: timezone-aware UTC now, for every layer (a leaf: imports nothing of app)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware."""
    return datetime.now(UTC)
