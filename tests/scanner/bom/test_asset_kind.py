"""Which BOMs describe an asset (`scanner.bom.foreign.asset_of`, read alike by the service's
ingest and `gpuprov gate --bom`): images and hosts, each shape other tools write for them, and
the refusal of anything else with its reason."""

from __future__ import annotations

from typing import Any

import pytest

from scanner import vocabulary as v
from scanner.bom.foreign import NotAnAsset, asset_of

DECLARED_HOST = [{"name": v.ASSET_KIND, "value": "host"}]


@pytest.mark.parametrize(
    ("component", "operating_system", "kind"),
    [
        ({"type": "container", "name": "reg/x:1"}, False, "image"),
        ({"type": "operating-system", "name": "node-1"}, False, "host"),  # gpuprov scan /
        ({"type": "application", "name": "/"}, True, "host"),  # trivy rootfs /
        ({"type": "file", "name": "/host"}, True, "host"),  # syft dir:/host
        ({"type": "application", "name": "app", "properties": DECLARED_HOST}, False, "host"),
    ],
)
def test_images_and_hosts(component: dict[str, Any], operating_system: bool, kind: str) -> None:
    head = asset_of({"component": component}, operating_system=operating_system)
    assert head.kind == kind


@pytest.mark.parametrize(
    ("metadata", "subject"),
    [
        (
            {"component": {"type": "application", "name": "gpuprov", "purl": "pkg:pypi/g@1"}},
            "an application 'gpuprov' ('pkg:pypi/g@1') and the BOM lists no operating system",
        ),
        (
            {"component": {"type": "library", "name": "torch"}},
            "a library 'torch' and the BOM lists no operating system",
        ),
        (
            {"component": {"type": "file", "name": "./src"}},
            "a file './src' and the BOM lists no operating system",
        ),
        (
            {"component": {"name": "x"}},
            "a component without a type 'x' and the BOM lists no operating system",
        ),
        ({}, "missing"),
    ],
)
def test_anything_else_is_refused_saying_why(metadata: dict[str, Any], subject: str) -> None:
    with pytest.raises(NotAnAsset) as refused:
        asset_of(metadata, operating_system=False)
    message = str(refused.value)
    assert message.startswith(
        f"the BOM describes neither an image nor a host: its metadata.component is {subject}; "
        "accepted: an image (metadata.component of type 'container'), a host"
    ), message
