"""HTTP to one registry host: scheme choice and TLS policy, the authentication round
(`scanner.source.registry.auth` holds its state), checked redirects, error mapping, and blob
streams whose digest is checked as their end is read. Every failure is a `SourceError` that
names the host and what was being fetched.
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import logging
import ssl
from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any

import httpx

from scanner.errors import SourceError, UsageError
from scanner.imageref import DOCKER_HUB, is_valid_host, split_digest
from scanner.model import OciDigest
from scanner.source.registry.auth import Authenticator, Credentials

log = logging.getLogger(__name__)

_DOCKER_HUB_API = "registry-1.docker.io"
_ERROR_BODY_LIMIT = 64 * 1024
CHUNK = 1024 * 1024
_MAX_REDIRECTS = 5
_REDIRECTS = (301, 302, 303, 307, 308)


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


def scope(repository: str, push: bool = False) -> str:
    """The token scope of a repository request."""
    return f"repository:{repository}:{'pull,push' if push else 'pull'}"


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


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


class Connection:
    """One registry host: transport, TLS policy and authentication.

    Plain HTTP is used only for loopback hosts (after HTTPS fails its handshake, or at once
    with ``plain_http``) or with the unsafe ``insecure`` option.
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
        if not is_valid_host(registry):
            raise UsageError(f"{registry!r} is not a valid registry host")
        self.registry = registry
        self.insecure = insecure
        self._api_host = _DOCKER_HUB_API if registry == DOCKER_HUB else registry
        self._http_ok = insecure or is_loopback(registry)
        if plain_http and not self._http_ok:
            # Credentials and content would travel in clear text over a real network.
            raise SourceError(
                f"refusing plain HTTP to registry {registry}: only loopback registries may be "
                "reached without TLS unless insecure access is explicitly allowed"
            )
        self._base: str | None = f"http://{self._api_host}" if plain_http else None
        self.auth = Authenticator(credentials)
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

    def close(self) -> None:
        self._http.close()

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

    def base(self) -> str:
        """The base URL, picking https (or http where allowed) by pinging /v2/ as docker
        does; SourceError when the registry cannot be reached."""
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
                self.auth.learn(response.headers.get("www-authenticate", ""))
            elif response.status_code == 404:
                raise SourceError(
                    f"{self.registry} does not implement the OCI distribution API "
                    "(GET /v2/ answered 404)"
                )
        self._base = base
        return base

    def _fetch_token(self, params: Mapping[str, str], scope: str | None, label: str) -> None:
        realm = httpx.URL(params["realm"])
        if realm.scheme not in ("https", "http") or (
            realm.scheme == "http" and not (self.insecure or is_loopback(realm.host))
        ):
            raise SourceError(
                f"registry {self.registry}: refusing token service {params['realm']} (not HTTPS)"
            )
        query, headers, key = self.auth.token_request(params, scope)
        with closing(
            self._raw("GET", realm.copy_merge_params(query), headers, host=realm.host)
        ) as r:
            body = read_limited(r, _ERROR_BODY_LIMIT, f"token from {realm.host}")
            if r.status_code in (401, 403):
                rejected = "credentials" if self.auth.credentials else "anonymous request"
                raise SourceError(
                    f"authentication failed for {label}: the token service {realm.host} "
                    f"rejected the {rejected}"
                )
            if r.status_code != 200:
                raise SourceError(
                    f"token service {realm.host} answered HTTP {r.status_code} for {label}"
                )
        self.auth.accept_token(body, key, realm.host)

    def send(
        self,
        method: str,
        path: str,
        *,
        label: str,
        scope: str | None,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        """Send with authentication (one challenge round) and checked redirects; streamed.

        ``path`` is absolute on the registry or a URL it gave (an upload location); a URL on
        another host is refused, since it would receive the registry credentials.
        """
        base = self.base()
        url = httpx.URL(base + path) if path.startswith("/") else httpx.URL(base).join(path)
        if _origin(url) != _origin(httpx.URL(base)):
            raise SourceError(f"{label}: the registry pointed to another host ({url.host})")
        headers = dict(headers or {})
        auth = self.auth
        response = self._raw(method, url, {**headers, **auth.header(scope)}, content)
        if response.status_code == 401:
            header = response.headers.get("www-authenticate", "")
            response.close()
            challenges = auth.learn(header)
            if auth.bearer is not None and any(s == "bearer" for s, _ in challenges):
                bearer = next(p for s, p in challenges if s == "bearer")
                self._fetch_token(bearer, scope, label)
            elif auth.basic and auth.credentials is None:
                raise SourceError(
                    f"authentication failed for {label}: the registry requires credentials"
                )
            elif not auth.basic:
                raise SourceError(f"authentication failed for {label}: unsupported challenge")
            response = self._raw(method, url, {**headers, **auth.header(scope)}, content)
            if response.status_code == 401:
                response.close()
                hint = "" if auth.credentials else " (no credentials were given)"
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
            redirected = auth.header(scope) if _origin(url) == origin else {}
            response = self._raw(method, url, {**headers, **redirected}, host=url.host)
        response.close()
        raise SourceError(f"{label}: too many redirects")

    def fail(self, response: httpx.Response, label: str, not_found: str) -> SourceError:
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


def read_limited(response: httpx.Response, limit: int, what: str) -> bytes:
    """The whole body of a streamed response; SourceError past ``limit`` bytes."""
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
        body = read_limited(response, _ERROR_BODY_LIMIT, "error")
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


class BlobStream(io.RawIOBase):
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
        self._chunks = response.iter_bytes(CHUNK)
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
