"""`Limits`: the resource caps every image source reads a layer under (a module of its own: a
host scan builds the scan's limits without loading the layer readers)."""

from __future__ import annotations

from msgspec import Struct

from scanner.errors import UnsafeArchiveError

MiB = 1 << 20
GiB = 1 << 30
#: Tar's block: the smallest extended header a limit may allow.
_BLOCK = 512
#: Directories nested in an extracted layer directory (`scanner.source.dirlayer`) that a scan
#: enters: the walk holds a descriptor for each directory above the entry it reads, so this
#: bounds its open descriptors (a tar layer holds none: its depth is bounded by the path's
#: length, ``max_header_bytes``). A deeper directory is recorded but not entered (``skipped``).
MAX_LAYER_DIR_DEPTH = 512


class Limits(Struct, frozen=True):
    """Resource caps that stop hostile layers (decompression bombs, entry floods).

    A compressed layer may expand to ``max(max_ratio * compressed size,
    ratio_allowance_bytes)``: real layers inflate 2-10 times, a zlib stream of zeros about
    1000 times, and the allowance keeps tiny layers of empty files legal. Every limit is
    checked while the layer streams (a bomb is refused after a bounded amount of inflating)
    and again on a layer taken from the cache, against the limits of *this* scan, so the
    verdict never depends on what the cache holds (`check_cached`).
    """

    max_ratio: float = 100.0
    ratio_allowance_bytes: int = 64 * MiB
    max_layer_bytes: int = 16 * GiB  # expanded bytes of one layer (cuDNN layers: 1-3 GB)
    max_image_bytes: int = 32 * GiB  # expanded bytes across all layers of one image
    max_file_bytes: int = 16 * GiB  # one tar entry
    max_entries: int = 5_000_000  # tar entries across all layers of one image
    max_header_bytes: int = MiB  # pax / GNU long-name data of one entry

    def __post_init__(self) -> None:
        for name in (
            "max_ratio",
            "max_layer_bytes",
            "max_image_bytes",
            "max_file_bytes",
            "max_entries",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive")
        if self.ratio_allowance_bytes < 0 or self.max_header_bytes < _BLOCK:
            raise ValueError("Limits.ratio_allowance_bytes must be >= 0, max_header_bytes >= 512")

    def ratio_cap(self, compressed: int) -> float:
        """Most expanded bytes a compressed layer of ``compressed`` bytes may yield."""
        return max(compressed * self.max_ratio, self.ratio_allowance_bytes)

    def check_layer(self, label: str, expanded: int, compressed: int | None) -> None:
        """Refuse a layer past ``max_layer_bytes`` or (``compressed`` given) the ratio cap."""
        if expanded > self.max_layer_bytes:
            raise UnsafeArchiveError(
                f"{label}: layer expands to more than {self.max_layer_bytes} bytes "
                "(limit max_layer_bytes, --max-layer-size)"
            )
        if compressed is not None and expanded > self.ratio_cap(compressed):
            raise UnsafeArchiveError(
                f"{label}: expands more than {self.max_ratio:g} times its compressed size of "
                f"{compressed} bytes (decompression bomb? limit max_ratio, --max-ratio)"
            )

    def check_image(self, label: str, expanded: int) -> None:
        if expanded > self.max_image_bytes:
            raise UnsafeArchiveError(
                f"{label}: image expands to more than {self.max_image_bytes} bytes "
                "(limit max_image_bytes, --max-size)"
            )

    def check_file(self, label: str, path: str, size: int) -> None:
        if size > self.max_file_bytes:
            raise UnsafeArchiveError(
                f"{label}: entry {path} of {size} bytes exceeds {self.max_file_bytes} "
                "(limit max_file_bytes)"
            )

    def check_header(self, label: str, size: int) -> None:
        if size > self.max_header_bytes:
            raise UnsafeArchiveError(
                f"{label}: a tar extended header of {size} bytes exceeds "
                f"{self.max_header_bytes} (limit max_header_bytes)"
            )
