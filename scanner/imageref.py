"""Image references as users and reports write them: which scan targets name a registry
image, how ``[HOST[:PORT]/]REPO[:TAG][@DIGEST]`` splits, and the validated `ImageReference`
the registry source resolves, and the ``pkg:oci`` purl of an image. Pure string rules, no
I/O: the CLI, the sources, the pipeline, the BOM encoder and the service share them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from msgspec import Struct

from scanner.errors import SourceError, UsageError
from scanner.model import OciDigest

if TYPE_CHECKING:
    from packageurl import PackageURL

#: Scan targets that name an image in a registry rather than a path.
REGISTRY_PREFIXES = ("registry:", "docker://")

DOCKER_HUB = "docker.io"
#: Names of Docker Hub in references and in docker's config.json keys.
HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com")

# distribution/reference grammar: lowercase path components joined by "/".
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HOST_RE = re.compile(
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]{1,5})?$"
)


_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")


def split_digest(digest: str) -> tuple[str, str]:
    """Validate an OCI digest (sha256/sha512, lowercase hex) and split it; SourceError if bad."""
    if not _DIGEST_RE.fullmatch(digest):
        raise SourceError(f"invalid or unsupported digest {digest!r}")
    algorithm, _, hexdigest = digest.partition(":")
    return algorithm, hexdigest


def is_registry_target(target: str) -> bool:
    """Whether a scan target names a registry image (``registry:`` or ``docker://``)."""
    return target.startswith(REGISTRY_PREFIXES)


def is_valid_host(host: str) -> bool:
    """Whether ``host`` is a registry host: a DNS name or bracketed IPv6, with an optional
    port."""
    return _HOST_RE.match(host) is not None


def canonical_registry(host: str) -> str:
    """``host`` with Docker Hub's aliases folded into ``docker.io``."""
    return DOCKER_HUB if host in HUB_ALIASES else host


def split_name(text: str) -> tuple[str, str | None, str | None]:
    """``(name, tag, digest)`` of ``[HOST[:PORT]/]REPO[:TAG][@DIGEST]``, nothing validated.

    The digest follows the first ``@``; the tag follows the last ``:`` after the last ``/``
    (a port's colon comes before a slash, so it is never taken for a tag).
    """
    name, at, digest = text.partition("@")
    tag: str | None = None
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        name, tag = name[:colon], name[colon + 1 :]
    return name, tag, digest if at else None


def oci_purl(reference: str, digest: str | None, platform: str | None = None) -> PackageURL:
    """The ``pkg:oci`` purl of an image (purl-spec's oci type, Trivy's convention): the last
    path segment as the name, the manifest digest as the version, the repository (registry host
    and port included) and the tag as qualifiers.

    ``localhost:5000/ml/train@sha256:ab..`` is ``pkg:oci/train@sha256:ab..?repository_url=
    localhost:5000/ml/train``: a registry port is never read as a tag.
    """
    from packageurl import PackageURL  # 16 ms of start-up only for the commands writing purls

    repository, tag, _ = split_name(reference)
    qualifiers: dict[str, str] = {}
    if "/" in repository:
        qualifiers["repository_url"] = repository
    if platform and "/" in platform:
        qualifiers["arch"] = platform.split("/")[1]
    if tag:
        qualifiers["tag"] = tag
    return PackageURL(
        type="oci",
        name=repository.rsplit("/", 1)[-1].lower() or "image",
        version=digest,
        qualifiers=qualifiers or None,
    )


class ImageReference(Struct, frozen=True):
    """A parsed image reference: registry (``host[:port]``), repository, tag and/or digest."""

    registry: str
    repository: str
    tag: str | None = None
    digest: OciDigest | None = None

    @classmethod
    def parse(cls, text: str) -> ImageReference:
        """Parse ``registry:HOST[:PORT]/REPO[:TAG|@DIGEST]`` or ``docker://[HOST/]REPO...``.

        ``registry:`` always names the host; ``docker://`` follows docker's rules (a first
        component without ``.``/``:`` that is not ``localhost`` is a Docker Hub namespace).
        """
        if text.startswith("registry:"):
            rest, hub_rules = text.removeprefix("registry:").removeprefix("//"), False
        elif text.startswith("docker://"):
            rest, hub_rules = text.removeprefix("docker://"), True
        else:
            raise UsageError(f"{text!r}: not a registry reference (registry:HOST/REPO[:TAG])")
        name, tag, digest = split_name(rest)
        host, sep, repository = name.partition("/")
        if hub_rules and (not sep or ("." not in host and ":" not in host and host != "localhost")):
            host, repository = DOCKER_HUB, name
        if not host or not repository:
            raise UsageError(f"{text!r}: expected HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]")
        if host in HUB_ALIASES:
            host = DOCKER_HUB
            if "/" not in repository:
                repository = f"library/{repository}"
        if not is_valid_host(host):
            raise UsageError(f"{text!r}: {host!r} is not a valid registry host")
        if not _REPOSITORY_RE.match(repository):
            raise UsageError(
                f"{text!r}: {repository!r} is not a valid repository name "
                "(lowercase letters, digits, separators . _ - and /)"
            )
        if tag is not None and not _TAG_RE.match(tag):
            raise UsageError(f"{text!r}: {tag!r} is not a valid tag")
        parsed_digest: OciDigest | None = None
        if digest is not None:
            try:
                split_digest(digest)
            except SourceError as e:
                raise UsageError(f"{text!r}: {e}") from e
            parsed_digest = OciDigest(digest)
        if tag is None and parsed_digest is None:
            tag = "latest"
        return cls(host, repository, tag, parsed_digest)

    @property
    def name(self) -> str:
        """``registry/repository`` (no tag or digest)."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest endpoint is asked for: the digest when given, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        text = self.name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text
