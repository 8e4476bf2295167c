"""Session-scoped package builds shared by the catalog tests (built once: rpmbuild is slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.packages import (
    EXAMPLE_CUBLAS_RPM,
    EXAMPLE_CUDART_DEB,
    EXAMPLE_CUDNN_RPM,
    EXAMPLE_CUDNN_WHEEL_FILES,
    build_deb,
    build_rpm,
    build_wheel,
)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real packages built once per session: two RPMs, a .deb and a wheel."""
    out = tmp_path_factory.mktemp("built-packages")
    return {
        "cudnn_rpm": build_rpm(EXAMPLE_CUDNN_RPM, out),
        "cublas_rpm": build_rpm(EXAMPLE_CUBLAS_RPM, out),
        "cudart_deb": build_deb(EXAMPLE_CUDART_DEB, out),
        "cudnn_wheel": build_wheel(
            out,
            "nvidia-cudnn-cu12",
            "9.1.0.70",
            EXAMPLE_CUDNN_WHEEL_FILES,
            scripts={"cudnn-info": b"#!/bin/sh\necho cudnn\n"},
        ),
    }
