"""Hypothesis profiles for the property tests: ``ci`` (the default: a short run, about 100
examples a property) and ``long`` (``HYPOTHESIS_PROFILE=long``: 20,000 examples a property, for a
run by hand or a nightly job; docs/limits.md). Tests that set ``max_examples`` themselves keep
it in ``ci`` and are scaled up by ``long``."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    database=None,  # no example files in the checkout; a failure prints its reproduction
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    parent=settings.get_profile("ci"),
    max_examples=20_000,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
