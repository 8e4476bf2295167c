"""The conditions a bulletin puts on being affected that a host's own facts can decide: their
names (the matcher's, scanner/advisories/match.py), the values a fact may hold, and the form a
reported fact must have (docs/advisories.md, "Conditions").

Pure: a node scan produces these facts (scanner/node/conditions.py), a host's BOM carries them as
``gpuprov:condition:<name>`` properties of its ``metadata.component``, and the service and the
offline gate read them back through `check_fact`. A fact may name several values joined by
``|`` ("false|true": the host can take either path); the matcher's condition holds when any of
them is the one the bulletin names. A fact that is absent is undecided, never a default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

#: the BOM's property names (scanner/vocabulary.py; repeated here to keep this module a leaf)
PROPERTY_PREFIX: Final = "gpuprov:condition:"
SOURCE_SUFFIX: Final = ":source"
#: the longest source text kept (where a fact was read)
MAX_SOURCE: Final = 2048

CDI_MODE: Final = "cdi_mode"
LDCONFIG_FROM_CONTAINER: Final = "ldconfig_from_container"
CUDA_COMPAT_LIBS_FROM_CONTAINER: Final = "cuda_compat_libs_from_container"
VGPU_GUEST: Final = "vgpu_guest"
VGPU_HOST: Final = "vgpu_host"
GPU_ARCHITECTURE: Final = "gpu_architecture"

_BOOLEAN: Final = frozenset({"true", "false"})
#: the host conditions and the values each may hold; None: architecture tokens ("hopper",
#: "ada-lovelace", "kepler-desktop")
HOST_CONDITIONS: Final[Mapping[str, frozenset[str] | None]] = {
    CDI_MODE: _BOOLEAN,
    LDCONFIG_FROM_CONTAINER: _BOOLEAN,
    CUDA_COMPAT_LIBS_FROM_CONTAINER: _BOOLEAN,
    VGPU_GUEST: _BOOLEAN,
    VGPU_HOST: _BOOLEAN,
    GPU_ARCHITECTURE: None,
}
_TOKEN: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
#: at most this many values in one fact (a host's distinct GPU architectures)
MAX_VALUES: Final = 16


class BadFact(ValueError):
    """A reported condition fact that is not of its condition's form; the message says why."""


def join(values: Iterable[str]) -> str:
    """One fact of several values: sorted, distinct, joined by ``|``."""
    return "|".join(sorted(set(values)))


def check_fact(name: str, value: str) -> str:
    """The fact ``value`` of the host condition ``name``, checked; raises BadFact (a name this
    module does not list is the caller's to skip: a newer scanner's fact)."""
    allowed = HOST_CONDITIONS[name]
    parts = value.split("|")
    if not value or len(parts) > MAX_VALUES or len(set(parts)) != len(parts):
        raise BadFact(f"{name}: {value[:80]!r} is not one to {MAX_VALUES} distinct values")
    for part in parts:
        ok = part in allowed if allowed is not None else _TOKEN.fullmatch(part) is not None
        if not ok:
            want = "|".join(sorted(allowed)) if allowed is not None else "[a-z0-9-] tokens"
            raise BadFact(f"{name}: {part[:40]!r} is not one of {want}")
    return join(parts)


def facts_of(props: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, str | None]]:
    """The host condition facts among an asset component's properties: name -> (value, where it
    was read). A name this module does not list is skipped (a newer scanner's fact: undecided
    here); raises BadFact for a known one given twice or not of its form."""
    out: dict[str, tuple[str, str | None]] = {}
    for name in HOST_CONDITIONS:
        values = props.get(PROPERTY_PREFIX + name, ())
        if not values:
            continue
        if len(values) > 1:
            raise BadFact(f"{name}: given {len(values)} times")
        sources = props.get(PROPERTY_PREFIX + name + SOURCE_SUFFIX, ())
        source = sources[0][:MAX_SOURCE] if sources else None
        out[name] = (check_fact(name, values[0]), source)
    return out


def names_in(props: Iterable[str]) -> list[str]:
    """The condition property names among these property names (any, known or not)."""
    return sorted(p for p in props if p.startswith(PROPERTY_PREFIX))
