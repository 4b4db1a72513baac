"""Which listener serves which surface, and who may reach the operator's side.

With ``LEDGER_OPERATOR_LISTEN`` (``host:port``) the server listens on a second address, for the
operator's side: the console, ``/admin``, ``/metrics`` and the API docs. The public listener
then answers only the platform's callbacks, ``/health`` and ``/ready``, and the operator's only
its side (and the probes): anything else is a 404, as if the route did not exist there.
``LEDGER_OPERATOR_ALLOWED_IPS`` admits only its addresses (trusted proxies applied) to the
operator's side, on whichever listener serves it: 403 ``auth.ip_forbidden`` for the rest.
"""

from __future__ import annotations

import json
from typing import Any

from ..settings import Settings
from .auth import client_address

__all__ = ["PUBLIC_PATHS", "Surfaces"]

PUBLIC_PATHS = ("/health", "/ready")
_WILDCARDS = ("", "0.0.0.0", "::", "[::]")  # noqa: S104 - addresses compared, never bound


class Surfaces:
    """The listener and address rules of one app (see the module's docstring)."""

    def __init__(self, settings: Settings, callback_paths: list[str]) -> None:
        self.settings = settings
        self.callbacks = {path.rstrip("/") for path in callback_paths}
        self.listen = settings.operator_listen

    @classmethod
    def of(cls, settings: Settings, callback_paths: list[str]) -> Surfaces | None:
        if settings.operator_listen is None and not settings.operator_allowed_ips:
            return None
        return cls(settings, callback_paths)

    def _public_path(self, path: str) -> bool:
        trimmed = path.rstrip("/") or "/"
        return trimmed in self.callbacks

    def _on_operator_listener(self, scope: Any) -> bool:
        assert self.listen is not None
        host, port = self.listen
        server = scope.get("server") or (None, None)
        return bool(server[1] == port and (host in _WILDCARDS or server[0] == host))

    def refusal(self, scope: Any) -> tuple[int, str] | None:
        """``None`` when ``scope`` may be served here, else its status and error key."""
        path = scope["path"]
        if path.rstrip("/") in PUBLIC_PATHS:
            return None
        operator_side = not self._public_path(path)
        if self.listen is not None and operator_side != self._on_operator_listener(scope):
            return 404, "not_found"
        allowed = self.settings.operator_allowed_ips
        if operator_side and allowed:
            peer = scope.get("client")
            headers = dict(scope.get("headers") or ())
            forwarded = headers.get(b"x-forwarded-for")
            address = client_address(
                peer[0] if peer else None,
                forwarded.decode("latin-1") if forwarded else None,
                self.settings.trusted_proxies,
            )
            if address is None or not any(address in network for network in allowed):
                return 403, "auth.ip_forbidden"
        return None

    async def admit(self, scope: Any, send: Any) -> bool:
        """Whether to serve ``scope``; if not, its refusal is sent."""
        refused = self.refusal(scope)
        if refused is None:
            return True
        status, key = refused
        message = "not found" if status == 404 else "this address may not reach the operator side"
        body = json.dumps({"error": key, "message": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return False
