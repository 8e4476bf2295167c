"""Which image of a multi-platform index a scan reads: one rule for every image source (OCI
layouts and archives, registries), so the same index gives the same answer wherever it lives.

The rule (documented in docs/cli.md, ``--platform``):

1. Attestation manifests (BuildKit's ``unknown/unknown`` entries) are never images; an index
   with nothing else is an error. Nested indexes are flattened first.
2. An asked platform picks the image whose ``os/arch`` (and variant, when asked) match. When
   none does, the scan fails naming the available platforms, except that a lone image whose
   index entry declares no platform is taken and judged by its config.
3. With no platform asked, `DEFAULT_PLATFORM` is preferred; an index holding only one image
   gives that image; otherwise the scan fails naming the available platforms (never "the
   first entry", which would make the answer depend on the order a tool wrote).
4. The chosen image's config must not contradict the asked platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scanner.errors import SourceError, UsageError
from scanner.source.oci import Descriptor

#: The platform read when none is asked (reports stay the same whatever the scanning host).
DEFAULT_PLATFORM = "linux/amd64"
#: Levels of nested indexes followed before giving up (a cycle would never end).
MAX_INDEX_DEPTH = 4

#: What a source answers for an index entry: the nested entries when it is an index itself,
#: else None.
ExpandIndex = Callable[[Descriptor], Sequence[Descriptor] | None]


def check_platform(platform: str | None) -> None:
    """UsageError unless ``platform`` is None or ``OS/ARCH[/VARIANT]``."""
    if platform is not None and (
        len(platform.split("/")) not in (2, 3) or not all(platform.split("/"))
    ):
        raise UsageError(f"platform {platform!r} is not OS/ARCH[/VARIANT]")


def platform_matches(have: str, want: str) -> bool:
    """``os/arch`` must be equal; a wanted variant must be equal too."""
    h, w = have.split("/"), want.split("/")
    return h[:2] == w[:2] and (len(w) < 3 or h[2:3] == w[2:3])


def is_attestation(desc: Descriptor) -> bool:
    """An index entry that carries attestations, not an image (BuildKit's convention)."""
    return desc.annotations.get("vnd.docker.reference.type") == "attestation-manifest" or (
        desc.platform or ""
    ).startswith("unknown/")


def leaves(descs: Sequence[Descriptor], expand: ExpandIndex, label: str) -> list[Descriptor]:
    """The manifests reachable from ``descs``, nested indexes followed (`MAX_INDEX_DEPTH`)."""
    return _leaves(descs, expand, label, 0)


def _leaves(
    descs: Sequence[Descriptor], expand: ExpandIndex, label: str, depth: int
) -> list[Descriptor]:
    out: list[Descriptor] = []
    for desc in descs:
        nested = expand(desc)
        if nested is None:
            out.append(desc)
            continue
        if depth >= MAX_INDEX_DEPTH:
            raise SourceError(f"{label}: image indexes nested too deeply")
        out.extend(_leaves(nested, expand, label, depth + 1))
    return out


def choose_image(descs: Sequence[Descriptor], platform: str | None, label: str) -> Descriptor:
    """The entry of a flattened index to read (rules 1 to 3 of the module docstring)."""
    images = [d for d in descs if not is_attestation(d)]
    if not images:
        raise SourceError(f"{label}: the index lists no image")
    want = platform or DEFAULT_PLATFORM
    for desc in images:
        if desc.platform is not None and platform_matches(desc.platform, want):
            return desc
    if len(images) == 1 and (platform is None or images[0].platform is None):
        return images[0]  # judged by its config (`check_config_platform`)
    available = ", ".join(sorted({d.platform or "unknown" for d in images}))
    hint = "" if platform is not None else "; pick one with --platform"
    raise UsageError(f"{label}: no image for platform {want} (available: {available}){hint}")


def config_platform(config: Mapping[str, Any]) -> str:
    """``os/architecture[/variant]`` of an image config ("" when it says nothing)."""
    return "/".join(str(config[k]) for k in ("os", "architecture", "variant") if config.get(k))


def check_config_platform(config: Mapping[str, Any], platform: str | None, label: str) -> str:
    """The config's platform; UsageError when it contradicts the asked one (rule 4)."""
    have = config_platform(config)
    if platform is not None and have and not platform_matches(have, platform):
        raise UsageError(f"{label}: the image is for {have}, not {platform}")
    return have
