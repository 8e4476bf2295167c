"""The one ``pkg:oci`` purl rule, used by the scanner's BOM and the service's normalized SBOM."""

from __future__ import annotations

import pytest

from scanner.imageref import oci_purl

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("reference", "platform", "expected"),
    [
        (
            f"localhost:5000/ml/train@{DIGEST}",
            None,
            f"pkg:oci/train@sha256:{'ab' * 32}?repository_url=localhost:5000/ml/train",
        ),
        (
            "reg.example/ML/Train:v1",
            "linux/arm64",
            f"pkg:oci/train@sha256:{'ab' * 32}"
            "?arch=arm64&repository_url=reg.example/ML/Train&tag=v1",
        ),
        ("layout", None, f"pkg:oci/layout@sha256:{'ab' * 32}"),
        ("", None, f"pkg:oci/image@sha256:{'ab' * 32}"),
    ],
)
def test_oci_purl(reference: str, platform: str | None, expected: str) -> None:
    assert oci_purl(reference, DIGEST, platform).to_string() == expected
