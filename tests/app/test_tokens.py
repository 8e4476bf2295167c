"""Token asset binding (a bound token reports only for the names its patterns match, exactly),
scopes, the secret hash and use interval, and the audit actor of a token."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.audit import Actor
from app.domain.tokens import Principal, Scope, hash_secret, use_is_due


def _principal(*patterns: str, scopes: frozenset[str] = frozenset({"report:write"})) -> Principal:
    return Principal(1, "agent", scopes, patterns)


@pytest.mark.parametrize(
    ("patterns", "name", "allowed"),
    [
        (("gpu-node-1",), "gpu-node-1", True),
        (("gpu-node-1",), "gpu-node-10", False),  # no prefix match
        (("gpu-node-1",), "gpu-node-", False),
        (("gpu-node-1",), "xgpu-node-1", False),
        (("gpu-node-1",), "GPU-NODE-1", False),  # no case folding
        (("gpu-node-*",), "gpu-node-7", True),
        (("gpu-node-*",), "GPU-NODE-7", False),
        (("gpu-node-?",), "gpu-node-10", False),
        (("db-*", "gpu-node-1"), "gpu-node-1", True),
        (("registry.example.com/team-a/*",), "registry.example.com/team-a/app:1", True),
        (("registry.example.com/team-a/*",), "registry.example.com/team-ab/app:1", False),
    ],
)
def test_asset_binding_is_exact(patterns: tuple[str, ...], name: str, allowed: bool) -> None:
    assert _principal(*patterns).may_report_for(name) is allowed


def test_an_unbound_token_reports_for_any_asset() -> None:
    assert _principal().may_report_for("anything")


def test_scopes_and_admin() -> None:
    reader = _principal(scopes=frozenset({"inventory:read"}))
    assert reader.has(Scope.INVENTORY_READ) and not reader.has(Scope.REPORT_WRITE)
    admin = _principal(scopes=frozenset({"admin"}))
    assert all(admin.has(scope) for scope in Scope)


def test_secret_hash_and_use_interval() -> None:
    assert hash_secret("gpv_x") == hashlib.sha256(b"gpv_x").hexdigest()
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def used(ago: timedelta) -> Principal:
        return Principal(1, "a", frozenset(), (), now - ago)

    assert use_is_due(_principal(), now)
    assert not use_is_due(used(timedelta(seconds=30)), now)
    assert not use_is_due(used(timedelta(minutes=1)), now)  # at most once a minute
    assert use_is_due(used(timedelta(minutes=1, seconds=1)), now)


def test_the_audit_log_names_the_token_that_acted() -> None:
    caller = Principal(7, "agent-7", frozenset({"admin"}), ("gpu-node-*",))
    assert caller.actor == Actor("api", "agent-7", 7)
    assert Principal(8, "agent-8", frozenset(), ()).actor == Actor("api", "agent-8", 8)
