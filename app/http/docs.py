"""The API's documentation: the OpenAPI document completed with every status an operation can
answer, and the Swagger UI (``/docs``) and ReDoc (``/redoc``) pages, whose scripts and styles
come from the installed ``fastapi-offline`` package so the pages work without internet access.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from app.settings import Settings

STATIC_URL = "/docs/static"
_STATIC_DIR = Path(fastapi_offline.__file__).parent / "static"
_ERROR = {"$ref": "#/components/schemas/ErrorResponse"}
_JSON_ERROR = {"application/json": {"schema": _ERROR}}
#: operations that never touch the database
_NO_DATABASE = {("get", "/healthz")}
#: the one thing ReDoc's bundle loads from another host, always: its sidebar's logo (the page's
#: policy blocks it, a console error on every visit); a blank image of its own replaces it
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
_BLANK_IMAGE = b"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": _JSON_ERROR}


#: OpenAPI links between operations (what a client, and the stateful schemathesis run, can do
#: with an answer): (method, path, statuses) -> [(link name, method, path, parameters)]
LINKS: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, str, str, dict[str, str]]]] = {
    ("post", "/api/v1/reports", ("200", "201")): [
        ("GetAsset", "get", "/api/v1/assets/{asset_id}", {"asset_id": "$response.body#/asset_id"}),
        (
            "GetScanSbom",
            "get",
            "/api/v1/assets/{asset_id}/sbom",
            {"asset_id": "$response.body#/asset_id", "scan_id": "$response.body#/scan_id"},
        ),
    ],
    ("post", "/api/v1/tokens", ("201",)): [
        ("RevokeToken", "delete", "/api/v1/tokens/{token_id}", {"token_id": "$response.body#/id"}),
        (
            "RotateToken",
            "post",
            "/api/v1/tokens/{token_id}/rotate",
            {"token_id": "$response.body#/id"},
        ),
    ],
    ("post", "/api/v1/tokens/{token_id}/rotate", ("201",)): [
        ("RevokeToken", "delete", "/api/v1/tokens/{token_id}", {"token_id": "$response.body#/id"}),
    ],
    ("put", "/api/v1/policies/{name}", ("200", "201")): [
        ("GetPolicy", "get", "/api/v1/policies/{name}", {"name": "$response.body#/name"}),
        (
            "PolicyHistory",
            "get",
            "/api/v1/policies/{name}/history",
            {"name": "$response.body#/name"},
        ),
        ("Compliance", "get", "/api/v1/compliance", {"policy": "$response.body#/name"}),
    ],
}


def add_links(document: dict[str, Any]) -> None:
    """Add `LINKS` to the operations' answers, naming their targets by operationId."""
    paths = document.get("paths", {})
    for (method, path, statuses), links in LINKS.items():
        source = paths.get(path, {}).get(method)
        if source is None:
            continue
        for status in statuses:
            response = source.get("responses", {}).get(status)
            if response is None:
                continue
            out = response.setdefault("links", {})
            for name, target_method, target_path, parameters in links:
                target = paths.get(target_path, {}).get(target_method)
                if target is not None and "operationId" in target:
                    out[name] = {"operationId": target["operationId"], "parameters": parameters}


def complete_responses(document: dict[str, Any]) -> None:
    """Document what the error handlers answer, the same way on every operation: 400 for a bad,
    unknown or repeated parameter (any operation refuses unknown query parameters), 431 for an
    oversized head, 401/403 where a token is required, 404 where a path names a resource,
    408/413/422 for a body too slow, too large or not acceptable, 503 where the database is
    involved. FastAPI's own 422 "HTTPValidationError"
    never happens here: validation errors are rendered as `ErrorResponse`."""
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            responses: dict[str, Any] = operation.setdefault("responses", {})
            fastapi_422 = "HTTPValidationError" in str(responses.get("422", ""))
            if fastapi_422:
                del responses["422"]
            if "requestBody" in operation and "422" not in responses:
                responses["422"] = _error("the body is not acceptable; details say where")
            defaults = [
                ("400", "a query or path parameter is invalid, unknown or repeated"),
                ("431", "the request line and headers are over 16 KiB or 100 fields"),
            ]
            if "requestBody" in operation:
                defaults += [
                    ("408", "the body arrived slower than GPUPROV_BODY_MIN_RATE"),
                    ("413", "the body is larger than its limit"),
                ]
            if operation.get("security"):
                defaults += [
                    ("401", "missing, unknown, revoked or expired bearer token"),
                    ("403", "the token lacks the scope this operation needs"),
                    (
                        "429",
                        "too many failed authentications from this client; retry after Retry-After",
                    ),
                ]
            if "{" in path:
                defaults.append(("404", "no such resource"))
            if (method, path) not in _NO_DATABASE:
                defaults.append(("503", "the database cannot answer now; retry after Retry-After"))
            for code, text in defaults:
                responses.setdefault(code, _error(text))
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)


#: a string parameter without a pattern of its own: any text but NUL (`strict_query`)
_NO_NUL = "^[^\\u0000]*$"


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` as X: a parameter left out is absent, never null."""
    branches = schema.get("anyOf")
    if not branches:
        return schema
    kept = [b for b in branches if b != {"type": "null"}]
    if len(kept) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest}


def tighten_parameters(document: dict[str, Any], max_filter_values: int) -> None:
    """Say of each parameter what the service checks beyond its type (`app.http.params`): a
    query parameter is never null, no string of a query holds NUL, and a repeatable filter of a
    GET takes at most ``max_filter_values`` values."""
    for item in document.get("paths", {}).values():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                schema = _without_null(parameter["schema"])
                parameter["schema"] = schema
                if parameter["in"] != "query":
                    continue
                if schema.get("type") == "array" and method == "get":
                    schema["maxItems"] = max_filter_values
                for one in (schema, schema.get("items") or {}):
                    free = not {"pattern", "enum", "format"} & one.keys()
                    if one.get("type") == "string" and free:
                        one["pattern"] = _NO_NUL


def install_docs(app: FastAPI, settings: Settings) -> None:
    """Serve the completed OpenAPI document and the offline documentation pages."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            tighten_parameters(document, settings.max_filter_values)
            complete_responses(document)
            add_links(document)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    redoc_js = (_STATIC_DIR / "redoc.standalone.js").read_bytes().replace(_REDOC_LOGO, _BLANK_IMAGE)

    # before the mount, so that this copy is the one served
    @app.get(f"{STATIC_URL}/redoc.standalone.js", include_in_schema=False)
    async def redoc_script() -> Response:
        return Response(redoc_js, media_type="text/javascript")

    app.mount(STATIC_URL, StaticFiles(directory=_STATIC_DIR), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_URL}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_URL}/favicon.png",
            # no call to the public validator service
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            redoc_js_url=f"{STATIC_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC_URL}/favicon.png",
            with_google_fonts=False,
        )
