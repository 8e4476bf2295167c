"""OCI distribution registry client and the ``registry:`` / ``docker://`` image source.

Resolves a reference to one image (multi-platform indexes included), authenticates (anonymous,
basic, bearer token from the ``WWW-Authenticate`` challenge), streams blobs with their digest
checked on the fly, discovers signatures and attestations (OCI 1.1 referrers, the referrers tag
schema, cosign's ``sha256-<hex>.sig``/``.att`` tags) and pushes blobs and manifests. Layers go
through the same single-read pipeline as archives (`scanner.source.image.image_view`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import io
import ipaddress
import json
import logging
import os
import re
import ssl
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import httpx

from scanner.errors import SourceError, UsageError
from scanner.model import OciDigest, Skipped, Stage
from scanner.source.image import ImagePlan, image_view
from scanner.source.interface import RootView, Selector, SignatureLayer
from scanner.source.layerstream import LayerSpec, Limits
from scanner.source.oci import Descriptor, split_digest
from scanner.source.squash import YieldCache

log = logging.getLogger(__name__)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
_ACCEPT = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))
_IMAGE_CONFIG_TYPES = (OCI_CONFIG, DOCKER_CONFIG)

DEFAULT_PLATFORM = "linux/amd64"
MANIFEST_LIMIT = 4 * 1024 * 1024  # distribution's own cap on manifest size
CONFIG_LIMIT = 16 * 1024 * 1024
_ERROR_BODY_LIMIT = 64 * 1024
_CHUNK = 1024 * 1024
_MAX_REDIRECTS = 5
_MAX_INDEX_DEPTH = 4

_DOCKER_HUB = "docker.io"
_DOCKER_HUB_API = "registry-1.docker.io"
_HUB_ALIASES = ("docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com")

# distribution/reference grammar: lowercase path components joined by "/".
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HOST_RE = re.compile(
    r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]{1,5})?$"
)
_REDIRECTS = (301, 302, 303, 307, 308)
# Answers to GET /v2/<name>/referrers/<digest> from registries without the API: OCI 1.1 says
# 404; some answer 400, 405 or 501 for routes they do not know.
_NO_REFERRERS_API = (400, 404, 405, 406, 501)


# --- references --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageReference:
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
        name, at, digest = rest.partition("@")
        tag: str | None = None
        slash = name.rfind("/")
        colon = name.rfind(":")
        if colon > slash:
            name, tag = name[:colon], name[colon + 1 :]
        host, sep, repository = name.partition("/")
        if hub_rules and (not sep or ("." not in host and ":" not in host and host != "localhost")):
            host, repository = _DOCKER_HUB, name
        if not host or not repository:
            raise UsageError(f"{text!r}: expected HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]")
        if host in _HUB_ALIASES:
            host = _DOCKER_HUB
            if "/" not in repository:
                repository = f"library/{repository}"
        if not _HOST_RE.match(host):
            raise UsageError(f"{text!r}: {host!r} is not a valid registry host")
        if not _REPOSITORY_RE.match(repository):
            raise UsageError(
                f"{text!r}: {repository!r} is not a valid repository name "
                "(lowercase letters, digits, separators . _ - and /)"
            )
        if tag is not None and not _TAG_RE.match(tag):
            raise UsageError(f"{text!r}: {tag!r} is not a valid tag")
        parsed_digest: OciDigest | None = None
        if at:
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


def is_registry_target(target: str) -> bool:
    """Whether a scan target names a registry image (``registry:`` or ``docker://``)."""
    return target.startswith(("registry:", "docker://"))


def _host_only(registry: str) -> str:
    if registry.startswith("["):
        return registry[1 : registry.index("]")]
    return registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, port allowed) is loopback: 127.0.0.0/8, ::1,
    localhost. Only these may be reached over plain HTTP without ``insecure``."""
    name = _host_only(host).lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# --- credentials --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password (or token) for basic auth and the token service."""

    username: str
    password: str = field(repr=False)


def docker_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    env = os.environ if env is None else env
    directory = env.get("DOCKER_CONFIG")
    if directory:
        return Path(directory) / "config.json"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".docker" / "config.json"


def _auth_key_host(key: str) -> str:
    host = key.split("://", 1)[-1].split("/", 1)[0].lower()
    return _DOCKER_HUB if host in _HUB_ALIASES else host


def load_docker_credentials(registry: str, path: Path | None = None) -> Credentials | None:
    """Credentials for ``registry`` from a docker ``config.json`` (``auths`` entries with a
    base64 ``auth`` or ``username``/``password``); None when the file or the entry is absent.

    Credential helpers (``credsStore``, ``credHelpers``) and identity tokens are not run.
    """
    path = docker_config_path() if path is None else path
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SourceError(f"{path}: cannot read docker config ({e.strerror or e})") from e
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise SourceError(f"{path}: docker config is not valid JSON ({e})") from e
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        return None
    want = _auth_key_host(registry)
    for key, entry in auths.items():
        if not isinstance(entry, dict) or _auth_key_host(str(key)) != want:
            continue
        encoded = entry.get("auth")
        if isinstance(encoded, str) and encoded:
            try:
                user, sep, password = (
                    base64.b64decode(encoded, validate=True).decode().partition(":")
                )
            except (binascii.Error, UnicodeDecodeError) as e:
                raise SourceError(f"{path}: the auth entry for {key} is not base64") from e
            if not sep or not user:
                raise SourceError(f"{path}: the auth entry for {key} is not user:password")
            return Credentials(user, password)
        name, secret = entry.get("username"), entry.get("password")
        if isinstance(name, str) and name and isinstance(secret, str):
            return Credentials(name, secret)
    return None


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    """How to reach and authenticate to a registry (from CLI flags).

    ``insecure`` is the unsafe switch: TLS certificates are not checked and plain HTTP is
    allowed to any host. Without it plain HTTP is used only for loopback hosts.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    insecure: bool = False
    plain_http: bool = False
    docker_config: Path | None = None  # None: $DOCKER_CONFIG or ~/.docker
    use_docker_config: bool = True
    timeout: float = 30.0

    def credentials(self, registry: str) -> Credentials | None:
        """Explicit credentials first, then the docker config's entry for ``registry``."""
        if self.username is not None or self.password is not None:
            if not self.username or self.password is None:
                raise UsageError("registry credentials need both a user name and a password")
            return Credentials(self.username, self.password)
        if self.use_docker_config:
            return load_docker_credentials(registry, self.docker_config)
        return None


# --- descriptors and manifests ------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """A manifest or index as fetched: raw bytes (digest-checked), media type, parsed JSON."""

    digest: OciDigest
    media_type: str
    raw: bytes
    doc: dict[str, Any]

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def descriptors(self, key: str) -> tuple[Descriptor, ...]:
        """Parsed descriptors of ``manifests`` (index) or ``layers`` (manifest)."""
        items = self.doc.get(key)
        if not isinstance(items, list):
            return ()
        return tuple(Descriptor.parse(obj, f"manifest {self.digest}: {key}") for obj in items)

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        return self.descriptors("layers")

    @property
    def config(self) -> Descriptor | None:
        obj = self.doc.get("config")
        return Descriptor.parse(obj, f"manifest {self.digest}: config") if obj else None

    @property
    def artifact_type(self) -> str | None:
        """``artifactType``, else the config media type (OCI 1.1 rule for referrers)."""
        value = self.doc.get("artifactType")
        if isinstance(value, str) and value:
            return value
        config = self.doc.get("config")
        media = config.get("mediaType") if isinstance(config, dict) else None
        return media if isinstance(media, str) else None

    @property
    def subject(self) -> OciDigest | None:
        subject = self.doc.get("subject")
        digest = subject.get("digest") if isinstance(subject, dict) else None
        return OciDigest(digest) if isinstance(digest, str) else None

    @property
    def annotations(self) -> dict[str, str]:
        value = self.doc.get("annotations")
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _media_type(content_type: str | None, doc: dict[str, Any]) -> str:
    header = (content_type or "").split(";", 1)[0].strip().lower()
    if header in (*MANIFEST_TYPES, *INDEX_TYPES):
        return header
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    if isinstance(doc.get("manifests"), list):
        return OCI_INDEX
    if isinstance(doc.get("layers"), list) or isinstance(doc.get("config"), dict):
        return OCI_MANIFEST
    return header


def digest_of(data: bytes, algorithm: str = "sha256") -> OciDigest:
    """``algorithm:<hex>`` of ``data``."""
    return OciDigest(f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}")


def platform_matches(have: str, want: str) -> bool:
    """``os/arch`` must be equal; a wanted variant must be equal too."""
    h, w = have.split("/"), want.split("/")
    return h[:2] == w[:2] and (len(w) < 3 or h[2:3] == w[2:3])


def _is_attestation(desc: Descriptor) -> bool:
    return desc.annotations.get("vnd.docker.reference.type") == "attestation-manifest" or (
        desc.platform or ""
    ).startswith("unknown/")


def check_platform(platform: str | None) -> None:
    """UsageError unless ``platform`` is None or ``OS/ARCH[/VARIANT]``."""
    if platform is not None and (
        len(platform.split("/")) not in (2, 3) or not all(platform.split("/"))
    ):
        raise UsageError(f"platform {platform!r} is not OS/ARCH[/VARIANT]")


# --- referrers ----------------------------------------------------------------------------------


class FoundBy(StrEnum):
    """How a referrer was discovered."""

    REFERRERS_API = "referrers-api"  # GET /v2/<name>/referrers/<digest> (OCI 1.1)
    REFERRERS_TAG = "referrers-tag"  # the index tagged sha256-<hex> (OCI 1.1 fallback)
    COSIGN_SIGNATURE = "cosign-signature-tag"  # sha256-<hex>.sig
    COSIGN_ATTESTATION = "cosign-attestation-tag"  # sha256-<hex>.att


@dataclass(frozen=True)
class Referrer:
    """A manifest that refers to an image (signature, attestation, SBOM): fetch its layer
    blobs with `RegistryClient.read_blob`."""

    manifest: Manifest
    found_by: FoundBy
    tag: str | None = None  # the tag it was found under (tag-based discovery)

    @property
    def digest(self) -> OciDigest:
        return self.manifest.digest

    @property
    def artifact_type(self) -> str | None:
        return self.manifest.artifact_type

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        return self.manifest.layers


def _tag_hex(digest: str) -> str:
    algorithm, hexdigest = split_digest(digest)
    return f"{algorithm}-{hexdigest}"


# --- the HTTP client ----------------------------------------------------------------------------


def _parse_challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """RFC 7235 challenges: ``[(scheme lowercased, {param: value})]``."""
    scheme_re = re.compile(r"[\s,]*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)")
    param_re = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,"]*)\s*(?:,|$)')
    out: list[tuple[str, dict[str, str]]] = []
    pos = 0
    while pos < len(header):
        m = scheme_re.match(header, pos)
        if not m or not m.group(1):
            break
        scheme, params = m.group(1).lower(), {}
        pos = m.end()
        while (p := param_re.match(header, pos)) is not None and p.end() > pos:
            value = p.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            params[p.group(1).lower()] = value
            pos = p.end()
        out.append((scheme, params))
        if pos < len(header) and not header[pos:].strip(" ,"):
            break
    return out


def _walk_causes(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _tls_failure(e: BaseException) -> ssl.SSLError | None:
    for cause in _walk_causes(e):
        if isinstance(cause, ssl.SSLError):
            return cause
    return None


def _reason(e: BaseException) -> str:
    for cause in _walk_causes(e):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, TimeoutError | httpx.TimeoutException):
            return "timed out"
    return str(e) or type(e).__name__


class RegistryClient:
    """One registry host: transport, TLS policy, authentication and the distribution API.

    Plain HTTP is used only for loopback hosts (after HTTPS fails its handshake, or at once
    with ``plain_http``) or with the unsafe ``insecure`` option. Use as a context manager.
    """

    def __init__(
        self,
        registry: str,
        *,
        credentials: Credentials | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        plain_http: bool = False,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not _HOST_RE.match(registry):
            raise UsageError(f"{registry!r} is not a valid registry host")
        self.registry = registry
        self.insecure = insecure
        self._api_host = _DOCKER_HUB_API if registry == _DOCKER_HUB else registry
        self._http_ok = insecure or is_loopback(registry)
        if plain_http and not self._http_ok:
            # Credentials and content would travel in clear text over a real network.
            raise SourceError(
                f"refusing plain HTTP to registry {registry}: only loopback registries may be "
                "reached without TLS unless insecure access is explicitly allowed"
            )
        self._base: str | None = f"http://{self._api_host}" if plain_http else None
        self._credentials = credentials
        self._tokens: dict[str, str] = {}
        self._bearer: dict[str, str] | None = None
        self._basic = False
        verify: ssl.SSLContext | bool
        if insecure:
            log.warning(
                "UNSAFE: insecure access to registry %s: TLS certificates are not verified "
                "and plain HTTP is allowed",
                registry,
            )
            verify = False
        else:
            verify = ssl.create_default_context()  # the system's CA store
            if ca_file is not None:
                try:
                    verify.load_verify_locations(cafile=ca_file)
                except (OSError, ssl.SSLError) as e:
                    raise SourceError(f"cannot load CA certificates from {ca_file}: {e}") from e
        self._http = httpx.Client(
            verify=verify,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
            follow_redirects=False,
            transport=transport,
            headers={"User-Agent": "gpuprov"},
            trust_env=False,
        )

    @classmethod
    def for_reference(
        cls,
        ref: ImageReference,
        options: RegistryOptions | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> RegistryClient:
        """A client for ``ref``'s registry configured from ``options``."""
        options = options or RegistryOptions()
        return cls(
            ref.registry,
            credentials=options.credentials(ref.registry),
            ca_file=options.ca_file,
            insecure=options.insecure,
            plain_http=options.plain_http,
            timeout=options.timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport and errors --

    def _raw(
        self,
        method: str,
        url: httpx.URL,
        headers: Mapping[str, str],
        content: bytes | None = None,
        host: str | None = None,
    ) -> httpx.Response:
        host = host or self.registry
        try:
            request = self._http.build_request(method, url, headers=headers, content=content)
            return self._http.send(request, stream=True)
        except httpx.ConnectError as e:
            tls = _tls_failure(e)
            if isinstance(tls, ssl.SSLCertVerificationError):
                raise SourceError(
                    f"TLS verification failed for registry {host}: {tls.verify_message or tls} "
                    "(give the registry's CA certificate file for a private CA)"
                ) from e
            if tls is not None:
                raise SourceError(f"TLS handshake with registry {host} failed: {tls}") from e
            raise SourceError(f"cannot reach registry {host}: {_reason(e)}") from e
        except httpx.TimeoutException as e:
            raise SourceError(f"registry {host} did not answer in time ({type(e).__name__})") from e
        except httpx.HTTPError as e:
            raise SourceError(f"cannot talk to registry {host}: {_reason(e)}") from e

    def _ensure_base(self) -> str:
        """Pick https (or http where allowed) by pinging /v2/, as docker does."""
        if self._base is not None:
            return self._base
        base = f"https://{self._api_host}"
        try:
            response = self._raw("GET", httpx.URL(f"{base}/v2/"), {})
        except SourceError as e:
            tls = _tls_failure(e)
            if not (
                self._http_ok
                and tls is not None
                and not isinstance(tls, ssl.SSLCertVerificationError)
            ):
                raise
            # The port speaks plain HTTP; allowed here only for loopback or with insecure.
            base = f"http://{self._api_host}"
            response = self._raw("GET", httpx.URL(f"{base}/v2/"), {})
        with closing(response):
            if response.status_code == 401:
                self._learn(response.headers.get("www-authenticate", ""))
            elif response.status_code == 404:
                raise SourceError(
                    f"{self.registry} does not implement the OCI distribution API "
                    "(GET /v2/ answered 404)"
                )
        self._base = base
        return base

    def _learn(self, header: str) -> list[tuple[str, dict[str, str]]]:
        challenges = _parse_challenges(header)
        for scheme, params in challenges:
            if scheme == "bearer" and params.get("realm"):
                self._bearer = params
                return challenges
        if any(scheme == "basic" for scheme, _ in challenges):
            self._basic = True
        return challenges

    def _auth_header(self, scope: str | None) -> dict[str, str]:
        if scope is not None and scope in self._tokens:
            return {"Authorization": f"Bearer {self._tokens[scope]}"}
        if self._basic and self._credentials is not None:
            return {"Authorization": _basic(self._credentials)}
        return {}

    def _fetch_token(self, params: Mapping[str, str], scope: str | None, label: str) -> None:
        realm = httpx.URL(params["realm"])
        if realm.scheme not in ("https", "http") or (
            realm.scheme == "http" and not (self.insecure or is_loopback(realm.host))
        ):
            raise SourceError(
                f"registry {self.registry}: refusing token service {params['realm']} (not HTTPS)"
            )
        query: list[tuple[str, str | int | float | bool | None]] = []
        if params.get("service"):
            query.append(("service", params["service"]))
        wanted = params.get("scope") or scope
        if wanted:
            query.extend(("scope", s) for s in wanted.split(" ") if s)
        headers = {"Authorization": _basic(self._credentials)} if self._credentials else {}
        with closing(
            self._raw("GET", realm.copy_merge_params(query), headers, host=realm.host)
        ) as r:
            body = _read_limited(r, _ERROR_BODY_LIMIT, f"token from {realm.host}")
            if r.status_code in (401, 403):
                raise SourceError(
                    f"authentication failed for {label}: the token service {realm.host} "
                    f"rejected the {'credentials' if self._credentials else 'anonymous request'}"
                )
            if r.status_code != 200:
                raise SourceError(
                    f"token service {realm.host} answered HTTP {r.status_code} for {label}"
                )
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, UnicodeDecodeError, AttributeError) as e:
            raise SourceError(f"token service {realm.host} answered with invalid JSON") from e
        if not isinstance(token, str) or not token:
            raise SourceError(f"token service {realm.host} answered without a token")
        self._tokens[scope or wanted or ""] = token

    def _send(
        self,
        method: str,
        path: str,
        *,
        label: str,
        scope: str | None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        """Send with authentication (one challenge round) and checked redirects; streamed."""
        base = self._ensure_base()
        url = httpx.URL(base + path) if path.startswith("/") else httpx.URL(base).join(path)
        if _origin(url) != _origin(httpx.URL(base)):
            # An upload location elsewhere would receive the registry credentials.
            raise SourceError(f"{label}: the registry pointed to another host ({url.host})")
        headers = dict(headers or {})
        response = self._raw(method, url, {**headers, **self._auth_header(scope)}, content)
        if response.status_code == 401:
            header = response.headers.get("www-authenticate", "")
            response.close()
            challenges = self._learn(header)
            if self._bearer is not None and any(s == "bearer" for s, _ in challenges):
                bearer = next(p for s, p in challenges if s == "bearer")
                self._fetch_token(bearer, scope, label)
            elif self._basic and self._credentials is None:
                raise SourceError(
                    f"authentication failed for {label}: the registry requires credentials"
                )
            elif not self._basic:
                raise SourceError(f"authentication failed for {label}: unsupported challenge")
            response = self._raw(method, url, {**headers, **self._auth_header(scope)}, content)
            if response.status_code == 401:
                response.close()
                hint = "" if self._credentials else " (no credentials were given)"
                raise SourceError(f"authentication failed for {label}{hint}")
        origin = _origin(url)
        for _ in range(_MAX_REDIRECTS):
            if response.status_code not in _REDIRECTS or method not in ("GET", "HEAD"):
                return response
            location = response.headers.get("location")
            response.close()
            if not location:
                raise SourceError(f"{label}: redirect without a location")
            url = url.join(location)
            if url.scheme not in ("https", "http") or (
                url.scheme == "http" and not (self.insecure or is_loopback(url.host))
            ):
                raise SourceError(f"{label}: refusing redirect to {url.scheme}://{url.host}")
            # Credentials for the registry never go to the storage host it redirects to.
            auth = self._auth_header(scope) if _origin(url) == origin else {}
            response = self._raw(method, url, {**headers, **auth}, host=url.host)
        response.close()
        raise SourceError(f"{label}: too many redirects")

    def _fail(self, response: httpx.Response, label: str, not_found: str) -> SourceError:
        """The error for an unexpected status (the response is closed)."""
        with closing(response):
            status = response.status_code
            detail = _registry_error(response)
        if status == 404:
            return SourceError(not_found + (f" ({detail})" if detail else ""))
        if status == 403:
            return SourceError(f"access denied to {label}" + (f": {detail}" if detail else ""))
        if status == 429:
            return SourceError(f"registry {self.registry} is rate limiting requests ({label})")
        return SourceError(
            f"registry {self.registry} answered HTTP {status} for {label}"
            + (f": {detail}" if detail else "")
        )

    # -- pull --

    def ping(self) -> None:
        """Reach ``/v2/`` (choosing the scheme); SourceError when it cannot be reached."""
        self._ensure_base()

    def get_manifest(
        self, repository: str, reference: str, *, accept: str = _ACCEPT
    ) -> Manifest | None:
        """The manifest ``repository:reference`` (tag or digest), digest-checked; None on 404."""
        label = f"{self.registry}/{repository}{'@' if ':' in reference else ':'}{reference}"
        response = self._send(
            "GET",
            f"/v2/{repository}/manifests/{reference}",
            label=label,
            scope=_scope(repository),
            headers={"Accept": accept},
        )
        if response.status_code == 404:
            response.close()
            return None
        if response.status_code != 200:
            raise self._fail(response, label, f"image not found: {label}")
        with closing(response):
            raw = _read_limited(response, MANIFEST_LIMIT, f"manifest {label}")
            content_type = response.headers.get("content-type")
            header_digest = response.headers.get("docker-content-digest")
        if ":" in reference:  # by digest: the bytes must hash to it
            algorithm, expected = split_digest(reference)
            if hashlib.new(algorithm, raw).hexdigest() != expected:
                raise SourceError(
                    f"manifest {label} does not match its digest "
                    f"(the content hashes to {digest_of(raw, algorithm)})"
                )
            digest = OciDigest(reference)
        else:
            digest = digest_of(raw)
            if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
                raise SourceError(
                    f"manifest {label}: the registry says {header_digest} but the content "
                    f"hashes to {digest}"
                )
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise SourceError(f"manifest {label} is not valid JSON ({e})") from e
        if not isinstance(doc, dict):
            raise SourceError(f"manifest {label} is not a JSON object")
        return Manifest(digest, _media_type(content_type, doc), raw, doc)

    def open_blob(
        self, repository: str, digest: str, *, size: int | None = None, verify: bool = True
    ) -> IO[bytes]:
        """Stream a blob (redirects to storage followed); with ``verify`` the digest (and
        ``size`` when given) is checked as the end is read: SourceError naming the blob."""
        algorithm, _ = split_digest(digest)
        label = f"blob {digest} of {self.registry}/{repository}"
        response = self._send(
            "GET", f"/v2/{repository}/blobs/{digest}", label=label, scope=_scope(repository)
        )
        if response.status_code != 200:
            raise self._fail(
                response, label, f"blob {digest} not found in {self.registry}/{repository}"
            )
        raw = _BlobStream(response, OciDigest(digest), size, label, verify)
        return io.BufferedReader(raw, buffer_size=_CHUNK)

    def read_blob(
        self, repository: str, digest: str, *, max_bytes: int = CONFIG_LIMIT, verify: bool = True
    ) -> bytes:
        """A small blob (config, signature layer) read whole and digest-checked (unless the
        caller checks it itself: ``verify=False``)."""
        stream = self.open_blob(repository, digest, verify=verify)
        try:
            data = stream.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise SourceError(
                    f"blob {digest} of {self.registry}/{repository} is larger than {max_bytes} "
                    "bytes"
                )
            stream.read()  # reach the end so the digest is checked
            return data
        finally:
            stream.close()

    def blob_exists(self, repository: str, digest: str) -> bool:
        """Whether the registry holds ``digest`` in ``repository`` (HEAD)."""
        split_digest(digest)
        label = f"blob {digest} of {self.registry}/{repository}"
        response = self._send(
            "HEAD", f"/v2/{repository}/blobs/{digest}", label=label, scope=_scope(repository)
        )
        with closing(response):
            if response.status_code in (200, 404):
                return response.status_code == 200
        raise self._fail(response, label, label)

    def resolve(self, ref: ImageReference, platform: str | None = None) -> RegistryImage:
        """Fetch the image ``ref`` names (one platform of an index: ``platform`` or
        linux/amd64), with its config; layers are streamed later by `RegistryImage.open_blob`."""
        check_platform(platform)
        if ref.registry != self.registry:
            raise UsageError(f"{ref} is not on registry {self.registry}")
        top = self.get_manifest(ref.repository, ref.reference)
        if top is None:
            raise SourceError(f"image not found: {ref}")
        manifest = top
        for _ in range(_MAX_INDEX_DEPTH):
            if not manifest.is_index:
                break
            desc = _choose(manifest.descriptors("manifests"), platform, str(ref))
            child = self.get_manifest(ref.repository, desc.digest)
            if child is None:
                raise SourceError(f"image not found: {ref.name}@{desc.digest} (listed by {ref})")
            manifest = child
        else:
            raise SourceError(f"{ref}: image indexes nested too deeply")
        if manifest.media_type not in MANIFEST_TYPES:
            raise SourceError(
                f"{ref}: unsupported manifest type {manifest.media_type or 'unknown'!r} "
                "(expected an OCI or Docker v2 schema 2 image)"
            )
        config_desc = manifest.config
        if config_desc is None or not isinstance(manifest.doc.get("layers"), list):
            raise SourceError(f"{ref}: manifest {manifest.digest} is not an image manifest")
        if config_desc.media_type and config_desc.media_type not in _IMAGE_CONFIG_TYPES:
            raise SourceError(
                f"{ref} is an artifact of type {manifest.artifact_type!r}, not a container image"
            )
        if config_desc.size > CONFIG_LIMIT:
            raise SourceError(f"{ref}: image config is larger than {CONFIG_LIMIT} bytes")
        config_raw = self.read_blob(ref.repository, config_desc.digest, max_bytes=CONFIG_LIMIT)
        try:
            config = json.loads(config_raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise SourceError(f"{ref}: image config is not valid JSON ({e})") from e
        if not isinstance(config, dict):
            raise SourceError(f"{ref}: image config is not a JSON object")
        have = "/".join(str(config[k]) for k in ("os", "architecture", "variant") if config.get(k))
        if platform is not None and have and not platform_matches(have, platform):
            raise UsageError(f"{ref}: the image is for {have}, not {platform}")
        return RegistryImage(
            client=self,
            reference=ref,
            digest=manifest.digest,
            top_digest=top.digest,
            manifest=manifest,
            config_descriptor=config_desc,
            config_raw=config_raw,
            config=config,
            layers=manifest.layers,
            platform=have or None,
        )

    # -- referrers, signatures and attestations --

    def list_referrers(
        self, repository: str, digest: str, *, artifact_type: str | None = None
    ) -> list[Referrer]:
        """Manifests that refer to ``digest``: the OCI 1.1 referrers API, or the
        ``sha256-<hex>`` referrers tag when the registry answers 404, plus cosign's legacy
        ``sha256-<hex>.sig`` / ``.att`` tags. Filtered by ``artifact_type`` when given (for
        legacy tags: the config media type or the layers' media type)."""
        split_digest(digest)
        label = f"referrers of {self.registry}/{repository}@{digest}"
        path = f"/v2/{repository}/referrers/{digest}"
        if artifact_type:
            path += "?" + str(httpx.QueryParams({"artifactType": artifact_type}))
        response = self._send(
            "GET", path, label=label, scope=_scope(repository), headers={"Accept": OCI_INDEX}
        )
        found: list[Referrer] = []
        if response.status_code == 200:
            with closing(response):
                raw = _read_limited(response, MANIFEST_LIMIT, label)
            descs = _index_descriptors(raw, label)
            found.extend(self._fetch_referrers(repository, digest, descs, FoundBy.REFERRERS_API))
        elif response.status_code in _NO_REFERRERS_API:
            response.close()
            tag = _tag_hex(digest)
            index = self.get_manifest(repository, tag, accept=OCI_INDEX)
            if index is not None:
                descs = index.descriptors("manifests")
                found.extend(
                    self._fetch_referrers(repository, digest, descs, FoundBy.REFERRERS_TAG, tag)
                )
        else:
            raise self._fail(response, label, label)
        for suffix, kind in (
            (".sig", FoundBy.COSIGN_SIGNATURE),
            (".att", FoundBy.COSIGN_ATTESTATION),
        ):
            tag = _tag_hex(digest) + suffix
            legacy = self.get_manifest(repository, tag)
            if legacy is not None and not legacy.is_index:
                found.append(Referrer(legacy, kind, tag))
        if artifact_type:
            found = [r for r in found if _has_type(r.manifest, artifact_type)]
        return found

    def _fetch_referrers(
        self,
        repository: str,
        digest: str,
        descs: tuple[Descriptor, ...],
        kind: FoundBy,
        tag: str | None = None,
    ) -> list[Referrer]:
        out = []
        for desc in descs:
            manifest = self.get_manifest(repository, desc.digest)
            # A listed manifest that names another subject does not refer to this image.
            if manifest is None or manifest.subject not in (None, digest):
                continue
            out.append(Referrer(manifest, kind, tag))
        return out

    # -- push --

    def push_blob(
        self, repository: str, data: bytes, media_type: str = "application/octet-stream"
    ) -> Descriptor:
        """Upload ``data`` (monolithic POST then PUT) unless present; its descriptor."""
        digest = digest_of(data)
        desc = Descriptor(media_type, digest, len(data))
        if self.blob_exists(repository, digest):
            return desc
        label = f"upload of blob {digest} to {self.registry}/{repository}"
        scope = _scope(repository, push=True)
        response = self._send("POST", f"/v2/{repository}/blobs/uploads/", label=label, scope=scope)
        if response.status_code != 202:
            raise self._fail(response, label, f"repository {repository} not found")
        location = response.headers.get("location")
        response.close()
        if not location:
            raise SourceError(f"{label}: the registry gave no upload location")
        url = httpx.URL(self._ensure_base()).join(location)
        url = url.copy_merge_params({"digest": digest})
        response = self._send(
            "PUT",
            str(url),
            label=label,
            scope=scope,
            headers={"Content-Type": "application/octet-stream"},
            content=data,
        )
        if response.status_code != 201:
            raise self._fail(response, label, label)
        response.close()
        return desc

    def push_manifest(
        self, repository: str, data: bytes, media_type: str, reference: str | None = None
    ) -> OciDigest:
        """PUT a manifest under a tag (or its own digest when ``reference`` is None)."""
        digest = digest_of(data)
        reference = reference or digest
        if ":" in reference:
            split_digest(reference)
        elif not _TAG_RE.match(reference):
            raise UsageError(f"{reference!r} is not a valid tag")
        label = f"manifest {self.registry}/{repository}:{reference}"
        response = self._send(
            "PUT",
            f"/v2/{repository}/manifests/{reference}",
            label=label,
            scope=_scope(repository, push=True),
            headers={"Content-Type": media_type},
            content=data,
        )
        if response.status_code != 201:
            raise self._fail(response, label, label)
        response.close()
        return digest


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def _scope(repository: str, push: bool = False) -> str:
    return f"repository:{repository}:{'pull,push' if push else 'pull'}"


def _basic(credentials: Credentials) -> str:
    pair = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def _read_limited(response: httpx.Response, limit: int, what: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > limit:
                raise SourceError(f"{what} is larger than {limit} bytes")
            chunks.append(chunk)
    except httpx.HTTPError as e:
        raise SourceError(f"{what}: transfer failed ({_reason(e)})") from e
    return b"".join(chunks)


def _registry_error(response: httpx.Response) -> str:
    """The registry's own error message (``errors[].message``), short and printable."""
    try:
        body = _read_limited(response, _ERROR_BODY_LIMIT, "error")
        doc = json.loads(body)
        errors = doc.get("errors") if isinstance(doc, dict) else None
        messages = [
            str(e.get("message") or e.get("code"))
            for e in (errors or [])
            if isinstance(e, dict) and (e.get("message") or e.get("code"))
        ]
    except (SourceError, ValueError, UnicodeDecodeError):
        return ""
    text = "; ".join(messages)
    return "".join(c if c.isprintable() else "?" for c in text)[:300]


def _index_descriptors(raw: bytes, label: str) -> tuple[Descriptor, ...]:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise SourceError(f"{label}: not valid JSON ({e})") from e
    items = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise SourceError(f"{label}: the answer is not an image index")
    return tuple(Descriptor.parse(obj, label) for obj in items)


def _has_type(manifest: Manifest, artifact_type: str) -> bool:
    if manifest.artifact_type == artifact_type:
        return True
    return any(layer.media_type == artifact_type for layer in manifest.layers)


def _choose(descs: tuple[Descriptor, ...], platform: str | None, label: str) -> Descriptor:
    images = [d for d in descs if not _is_attestation(d)]
    if not images:
        raise SourceError(f"{label}: the index lists no image")
    want = platform or DEFAULT_PLATFORM
    for desc in images:
        if desc.platform is not None and platform_matches(desc.platform, want):
            return desc
    if platform is None and len(images) == 1:
        return images[0]
    available = ", ".join(sorted({d.platform or "unknown" for d in images}))
    raise UsageError(f"{label}: no image for platform {want} (available: {available})")


class _BlobStream(io.RawIOBase):
    """A streamed blob response; checks size and digest when the end is reached."""

    def __init__(
        self,
        response: httpx.Response,
        digest: OciDigest,
        size: int | None,
        label: str,
        verify: bool,
    ) -> None:
        super().__init__()
        self._response = response
        self._chunks = response.iter_bytes(_CHUNK)
        self._pending = b""
        self._digest = digest
        algorithm, self._expected = split_digest(digest)
        self._hash = hashlib.new(algorithm) if verify else None
        self._size = size
        self._count = 0
        self._label = label
        self._done = False

    def readable(self) -> bool:
        return True

    def _next(self) -> bytes | None:
        try:
            return next(self._chunks)
        except StopIteration:
            return None
        except httpx.HTTPError as e:
            raise SourceError(f"{self._label}: transfer failed ({_reason(e)})") from e

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._pending and not self._done:
            chunk = self._next()
            if chunk is None:
                self._finish()
            elif chunk:
                self._count += len(chunk)
                if self._size is not None and self._count > self._size:
                    raise SourceError(
                        f"{self._label} is larger than its declared size {self._size}"
                    )
                if self._hash is not None:
                    self._hash.update(chunk)
                self._pending = chunk
        n = min(len(view), len(self._pending))
        view[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _finish(self) -> None:
        self._done = True
        if self._size is not None and self._count != self._size:
            raise SourceError(
                f"{self._label} has {self._count} bytes but its descriptor says {self._size}"
            )
        if self._hash is not None and self._hash.hexdigest() != self._expected:
            algorithm = self._digest.split(":", 1)[0]
            raise SourceError(
                f"{self._label} does not match its digest: the content hashes to "
                f"{algorithm}:{self._hash.hexdigest()}"
            )

    def close(self) -> None:
        if not self.closed:
            self._response.close()
        super().close()


# --- the resolved image and the source ----------------------------------------------------------


@dataclass(frozen=True)
class RegistryImage:
    """One resolved image: manifest (``digest``), config and layer descriptors.

    ``top_digest`` is the digest the reference resolved to (the index for a multi-platform
    image, where signatures usually point); ``digest`` is the chosen image manifest's.
    """

    client: RegistryClient = field(repr=False)
    reference: ImageReference
    digest: OciDigest
    top_digest: OciDigest
    manifest: Manifest = field(repr=False)
    config_descriptor: Descriptor
    config_raw: bytes = field(repr=False)
    config: dict[str, Any] = field(repr=False)
    layers: tuple[Descriptor, ...]
    platform: str | None

    def open_blob(self, digest: str, *, verify: bool = True) -> IO[bytes]:
        """Stream a blob of this image's repository, checking its digest (and its size when
        it is one of this image's layers or config) as the end is read."""
        size = next(
            (d.size for d in (*self.layers, self.config_descriptor) if d.digest == digest), None
        )
        return self.client.open_blob(self.reference.repository, digest, size=size, verify=verify)

    def list_referrers(
        self, *, artifact_type: str | None = None, digest: str | None = None
    ) -> list[Referrer]:
        """Signatures, attestations and other referrers of ``digest`` (default: the top
        digest, which is what ``cosign sign IMAGE:TAG`` signs)."""
        return self.client.list_referrers(
            self.reference.repository, digest or self.top_digest, artifact_type=artifact_type
        )

    def plan(self) -> ImagePlan:
        """The `ImagePlan` the shared layer pipeline squashes."""
        layers: list[LayerSpec] = []
        skipped: list[Skipped] = []
        for desc in self.layers:
            if desc.urls or "nondistributable" in desc.media_type or "foreign" in desc.media_type:
                skipped.append(
                    Skipped(
                        str(desc.digest), "foreign layer not served by the registry", Stage.SOURCE
                    )
                )
                continue
            # read_layer checks the blob digest itself, so the stream does not hash it twice.
            opener = functools.partial(self.open_blob, desc.digest, verify=False)
            layers.append(LayerSpec(desc.digest, desc.size, opener, "blob"))
        name = self.reference.name
        if self.reference.tag is not None:
            name += f":{self.reference.tag}"
        elif self.reference.digest is not None:
            name += f"@{self.reference.digest}"
        return ImagePlan(
            name=name,
            manifest_digest=self.digest,
            config_digest=self.config_descriptor.digest,
            config=self.config,
            layers=tuple(layers),
            layer_digests=tuple(d.digest for d in self.layers),
            skipped=tuple(skipped),
        )


class RegistrySource:
    """``registry:HOST[:PORT]/REPO[:TAG|@DIGEST]`` or ``docker://...``: an image in an OCI
    distribution registry, streamed layer by layer (never stored on disk)."""

    def __init__(
        self,
        target: str | ImageReference,
        *,
        platform: str | None = None,
        cache: YieldCache | None = None,
        limits: Limits | None = None,
        options: RegistryOptions | None = None,
        reference: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_platform(platform)
        self.ref = target if isinstance(target, ImageReference) else ImageReference.parse(target)
        self.platform = platform
        self.cache = cache
        self.limits = limits
        self.options = options or RegistryOptions()
        self.reference = reference if reference is not None else str(target)
        self._transport = transport

    def client(self) -> RegistryClient:
        """A new client for the image's registry (the caller closes it)."""
        return RegistryClient.for_reference(self.ref, self.options, self._transport)

    def open_view(self, selector: Selector) -> RootView:
        """Resolve the image and squash its layers (each blob fetched at most once, none when
        the layer cache already holds its yield)."""
        with self.client() as client:
            image = client.resolve(self.ref, self.platform)
            self.digests = tuple(dict.fromkeys((image.top_digest, image.digest)))
            return image_view(
                image.plan(),
                selector,
                reference=self.reference,
                cache=self.cache,
                limits=self.limits,
            )

    #: Digests signatures may name, set by `open_view`: the tag's target (an index for a
    #: multi-platform image, which is what `cosign sign IMAGE:TAG` signs) and the manifest.
    digests: tuple[str, ...] = ()

    def signature_material(self) -> list[SignatureLayer]:
        """Every signature/attestation layer the registry holds for this image's digests.

        Referrers API first, cosign's ``sha256-<hex>.sig``/``.att`` tags as fallback; each
        blob is fetched whole (they are small). Verification, the blob digest included, is the
        verify stage's job: a tampered signature blob is one rejected layer with its reason,
        not the end of the scan.
        """
        found: list[SignatureLayer] = []
        with self.client() as client:
            for digest in self.digests:
                for ref in client.list_referrers(self.ref.repository, digest):
                    for desc in ref.layers:
                        data = client.read_blob(self.ref.repository, desc.digest, verify=False)
                        found.append(
                            SignatureLayer(
                                subject=digest,
                                media_type=desc.media_type,
                                data=data,
                                # cosign v3 puts dev.sigstore.bundle.* on the referrer manifest
                                # (cosign specs/BUNDLE_SPEC.md); the layer's own annotations win.
                                annotations={**ref.manifest.annotations, **desc.annotations},
                                digest=desc.digest,
                            )
                        )
        return found
