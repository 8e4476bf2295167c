"""Former home of layer reading, kept only while branches in flight still import it: the
layer stream and limits are in `layerstream`, the tar parser in `tarlayer`, squashing in
`squash`, candidates in `candidates`, digests in `oci`. Import from those; this goes away."""

from scanner.source.candidates import collect_candidates, symlink_loops
from scanner.source.layerstream import Budget, LayerSpec, Limits, Readable
from scanner.source.oci import split_digest
from scanner.source.squash import Squashed, Tree, YieldCache, read_alias_targets, squash
from scanner.source.tarlayer import Entry, LayerYield, read_layer

__all__ = [
    "Budget",
    "Entry",
    "LayerSpec",
    "LayerYield",
    "Limits",
    "Readable",
    "Squashed",
    "Tree",
    "YieldCache",
    "collect_candidates",
    "read_alias_targets",
    "read_layer",
    "split_digest",
    "squash",
    "symlink_loops",
]
