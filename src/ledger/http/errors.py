"""The app's one exception table: every failure becomes ``{"error": key, "message": text}``.

- :class:`~ledger.errors.LedgerError` carries its own key and status (402, 404, 409, 400, 503, ...).
- Litestar's own client errors (bad path parameter, unknown route, body over the limit) keep their
  4xx status and get a stable key.
- Anything else is a bug: 500 ``internal``, logged with its traceback, the details never sent.

A 5xx tells the platform "outcome unknown, re-send" (contract 7.2), so only technical failures may
produce one; bad input must always land in a 4xx branch here.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import ExceptionHandlersMap, Receive, Scope, Send

from ..errors import LedgerError

__all__ = ["EXCEPTION_HANDLERS", "HTTP_KEYS", "error_body", "http_error_key", "send_error"]

log = logging.getLogger("ledger.server")

# Keys for Litestar's HTTP exceptions, by status.
HTTP_KEYS = {
    400: "request.invalid",
    401: "auth.invalid_token",
    403: "auth.forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request.too_large",
    415: "request.unsupported_media_type",
    429: "rate_limited",
    503: "unavailable",
}


def error_body(key: str, message: str) -> dict[str, str]:
    return {"error": key, "message": message}


def http_error_key(status: int) -> str:
    """The error key for a Litestar :class:`HTTPException` of ``status``."""
    return HTTP_KEYS.get(status, "internal" if status >= 500 else f"http.{status}")


def _ledger_error(_request: Request[Any, Any, Any], exc: LedgerError) -> Response[Any]:
    if exc.status >= 500 and not exc.retryable:
        # Not a database hiccup but a guard tripping (an unbalanced transaction): a bug.
        log.error("ledger error %s: %s", exc.key, exc.message, exc_info=exc)
    return Response(exc.to_dict(), status_code=exc.status)


def _validation_error(_request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = exc.extra if isinstance(exc.extra, list) else []
    message = "; ".join(
        f"{item.get('key', 'request')}: {item.get('message', '')}"
        for item in details
        if isinstance(item, dict)
    )
    return Response(error_body("request.invalid", message or exc.detail), status_code=400)


def _http_error(_request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status >= 500:
        log.error("HTTP %s: %s", status, exc.detail, exc_info=exc)
    message = exc.detail or HTTPStatus(status).phrase
    if status == 413:
        message = "the request body is over the configured limit (LEDGER_MAX_BODY_BYTES)"
    return Response(
        error_body(http_error_key(status), message),
        status_code=status,
        headers=exc.headers,
    )


def _unexpected(_request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.error("unexpected error: %r", exc, exc_info=exc)
    return Response(error_body("internal", "internal error"), status_code=500)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    LedgerError: _ledger_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    Exception: _unexpected,
}


async def send_error(scope: Scope, receive: Receive, send: Send, error: Exception) -> None:
    """Answer ``error`` as Litestar's exception middleware would, from this table: for what is
    served before Litestar's router (the callbacks, ``ledger.http.app``)."""
    handler = next(
        EXCEPTION_HANDLERS[kind] for kind in type(error).__mro__ if kind in EXCEPTION_HANDLERS
    )
    request: Request[Any, Any, Any] = Request(scope, receive, send)
    response = handler(request, error)
    app = scope["litestar_app"]
    await response.to_asgi_response(app=None, request=request, type_encoders=app.type_encoders)(
        scope, receive, send
    )
