"""The request id every log line of a request carries, and the JSON log format
(``GPUPROV_LOG_FORMAT=json``): one object a line with time, level, logger, message, the request
id and the fields a line adds (``extra=``).

Log lines never carry a secret or a report's content: tokens travel in a header that nothing
logs, the access line names the route, not its query string, and database errors are logged
without parameters (`app.http.errors.safe_description`).
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

#: the id of the request being answered (None outside a request)
REQUEST_ID: ContextVar[str | None] = ContextVar("gpuprov_request_id", default=None)

#: attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "color_message"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # uvicorn's logging configuration passes fmt/use_colors to every formatter
        super().__init__()

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry:
                entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
