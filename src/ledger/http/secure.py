"""Whether a console request came over TLS, for the session cookie's ``Secure`` flag.

Behind a TLS-terminating proxy the request reaches the server over plain HTTP and only the
proxy's ``X-Forwarded-Proto`` says it came over TLS; the header is believed only from a peer in
``LEDGER_TRUSTED_PROXIES`` (anyone else could send it). Any ``https`` in it counts: a cookie
marked Secure that then travels over plain HTTP is only a cookie the browser keeps to itself
(its owner signs in again), while one not marked Secure under TLS could leak over plain HTTP.
``LEDGER_SECURE_COOKIES=always`` marks it whatever the request says.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from ..settings import Settings
from .auth import client_address

__all__ = ["came_over_tls"]


def came_over_tls(request: Request[Any, Any, Any], settings: Settings) -> bool:
    """Whether ``request`` reached us, or our trusted proxy, over TLS (or Secure is forced)."""
    if settings.secure_cookies == "always" or request.url.scheme == "https":
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
