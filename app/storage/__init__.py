"""Storage layer: SQLAlchemy models, the engine and sessions, migrations and repositories."""
