"""Scanned fixtures shared by the policy tests (each scanned once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.pipeline import ScanOptions, run_scan
from scanner.policy.facts import AssetFacts, facts_from_scan
from tests.scanner import scenarios as sc
from tests.scanner.policy import worlds


@pytest.fixture(scope="session")
def policy_world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "policy-world")


@pytest.fixture(scope="session")
def world_facts(policy_world: sc.World) -> AssetFacts:
    """The acceptance world as a host: tampered files, unowned copies, mixed cuDNN."""
    return facts_from_scan(run_scan(str(policy_world.root), ScanOptions(use_cache=False)))


@pytest.fixture(scope="session")
def image_facts(policy_world: sc.World) -> AssetFacts:
    """The same root as an OCI image, scanned without a trust policy."""
    target, _ = policy_world.image_target("oci")
    return facts_from_scan(run_scan(target, ScanOptions(use_cache=False)))


def _scanned(factory: pytest.TempPathFactory, name: str, build: object) -> AssetFacts:
    assert callable(build)
    root: Path = build(factory.mktemp(name))
    return worlds.scan_facts(root)


@pytest.fixture(scope="session")
def clean_facts(tmp_path_factory: pytest.TempPathFactory) -> AssetFacts:
    return _scanned(tmp_path_factory, "clean", worlds.clean_root)


@pytest.fixture(scope="session")
def pairing_facts(tmp_path_factory: pytest.TempPathFactory) -> AssetFacts:
    return _scanned(tmp_path_factory, "pairing", worlds.pairing_root)


@pytest.fixture(scope="session")
def old_driver_facts(tmp_path_factory: pytest.TempPathFactory) -> AssetFacts:
    return _scanned(tmp_path_factory, "old-driver", worlds.old_driver_root)


@pytest.fixture(scope="session")
def duplicate_facts(tmp_path_factory: pytest.TempPathFactory) -> AssetFacts:
    return _scanned(tmp_path_factory, "duplicate", worlds.duplicate_root)
