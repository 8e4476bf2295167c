"""Exception roots of the scanner, one per stage.

Exceptions mean an operation cannot continue; per-file problems are data (`model.Skipped`).
Adapters translate library errors at the edge with ``raise ... from e``.
"""


class ScannerError(Exception):
    """Base of every error the scanner reports to the user (message is user-facing)."""


class UsageError(ScannerError):
    """The command line or target specification is wrong."""


class SourceError(ScannerError):
    """The target cannot be opened or read as a root filesystem."""


class UnsafeArchiveError(SourceError):
    """An archive tried to escape its root or exceeded a resource limit."""


class CatalogError(ScannerError):
    """A package database cannot be read."""


class DetectError(ScannerError):
    """A file cannot be identified."""


class NotElfError(DetectError):
    """A file is not an ELF shared library at all (other bytes, or another kind of ELF file):
    whatever its name says, it is no GPU library (unlike a damaged ELF library)."""


class HashError(ScannerError):
    """A file cannot be read for hashing."""


class VerifyError(ScannerError):
    """A verification step cannot run (bad policy, unreadable signature, ...)."""


class OutputError(ScannerError):
    """A report cannot be written."""
