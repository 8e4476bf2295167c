"""The fault tests never pass by being skipped: without a cluster they fail, CI or not."""

from __future__ import annotations

import pytest

from tests.faults.conftest import _unavailable


@pytest.mark.parametrize("ci", ["true", None])
def test_no_cluster_fails(monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="no initdb"):
        _unavailable("no initdb")
