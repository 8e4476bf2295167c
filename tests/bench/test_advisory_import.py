"""bench/advisory_import.py on one year of the shared bulletins, so the benchmark cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scanner.advisories.documents import PSIRT

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")
def test_advisory_import_bench_on_one_year() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "advisory_import.py"), str(PSIRT / "2022")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    bulletins = len([p for p in (PSIRT / "2022").iterdir() if p.is_dir()])
    for db in ("sqlite", "postgresql"):
        assert out[db]["imported"] == bulletins == out[db]["unchanged_on_reimport"]
        assert out[db]["refused"] == 0 and out[db]["first_import_s"] > 0
