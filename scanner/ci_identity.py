"""The CI job's own OIDC ID token, for keyless gating (``gpuprov gate --oidc``).

GitHub Actions hands one out on request (the workflow grants ``id-token: write``, which sets
``ACTIONS_ID_TOKEN_REQUEST_URL`` and ``ACTIONS_ID_TOKEN_REQUEST_TOKEN``); GitLab CI puts one
in the variable an ``id_tokens:`` entry names, with its ``aud`` set in the pipeline file
(``CI_JOB_JWT_V2`` was removed in GitLab 17.0).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from scanner.errors import ScannerError, UsageError

#: the variable a GitLab job's ``id_tokens:`` entry should be named (docs/ci.md)
ENV_ID_TOKEN = "GPUPROV_ID_TOKEN"
ENV_AUDIENCE = "GPUPROV_CI_AUDIENCE"
_GITHUB_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
_GITHUB_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
_MAX_ANSWER = 64 * 1024


def _with_audience(url: str, audience: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "audience"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("audience", audience)])))


def audience_of(audience: str | None, env: Mapping[str, str] | None = None) -> str:
    """The audience to ask for: `audience`, else ``$GPUPROV_CI_AUDIENCE``; `UsageError` when
    neither is given."""
    env = os.environ if env is None else env
    audience = audience or env.get(ENV_AUDIENCE)
    if not audience:
        raise UsageError(
            f"--oidc needs the service's CI audience: pass --oidc-audience or set {ENV_AUDIENCE}"
        )
    return audience


def ci_id_token(audience: str | None, env: Mapping[str, str] | None = None) -> str:
    """The job's ID token for `audience`: GitHub's requested now, else GitLab's from
    ``$GPUPROV_ID_TOKEN``; `UsageError` outside a CI job that offers one."""
    env = os.environ if env is None else env
    audience = audience_of(audience, env)
    request_url, request_token = env.get(_GITHUB_URL), env.get(_GITHUB_TOKEN)
    if request_url and request_token:
        return _github_token(request_url, request_token, audience)
    token = env.get(ENV_ID_TOKEN, "").strip()
    if token:
        return token
    raise UsageError(
        "--oidc found no CI ID token: on GitHub Actions grant the job `permissions: "
        f"id-token: write`; on GitLab CI add `id_tokens: {ENV_ID_TOKEN}: aud: {audience}` to "
        "the job (docs/ci.md)"
    )


def _github_token(request_url: str, request_token: str, audience: str) -> str:
    import httpx

    if not request_url.startswith(("https://", "http://127.0.0.1", "http://localhost")):
        raise UsageError(f"{_GITHUB_URL} is not an https URL")
    try:
        answer = httpx.get(
            _with_audience(request_url, audience),
            headers={"Authorization": f"Bearer {request_token}", "Accept": "application/json"},
            timeout=30.0,
            follow_redirects=False,
        )
    except httpx.HTTPError as e:
        raise ScannerError(f"cannot get the job's ID token from GitHub: {e}") from None
    if answer.status_code != 200:
        raise ScannerError(
            f"GitHub refused the job's ID token ({answer.status_code}); does the job have "
            "`permissions: id-token: write`?"
        )
    try:
        value = answer.json()["value"] if len(answer.content) <= _MAX_ANSWER else None
    except (ValueError, KeyError, TypeError):
        value = None
    if not isinstance(value, str) or not value:
        raise ScannerError("GitHub's answer holds no ID token ('value')")
    return value
