"""Events for webhooks (docs/webhooks.md): what happened, as facts the service stores, written to
the outbox (`WebhookDelivery`) in the caller's transaction, so an event exists exactly when the
change it reports is committed and survives the service dying before it is delivered.

Each endpoint gets the events it subscribed to that pass its filter (a minimum severity, asset
labels). A body is JSON with ``type``, ``timestamp``, ``data`` (the facts) and ``text``: a
Slack-compatible line in which every value from outside (asset names, advisory titles, rule
messages) is escaped as Slack's message format asks (& < >), so it cannot mention a channel or
forge a link.
"""

from __future__ import annotations

import json
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.storage.repositories import fleet as fleet_repo
from app.storage.repositories import vulnerabilities as vuln_repo
from app.storage.repositories import webhooks as repo
from app.storage.tables import Asset

ADVISORY_AFFECTED = "advisory.affected"
GATE_DENIED = "gate.denied"
INTEGRITY_MODIFIED = "integrity.modified"
DRIFT_OPENED = "drift.opened"
TOKEN_EXPIRING = "token.expiring"
#: the event types an endpoint may subscribe to
EVENTS = (ADVISORY_AFFECTED, GATE_DENIED, INTEGRITY_MODIFIED, DRIFT_OPENED, TOKEN_EXPIRING)
#: the type of the message "send test" posts (never stored in the outbox)
TEST_EVENT = "webhook.test"
SEVERITIES = ("low", "medium", "high", "critical")
#: assets named in one body at most (``asset_count`` says how many there are)
MAX_ASSETS = 100
#: files (or reasons) named in one body at most
MAX_ITEMS = 50


def slack_escape(text: str) -> str:
    """``text`` as Slack's mrkdwn shows it literally: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def new_message_id() -> str:
    """A ``webhook-id``: ``msg_`` and 128 random bits (no dot: the id is part of what is
    signed, ``id.timestamp.body``)."""
    return "msg_" + secrets.token_hex(16)


def iso(when: datetime) -> str:
    """RFC 3339 UTC with a Z."""
    return when.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One event before it is addressed: its facts, the assets it concerns (None: none, as for
    a token) and its severity (None: not a severity event, or unknown)."""

    type: str
    data: Mapping[str, Any]
    #: the Slack line for the assets an endpoint gets
    text: Callable[[Sequence[Mapping[str, Any]]], str]
    assets: Sequence[Mapping[str, Any]] | None = None
    severity: str | None = None
    #: a fixed id makes the event once-only per endpoint (token.expiring); None: a new one
    message_id: str | None = None


def asset_ref(asset: Asset) -> dict[str, Any]:
    """How a body names an asset (its labels are what endpoint filters read)."""
    return {"id": asset.id, "kind": asset.kind, "name": asset.name, "labels": dict(asset.labels)}


#: where a session keeps the enabled endpoints it read (`subscribers`)
_CACHE = "gpuprov.webhook_endpoints"


def subscribers(session: Session, event_type: str) -> list[repo.EndpointRoute]:
    """The enabled endpoints subscribed to ``event_type``. Read once per session (an ingest
    asks for three event types): endpoints change by admin requests, never inside the
    transaction of a change that emits events."""
    routes = session.info.get(_CACHE)
    if routes is None:
        routes = session.info[_CACHE] = repo.enabled_routes(session)
    return [r for r in routes if event_type in r.events]


def wanted(session: Session, event_type: str) -> bool:
    """Whether any enabled endpoint subscribes to ``event_type`` (work to find an event's facts
    is skipped otherwise)."""
    return bool(subscribers(session, event_type))


def severity_passes(minimum: str | None, severity: str | None) -> bool:
    """Whether an event of ``severity`` passes a ``min_severity`` filter. An event without a
    severity, or with one the feed did not give, passes: a filter never hides what it cannot
    rank."""
    if minimum is None or severity is None or severity.lower() not in SEVERITIES:
        return True
    return SEVERITIES.index(severity.lower()) >= SEVERITIES.index(minimum)


def labels_pass(wanted_labels: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether an asset's labels carry every label of the filter."""
    return all(labels.get(k) == v for k, v in wanted_labels.items())


def body_of(event: Event, assets: Sequence[Mapping[str, Any]] | None, now: datetime) -> str:
    """The exact JSON posted (and signed) for one endpoint."""
    data: dict[str, Any] = dict(event.data)
    if assets is not None:
        data["assets"] = [dict(a) for a in assets[:MAX_ASSETS]]
        data["asset_count"] = len(assets)
    document = {
        "type": event.type,
        "timestamp": iso(now),
        "data": data,
        "text": event.text(assets or ()),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def emit(session: Session, event: Event, now: datetime) -> int:
    """Write the event to the outbox of every enabled endpoint that subscribed to it and whose
    filter it passes, in the caller's transaction; the number of deliveries written."""
    endpoints = subscribers(session, event.type)
    if not endpoints:
        return 0
    message_id = event.message_id or new_message_id()
    rows: list[dict[str, Any]] = []
    for endpoint in endpoints:
        spec = endpoint.filter
        if not severity_passes(spec.get("min_severity"), event.severity):
            continue
        assets = event.assets
        if assets is not None:
            assets = [a for a in assets if labels_pass(spec.get("labels") or {}, a["labels"])]
            if not assets:
                continue
        rows.append(
            {
                "endpoint_id": endpoint.id,
                "message_id": message_id,
                "event_type": event.type,
                "body": body_of(event, assets, now),
                "created_at": now,
                "status": repo.PENDING,
                "attempts": 0,
                "next_attempt_at": now,
            }
        )
    repo.enqueue(session, rows)
    return len(rows)


def _names(assets: Sequence[Mapping[str, Any]], shown: int = 5) -> str:
    names = ", ".join(f"*{slack_escape(str(a['name']))}*" for a in assets[:shown])
    more = len(assets) - shown
    return names + (f" and {more} more" if more > 0 else "")


# -- the events --------------------------------------------------------------------------------


def gate_denied(session: Session, now: datetime, answer: Mapping[str, Any], asset: Asset) -> int:
    """A gate decision that denied promotion (``answer``: the gate's JSON, recorded)."""
    reasons = [
        {
            "rule": r.get("rule"),
            "action": r.get("action"),
            "message": r.get("message"),
            "controls": r.get("controls"),
        }
        for r in answer.get("reasons") or ()
    ]
    policy = answer.get("policy") or {}
    data = {
        "decision_id": answer.get("decision_id"),
        "decision": "deny",
        "policy": dict(policy),
        "subject": answer.get("subject"),
        "reasons": reasons[:MAX_ITEMS],
        "reason_count": len(reasons),
    }

    def text(_: Sequence[Mapping[str, Any]]) -> str:
        first = slack_escape(str(reasons[0]["message"])) if reasons else "no reason given"
        return (
            f":no_entry: Gate denied *{slack_escape(asset.name)}* under policy "
            f"{slack_escape(str(policy.get('name')))} v{policy.get('version')}: {first}"
            + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
        )

    return emit(session, Event(GATE_DENIED, data, text, assets=[asset_ref(asset)]), now)


def integrity_modified(
    session: Session,
    now: datetime,
    asset: Mapping[str, Any],
    scan_id: int,
    files: Sequence[Mapping[str, Any]],
) -> int:
    """A report whose files' integrity verdict is ``modified`` (not the bytes their package
    installed); ``asset``: its id, kind, name and labels with the report's."""
    modified = [f for f in files if f.get("integrity") == "modified"]
    if not modified or not wanted(session, INTEGRITY_MODIFIED):
        return 0
    data = {
        "scan_id": scan_id,
        "files": [
            {
                "path": f.get("path") or f.get("name"),
                "family": f.get("family"),
                "version": f.get("version"),
                "sha256": f.get("sha256"),
                "reason": f.get("integrity_reason"),
                "owner": f.get("owner_purl"),
            }
            for f in modified[:MAX_ITEMS]
        ],
        "file_count": len(modified),
    }

    def text(_: Sequence[Mapping[str, Any]]) -> str:
        first = slack_escape(str(modified[0].get("path") or modified[0].get("name")))
        return (
            f":warning: {len(modified)} GPU library file(s) on *{slack_escape(asset['name'])}* "
            f"differ from what their package installed (integrity: modified), e.g. `{first}`"
        )

    return emit(session, Event(INTEGRITY_MODIFIED, data, text, assets=[dict(asset)]), now)


def advisory_affected(session: Session, now: datetime, pairs: Iterable[tuple[int, str]]) -> int:
    """Assets newly affected by advisories: (asset id, CVE) pairs that had no ``affected``
    finding before this change (a feed import or a report); one event per CVE."""
    by_cve: dict[str, list[int]] = defaultdict(list)
    for asset_id, cve in pairs:
        by_cve[cve].append(asset_id)
    if not by_cve:
        return 0
    assets = repo.assets_by_id(session, sorted({a for ids in by_cve.values() for a in ids}))
    facts = _cve_facts(session, sorted(by_cve))
    written = 0
    for cve in sorted(by_cve):
        refs = [asset_ref(assets[a]) for a in sorted(set(by_cve[cve])) if a in assets]
        if not refs:
            continue
        f = facts.get(cve, {})
        written += emit(session, _advisory_event(cve, f, refs), now)
    return written


def _cve_facts(session: Session, cves: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for vuln, doc in vuln_repo.vulnerability_facts(session, cves):
        cur = out.setdefault(
            vuln.cve, {"bulletins": [], "severity": None, "cvss": None, "title": None}
        )
        if doc.tracking_id not in cur["bulletins"]:
            cur["bulletins"].append(doc.tracking_id)
        score = vuln.cvss if vuln.cvss is not None else -1.0
        if cur["cvss"] is None or score > cur["cvss"]:
            cur["cvss"] = vuln.cvss
            cur["severity"] = vuln.severity.lower() if vuln.severity else None
            cur["title"] = vuln.title
    for value in out.values():
        value["bulletins"].sort()
    return out


def _advisory_event(cve: str, f: Mapping[str, Any], refs: Sequence[Mapping[str, Any]]) -> Event:
    severity = f.get("severity")
    data = {
        "cve": cve,
        "bulletins": list(f.get("bulletins") or ()),
        # the publisher's text, untrusted: JSON-escaped here, Slack-escaped in ``text``
        "title": f.get("title"),
        "severity": severity,
        "cvss": f.get("cvss"),
    }

    def text(assets: Sequence[Mapping[str, Any]]) -> str:
        score = f" {f['cvss']:.1f}" if f.get("cvss") is not None else ""
        rank = f"{(severity or 'unknown severity').upper()}{score}"
        bulletins = ", ".join(slack_escape(str(b)) for b in f.get("bulletins") or ())
        title = slack_escape(" ".join(str(f.get("title") or "").split())[:300])
        return (
            f":rotating_light: {slack_escape(cve)} ({rank}"
            + (f", NVIDIA bulletin {bulletins}" if bulletins else "")
            + f") affects {len(assets)} asset(s): {_names(assets)}"
            + (f". {title}" if title else "")
        )

    return Event(ADVISORY_AFFECTED, data, text, assets=refs, severity=severity)


def drift_of_report(
    session: Session,
    now: datetime,
    asset: Mapping[str, Any],
    retired: Sequence[Mapping[Any, Any]],
    current: Sequence[Mapping[Any, Any]],
) -> int:
    """drift.opened for a scan that became an asset's latest (called before the fleet counts
    take it in): each library it brings with a digest the rest of the fleet does not run for
    that library while running another."""
    if not wanted(session, DRIFT_OPENED):
        return 0
    before = fleet_repo.digest_pairs(retired)
    added = fleet_repo.digest_pairs(current) - before
    held = fleet_repo.held_digests(session, {pair[:5] for pair in added})
    conflicts = []
    for pair in sorted(added, key=repr):
        group, sha256 = pair[:5], pair[5]
        # the fleet as it stands without this asset's own previous scan
        others = {
            digest: count - (1 if (*group, digest) in before else 0)
            for digest, count in held.get(group, {}).items()
        }
        known = sorted(d for d, n in others.items() if n > 0)
        if known and sha256 not in known:
            family, component, version, cuda_major, arch = group
            conflicts.append(
                {
                    "family": family,
                    "component": component,
                    "version": version,
                    "cuda_major": cuda_major,
                    "arch": arch,
                    "sha256": sha256,
                    "known": known[:10],
                    "paths": sorted(
                        str(a.get("path") or a.get("name"))
                        for a in current
                        if a.get("sha256") == sha256
                    )[:10],
                }
            )
    return drift_opened(session, now, asset, conflicts)


def drift_opened(
    session: Session,
    now: datetime,
    asset: Mapping[str, Any],
    conflicts: Sequence[Mapping[str, Any]],
) -> int:
    """A report brought a digest conflict into the fleet: a library file (family, component,
    version, CUDA major, architecture) whose new digest differs from the digests the fleet
    already runs for it."""
    if not conflicts:
        return 0
    data = {"conflicts": [dict(c) for c in conflicts[:MAX_ITEMS]], "conflict_count": len(conflicts)}

    def text(_: Sequence[Mapping[str, Any]]) -> str:
        c = conflicts[0]
        what = slack_escape(f"{c.get('component') or c.get('family')} {c.get('version')}")
        return (
            f":twisted_rightwards_arrows: Drift: *{slack_escape(asset['name'])}* runs {what} with "
            f"a digest the fleet has not seen for it ({len(c.get('known') or ())} other "
            "digest(s) in use)" + (f", and {len(conflicts) - 1} more" if len(conflicts) > 1 else "")
        )

    return emit(session, Event(DRIFT_OPENED, data, text, assets=[dict(asset)]), now)


def tokens_expiring(session: Session, now: datetime, within: timedelta) -> int:
    """Tokens in use that expire within ``within``: one event per token and expiry, once (its
    message id is fixed, and the outbox keeps one row per endpoint and message id)."""
    if not wanted(session, TOKEN_EXPIRING):
        return 0
    written = 0
    for token in repo.tokens_expiring(session, now, now + within):
        assert token.expires_at is not None
        expires = token.expires_at
        data = {
            "token": {"id": token.id, "name": token.name, "prefix": token.prefix},
            "scopes": list(token.scopes),
            "expires_at": iso(expires),
        }
        left = expires - now
        hours = int(left.total_seconds() // 3600)
        name = slack_escape(token.name)

        def text(_: Sequence[Mapping[str, Any]], name: str = name, hours: int = hours) -> str:
            return (
                f":hourglass: API token *{name}* expires in "
                f"{hours // 24} d {hours % 24} h; rotate it before its agents stop reporting"
            )

        message_id = f"msg_token_{token.id}_{int(expires.timestamp())}"
        written += emit(session, Event(TOKEN_EXPIRING, data, text, message_id=message_id), now)
    return written
