"""Registry credentials and authentication state: the CLI's options, docker's ``config.json``,
RFC 7235 challenges and the tokens a bearer challenge earned. No network here: the transport
(`scanner.source.registry.transport`) asks the token service and reports back.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scanner.errors import SourceError, UsageError
from scanner.imageref import canonical_registry

#: One challenge of a ``WWW-Authenticate`` header: (scheme lowercased, {param: value}).
Challenge = tuple[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user name and password (or token) for basic auth and the token service."""

    username: str
    password: str = field(repr=False)

    def basic(self) -> str:
        """The ``Authorization`` value for HTTP basic auth."""
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode()


def docker_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    env = os.environ if env is None else env
    directory = env.get("DOCKER_CONFIG")
    if directory:
        return Path(directory) / "config.json"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".docker" / "config.json"


def _auth_key_host(key: str) -> str:
    return canonical_registry(key.split("://", 1)[-1].split("/", 1)[0].lower())


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
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
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


_SCHEME_RE = re.compile(r"[\s,]*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)")
_PARAM_RE = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,"]*)\s*(?:,|$)')


def parse_challenges(header: str) -> list[Challenge]:
    """RFC 7235 challenges: ``[(scheme lowercased, {param: value})]``."""
    out: list[Challenge] = []
    pos = 0
    while pos < len(header):
        m = _SCHEME_RE.match(header, pos)
        if not m or not m.group(1):
            break
        scheme, params = m.group(1).lower(), {}
        pos = m.end()
        while (p := _PARAM_RE.match(header, pos)) is not None and p.end() > pos:
            value = p.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            params[p.group(1).lower()] = value
            pos = p.end()
        out.append((scheme, params))
        if pos < len(header) and not header[pos:].strip(" ,"):
            break
    return out


class Authenticator:
    """What one registry asked for and what we answer with: the bearer challenge (token
    service parameters) or basic auth, and the tokens earned per scope."""

    def __init__(self, credentials: Credentials | None) -> None:
        self.credentials = credentials
        self.bearer: dict[str, str] | None = None
        self.basic = False
        self._tokens: dict[str, str] = {}

    def learn(self, header: str) -> list[Challenge]:
        """Remember a ``WWW-Authenticate`` header's scheme; its challenges."""
        challenges = parse_challenges(header)
        for scheme, params in challenges:
            if scheme == "bearer" and params.get("realm"):
                self.bearer = params
                return challenges
        if any(scheme == "basic" for scheme, _ in challenges):
            self.basic = True
        return challenges

    def header(self, scope: str | None) -> dict[str, str]:
        """The ``Authorization`` header for a request in ``scope`` (empty when none applies)."""
        if scope is not None and scope in self._tokens:
            return {"Authorization": f"Bearer {self._tokens[scope]}"}
        if self.basic and self.credentials is not None:
            return {"Authorization": self.credentials.basic()}
        return {}

    def token_request(
        self, params: Mapping[str, str], scope: str | None
    ) -> tuple[tuple[tuple[str, str], ...], dict[str, str], str]:
        """The token service query, headers, and the key the token will be stored under."""
        query: list[tuple[str, str]] = []
        if params.get("service"):
            query.append(("service", params["service"]))
        wanted = params.get("scope") or scope
        if wanted:
            query.extend(("scope", s) for s in wanted.split(" ") if s)
        headers = {"Authorization": self.credentials.basic()} if self.credentials else {}
        return tuple(query), headers, scope or wanted or ""

    def accept_token(self, body: bytes, key: str, service: str) -> None:
        """Store the token of a token service's 200 answer; SourceError when it has none."""
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, UnicodeDecodeError, AttributeError, RecursionError) as e:
            raise SourceError(f"token service {service} answered with invalid JSON") from e
        if not isinstance(token, str) or not token:
            raise SourceError(f"token service {service} answered without a token")
        self._tokens[key] = token
