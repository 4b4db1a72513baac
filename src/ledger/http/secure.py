"""The console's transport security: whether a request came over TLS (for the session
cookie's ``Secure`` flag and HSTS), and the headers every console answer carries.

Behind a TLS-terminating proxy the request reaches the server over plain HTTP and only the
proxy's ``X-Forwarded-Proto`` says it came over TLS; the header is believed only from a peer in
``LEDGER_TRUSTED_PROXIES`` (anyone else could send it). Any ``https`` in it counts: a cookie
marked Secure that then travels over plain HTTP is only a cookie the browser keeps to itself
(its owner signs in again), while one not marked Secure under TLS could leak over plain HTTP.
``LEDGER_SECURE_COOKIES=always`` marks it whatever the request says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import Request
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ..settings import Settings
from .auth import client_address

__all__ = ["SECURITY_HEADERS", "came_over_tls", "nul_refused", "secure_headers"]

# Every console answer (pages, partials, exports, static files, errors). Every script and style
# is a file of the console's own (static/); styles may also be set inline (uPlot sizes its
# canvas through style attributes). No framing at all: the console has no reason to be framed.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
        b"frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    # Balances and audit entries must not stay in a shared machine's browser cache.
    (b"cache-control", b"no-store"),
)
HSTS = (b"strict-transport-security", b"max-age=31536000")


def came_over_tls(
    request: Request[Any, Any, Any], settings: Settings, *, forced: bool = True
) -> bool:
    """Whether ``request`` reached us, or our trusted proxy, over TLS (or, with ``forced``,
    LEDGER_SECURE_COOKIES=always says to act as if)."""
    if (forced and settings.secure_cookies == "always") or request.url.scheme == "https":
        return True
    proto = request.headers.get("x-forwarded-proto")
    if not proto or not settings.trusted_proxies:
        return False
    peer = request.client.host if request.client else None
    # The peer itself, checked as client_address checks it: no X-Forwarded-For is followed.
    address = client_address(peer, None, settings.trusted_proxies)
    if address is None or not any(address in network for network in settings.trusted_proxies):
        return False
    return any(part.strip().lower() == "https" for part in proto.split(","))


def secure_headers(settings: Settings) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware adding :data:`SECURITY_HEADERS` to every answer, and HSTS under TLS."""

    def middleware(app: ASGIApp) -> ASGIApp:
        async def secured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:  # pragma: no cover - the console is HTTP only
                await app(scope, receive, send)
                return
            tls = came_over_tls(Request(scope), settings, forced=False)

            async def send_secured(message: Message) -> None:
                if message["type"] == "http.response.start":
                    names = {name.lower() for name, _ in message.get("headers", [])}
                    added = [h for h in SECURITY_HEADERS if h[0] not in names]
                    if tls:
                        added.append(HSTS)
                    message["headers"] = [*message.get("headers", []), *added]
                await send(message)

            await app(scope, receive, send_secured)

        return secured

    return middleware


def nul_refused(app: ASGIApp) -> ASGIApp:
    """Middleware answering 404 for a path with a NUL character (``/static/%00``), which no file
    can have: the file system refuses it with an error that was a 500."""

    async def refused(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP and "\x00" in scope["path"]:
            body = b'{"error":"not_found","message":"Not Found"}'
            start: Any = {
                "type": "http.response.start",
                "status": 404,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
            end: Any = {"type": "http.response.body", "body": body}
            await send(start)
            await send(end)
            return
        await app(scope, receive, send)

    return refused
