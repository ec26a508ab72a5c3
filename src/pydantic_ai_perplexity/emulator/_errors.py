"""The emulator's HTTP errors, answered with the API's envelope `{"error": {message, type, code, param?}}`."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

__all__ = ('ApiError', 'ValidationDetail', 'error_body', 'json_bytes')


def json_bytes(data: Any) -> bytes:
    """Compact UTF-8 JSON on one line; line separators a line-splitting reader might trip on are escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(',', ':'))
    return text.replace('\u2028', '\\u2028').replace('\u2029', '\\u2029').replace('\x85', '\\u0085').encode()


def error_body(status: int, type_: str, message: str, param: str | None = None) -> dict[str, Any]:
    """The error envelope the live API uses; `code` repeats the HTTP status as an integer."""
    error: dict[str, Any] = {'message': message, 'type': type_, 'code': status}
    if param is not None:
        error['param'] = param
    return {'error': error}


class ApiError(Exception):
    """An HTTP error answer; raised anywhere in request handling and rendered by the app."""

    def __init__(
        self,
        status: int,
        type_: str,
        message: str,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.param = param
        self.headers = headers or {}

    def response(self) -> Response:
        """The Starlette response carrying this error."""
        return Response(
            json_bytes(error_body(self.status, self.type, self.message, self.param)),
            status_code=self.status,
            headers=self.headers,
            media_type='application/json',
        )


class ValidationDetail(ApiError):
    """A 422 in FastAPI's shape, `{"detail": [{loc, msg, type}, ...]}`: how the Search API refuses a bad body."""

    def __init__(self, detail: list[dict[str, Any]]) -> None:
        first: dict[str, Any] = detail[0] if detail else {'msg': 'invalid request body', 'loc': ['body']}
        loc: list[Any] = list(first['loc'])
        param = next((part for part in reversed(loc) if isinstance(part, str)), None)
        super().__init__(422, 'validation_error', str(first['msg']), param=param)
        self.detail = detail

    def response(self) -> Response:
        """The 422 response with the `detail` list."""
        return Response(json_bytes({'detail': self.detail}), status_code=422, media_type='application/json')
