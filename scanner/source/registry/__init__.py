"""The ``registry:`` / ``docker://`` image source and its OCI distribution client, one module
per job: `auth` (options, docker config, challenges, tokens), `transport` (HTTP, TLS policy,
redirects, blob streams), `manifest` (media types, fetched documents), `client` (the pull API
and `resolve`), `referrers` (signature and attestation discovery) and `source` (the `Source`).
Reference parsing and the platform rule are shared with the other image sources
(`scanner.imageref`, `scanner.source.platform`).
"""

from scanner.source.registry.auth import RegistryOptions
from scanner.source.registry.source import RegistrySource

__all__ = ["RegistryOptions", "RegistrySource"]
