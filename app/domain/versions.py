"""The service's view of version rules: the scanner's single copy (scanner/versions.py).

Kept as a module so the service's imports read as domain code; nothing is defined here.
"""

from scanner.versions import (
    VersionFilter,
    normalize_version,
    parse_version_filter,
    version_key,
    version_matches,
)

__all__ = [
    "VersionFilter",
    "normalize_version",
    "parse_version_filter",
    "version_key",
    "version_matches",
]
