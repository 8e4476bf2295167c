"""Settings: the GPUPROV_ prefix, the psycopg 3 driver, and unsafe defaults refused."""

import pytest
from pydantic import ValidationError

from app.settings import Settings


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_DATABASE_URL", raising=False)
    assert Settings().database_url == "sqlite:///./gpuprov.db"
    monkeypatch.setenv("GPUPROV_DATABASE_URL", "postgresql://u@db:5432/gpuprov")
    monkeypatch.setenv("GPUPROV_MAX_REPORT_BYTES", "2048")
    settings = Settings()
    assert settings.database_url == "postgresql+psycopg://u@db:5432/gpuprov"
    assert settings.max_report_bytes == 2048 and not settings.is_sqlite


def test_production_needs_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_SECRET_KEY", raising=False)
    monkeypatch.setenv("GPUPROV_ENVIRONMENT", "production")
    with pytest.raises(ValidationError, match="GPUPROV_SECRET_KEY"):
        Settings()
    monkeypatch.setenv("GPUPROV_SECRET_KEY", "s3cret-from-a-vault")
    assert Settings().environment == "production"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GPUPROV_DATABASE_STATEMENT_TIMEOUT", "0"),
        ("GPUPROV_DATABASE_POOL_TIMEOUT", "-1"),
        ("GPUPROV_MAX_FILTER_VALUES", "0"),
        ("GPUPROV_MAX_FILTER_VALUES", "100000"),
        # past what the arithmetic holds: zlib's max_length, a SQLite INTEGER, a header
        ("GPUPROV_MAX_REPORT_BYTES", str(2**63)),
        ("GPUPROV_RETENTION_KEEP_SCANS", str(2**63)),
        ("GPUPROV_RETRY_AFTER_SECONDS", str(2**63)),
        ("GPUPROV_MAX_REPORT_COMPONENTS", str(2**63)),
        ("GPUPROV_MAX_COMPONENT_PROPERTIES", str(10**9)),
        ("GPUPROV_BODY_TIMEOUT_SECONDS", "0"),
        ("GPUPROV_BODY_MIN_RATE", "0"),
        ("GPUPROV_BODY_MIN_RATE", str(2**63)),
        ("GPUPROV_MAX_ASSET_LABELS", "0"),
        ("GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN", "0"),
    ],
)
def test_limits_that_would_disable_a_bound_are_refused(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=variable.removeprefix("GPUPROV_").lower()):
        Settings()


def test_a_token_gets_half_the_slots_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().ingests_per_token == 4  # of 8
    assert Settings(max_concurrent_ingests=1).ingests_per_token == 1
    assert Settings(max_concurrent_ingests=5).ingests_per_token == 2
    explicit = Settings(max_concurrent_ingests=8, max_concurrent_ingests_per_token=8)
    assert explicit.ingests_per_token == 8
    monkeypatch.setenv("GPUPROV_MAX_CONCURRENT_INGESTS", "4")
    monkeypatch.setenv("GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN", "5")
    with pytest.raises(ValidationError, match="is more than GPUPROV_MAX_CONCURRENT_INGESTS"):
        Settings()


@pytest.mark.parametrize(("value", "read"), [("prod", "prod"), (" prod ", "prod"), ("", None)])
def test_the_dashboard_default_policy(
    monkeypatch: pytest.MonkeyPatch, value: str, read: str | None
) -> None:
    monkeypatch.setenv("GPUPROV_DEFAULT_POLICY", value)
    assert Settings().default_policy == read
    monkeypatch.setenv("GPUPROV_DEFAULT_POLICY", "p" * 129)
    with pytest.raises(ValidationError, match="default_policy"):
        Settings()


def test_trusted_authors_are_a_comma_separated_list() -> None:
    assert Settings().trusted_authors == frozenset()
    listed = Settings(vex_trusted_authors=" alice, ,security@example.com,alice ")
    assert listed.trusted_authors == {"alice", "security@example.com"}
