"""Build glue (everything else is in pyproject.toml): the wheel carries the Alembic migrations,
kept at the top level where `alembic` and the tests use them, as ``app/storage/migrations`` so
an installed gpuprov can ``db upgrade`` and ``serve``. Editable installs use the checkout's."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class BuildPyWithMigrations(build_py):
    """`build_py` that also copies ``migrations/`` into the built ``app.storage`` package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # app/storage/migrate.py finds the checkout's migrations/
        target = Path(self.build_lib) / "app" / "storage" / "migrations"
        for source in sorted(MIGRATIONS.rglob("*")):
            if source.suffix in (".py", ".mako") and "__pycache__" not in source.parts:
                copy = target / source.relative_to(MIGRATIONS)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy)


setup(cmdclass={"build_py": BuildPyWithMigrations})
