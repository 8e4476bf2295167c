"""Detect stage: which candidate files are GPU libraries, which family and exact version.

The classifier table (`classifiers`) decides by name which paths are candidates; `elf` reads
facts from a library's bytes; `context` reads the scan's metadata once; `identify` weighs, per
file, every piece of evidence; `consistency` then compares the identified libraries.
"""

from scanner.detect.classifiers import (
    CLASSIFIERS,
    DETECT_VERSION,
    Classifier,
    classify_name,
    is_candidate_path,
    is_metadata_path,
)
from scanner.detect.consistency import fill_from_identical, fill_from_siblings, find_mixed_cudnn
from scanner.detect.context import (
    DetectContext,
    DigestRecord,
    HeaderVersion,
    ToolkitVersion,
    build_context,
    digest_records,
)
from scanner.detect.elf import analyze_elf, analyze_elf_bytes, analyze_elf_region
from scanner.detect.identify import identify

__all__ = [
    "CLASSIFIERS",
    "DETECT_VERSION",
    "Classifier",
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
    "identify",
    "is_candidate_path",
    "is_metadata_path",
]
