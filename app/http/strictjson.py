"""JSON bodies that FastAPI parses into a model are read by the product's one strict reader.

FastAPI reads a model's JSON body with `json.loads`, which keeps the last of two equal keys and
accepts ``NaN``; `scanner.loaders.load_json` refuses both (and long integers, deep nesting), as
it does for every other body the service reads. A router declares
``APIRouter(route_class=StrictJSONRoute)``; `tests/app/test_api_boundary.py` holds every route
with a model body to it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

from scanner.loaders import DocumentError, load_json


class StrictJSONRequest(Request):
    """A request whose `json()` is `load_json` (422 naming what is wrong)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = load_json(await self.body())
            except DocumentError as e:
                # FastAPI answers an HTTPException as it is (any other error becomes a 400)
                raise HTTPException(422, f"the body is not acceptable JSON: {e}") from None
        return self._json


class StrictJSONRoute(APIRoute):
    """A route whose model body is parsed by `StrictJSONRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict
