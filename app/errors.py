"""The service's one error type: `AppError(message, status)`, rendered by one handler.

Domain code raises these (it never imports FastAPI); the HTTP layer turns them into
``{"error": {"status", "message", "details"}}`` answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class AppError(Exception):
    """An error the client should see, with its HTTP status and optional structured details."""

    status: int = 500

    def __init__(
        self,
        message: str,
        status: int | None = None,
        *,
        details: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.details = list(details)
        self.headers = dict(headers or {})


class BadRequest(AppError):
    status = 400


class Unauthorized(AppError):
    status = 401

    def __init__(
        self, message: str = "missing or invalid bearer token", reason: str = "missing"
    ) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})
        #: for metrics and the failed-authentication limit: missing, invalid, revoked, expired
        self.reason = reason


class Forbidden(AppError):
    status = 403


class NotFound(AppError):
    status = 404


class Conflict(AppError):
    status = 409


class TooManyRequests(AppError):
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})


class PayloadTooLarge(AppError):
    status = 413


class UnsupportedMediaType(AppError):
    status = 415


class InvalidReport(AppError):
    """The body is not an acceptable CycloneDX report; details carry JSON pointers."""

    status = 422


class ServiceUnavailable(AppError):
    status = 503

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})


class StoredDocumentAltered(AppError):
    """A stored document (policy, trust policy, catalog) whose bytes no longer hash to the
    digest recorded when the service accepted it: changed behind the service's back. Nothing is
    decided on it (409); the HTTP layer records an audit event and counts it."""

    status = 409

    def __init__(self, kind: str, target: str, recorded: str, computed: str) -> None:
        super().__init__(
            f"the stored {kind.replace('_', ' ')} {target} fails its integrity check: its "
            f"content hashes to sha256 {computed}, not the {recorded} recorded when it was "
            "stored; nothing is decided on it. Store the document again (a new version) and "
            "find out who changed the database"
        )
        self.kind = kind
        self.target = target
        self.recorded = recorded
        self.computed = computed
