"""Trust policies and signed reference catalogs for the service tests, built with the scanner's
own catalog code (`catalog_from_scan` on a report from `tests.app.boms`) and test keys."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from scanner.refcatalog.model import Catalog
from scanner.refcatalog.scan import catalog_from_scan
from scanner.verify.catalogs import sign_catalog
from tests.fixtures import keys

YAML = {"Content-Type": "application/yaml"}


def policy_yaml(*signers: tuple[str, PrivateKeyTypes], families: Sequence[str] = ("*",)) -> str:
    """A trust policy trusting each (name, key) for `families`, public keys inline."""
    lines = ["version: 1", "signers:"]
    for name, key in signers:
        lines += [
            f"  - name: {name}",
            f"    families: {json.dumps(list(families))}",
            "    key_pem: |",
            *("      " + line for line in keys.public_pem(key).decode().splitlines()),
        ]
    return "\n".join(lines) + "\n"


def catalog_from_bom(bom: dict[str, Any], name: str) -> Catalog:
    """The catalog `gpuprov catalog from-scan` makes of this report (a trusted golden scan)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "golden.cdx.json"
        report.write_text(json.dumps(bom))
        return catalog_from_scan(report, name)


def signed(catalog: Catalog, key: PrivateKeyTypes) -> bytes:
    """The DSSE envelope `gpuprov catalog sign --key` writes."""
    return sign_catalog(catalog.to_bytes(), key).to_json().encode()
