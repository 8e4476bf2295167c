"""Detect stage: which candidate files are GPU libraries, which family and exact version.

The classifier table (`classifiers`) decides by name which paths are candidates; `elf` reads
facts from a library's bytes; `context` reads the scan's metadata once; `identify` weighs, per
file, every piece of evidence; `consistency` then compares the identified libraries.

The names below are loaded on first use: importing `scanner.detect.classifiers` (as the
service does) must not pay for pyelftools and the identification rules. `identify` is
imported from its module, `scanner.detect.identify`: a package attribute of that name would be
replaced by the submodule as soon as it is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scanner.detect.classifiers import (
        CLASSIFIERS,
        DETECT_VERSION,
        Classifier,
        classify_name,
        is_candidate_path,
        is_metadata_path,
    )
    from scanner.detect.consistency import (
        fill_from_identical,
        fill_from_siblings,
        find_mixed_cudnn,
    )
    from scanner.detect.context import (
        DetectContext,
        DigestRecord,
        HeaderVersion,
        ToolkitVersion,
        build_context,
        digest_records,
    )
    from scanner.detect.elf import analyze_elf, analyze_elf_bytes, analyze_elf_region

_HOME = {
    "CLASSIFIERS": "classifiers",
    "DETECT_VERSION": "classifiers",
    "Classifier": "classifiers",
    "classify_name": "classifiers",
    "is_candidate_path": "classifiers",
    "is_metadata_path": "classifiers",
    "fill_from_identical": "consistency",
    "fill_from_siblings": "consistency",
    "find_mixed_cudnn": "consistency",
    "DetectContext": "context",
    "DigestRecord": "context",
    "HeaderVersion": "context",
    "ToolkitVersion": "context",
    "build_context": "context",
    "digest_records": "context",
    "analyze_elf": "elf",
    "analyze_elf_bytes": "elf",
    "analyze_elf_region": "elf",
}

__all__ = [
    "CLASSIFIERS",
    "Classifier",
    "DETECT_VERSION",
    "DetectContext",
    "DigestRecord",
    "HeaderVersion",
    "ToolkitVersion",
    "analyze_elf",
    "analyze_elf_bytes",
    "analyze_elf_region",
    "build_context",
    "classify_name",
    "digest_records",
    "fill_from_identical",
    "fill_from_siblings",
    "find_mixed_cudnn",
    "is_candidate_path",
    "is_metadata_path",
]


def __getattr__(name: str) -> object:
    """Load the submodule that defines ``name`` (PEP 562) and cache the name here."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
