"""Start-up cost stays with the scans that need it: a fresh interpreter shows which modules
an import or a host scan loads (no timing: only what is in ``sys.modules``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _loaded_after(code: str, *prefixes: str) -> list[str]:
    probe = (
        f"{code}\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return list(eval(out))  # noqa: S307 - our own repr of a list of str


def test_classifier_table_does_not_load_elf_reader() -> None:
    # The service imports the classifier table; pyelftools and the rules stay unloaded.
    loaded = _loaded_after(
        "import scanner.detect.classifiers",
        "elftools",
        "scanner.detect.elf",
        "scanner.detect.identify",
    )
    assert loaded == []


def test_detect_package_names_still_resolve() -> None:
    from scanner.detect import CLASSIFIERS, analyze_elf, build_context

    assert CLASSIFIERS and callable(analyze_elf) and callable(build_context)


def test_host_scan_does_not_load_image_readers(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    code = (
        "from pathlib import Path\n"
        "from scanner.source import open_source\n"
        f"open_source({str(tmp_path / 'root')!r}, cache_dir=Path({str(tmp_path / 'c')!r}),"
        " use_cache=True, all_filesystems=False)"
    )
    loaded = _loaded_after(
        code, "scanner.source.image", "scanner.source.layercache", "scanner.source.tarlayer"
    )
    assert loaded == []


def test_host_rescan_loads_only_what_it_uses(tmp_path: Path) -> None:
    # A rescan of an unchanged host (the cache holds every file's facts and the CycloneDX
    # document) reads no file: no ELF reader, hashing pool, YAML, XML, sqlite or encoder library.
    root = tmp_path / "root"
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcudnn.so.9.1.0").write_bytes(b"\x7fELF" + b"\0" * 60)
    (root / "etc").mkdir()
    (root / "etc" / "hostname").write_text("lazy\n")
    argv = [str(root), "--cache-dir", str(tmp_path / "c"), "-q", "-f", "cyclonedx"]
    argv += ["-o", str(tmp_path / "bom.json")]
    code = (
        "import sys\n"
        "from gpuprov.cli import app\n"
        f"try:\n    app(['scan', *{argv!r}])\nexcept SystemExit:\n    pass\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    loaded = _loaded_after(
        code,
        "cyclonedx",
        "py_serializable",
        "elftools",
        "scanner.detect.elf",
        "scanner.source.layerstream",
        "scanner.node.tables",
        "yaml",
        "xml.etree",
        "sqlite3",
        "concurrent.futures",
    )
    assert loaded == []
    assert (tmp_path / "bom.json").read_text().startswith("{")
