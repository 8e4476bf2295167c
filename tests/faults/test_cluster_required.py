"""The fault tests never pass by being skipped in CI: without a cluster they fail there."""

from __future__ import annotations

import pytest

from tests.faults.conftest import _unavailable


def test_no_cluster_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no initdb"):
        _unavailable("no initdb")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        _unavailable("no initdb")
