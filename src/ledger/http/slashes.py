"""User uids with ``/`` in them, reachable under ``/admin/users/{uid}/...``.

A uid may hold any character, and a client writes ``/`` in it as ``%2F``. The server decodes
the path before routing, so ``/admin/users/a%2Fb/balances`` became ``/admin/users/a/b/balances``,
a route that does not exist (404). When the raw path holds an encoded ``/``, the path is routed
with ``%2F`` (and ``%25``, so that a literal ``%2F`` stays apart) still encoded, and the path
parameters are decoded once the route is found (:func:`decode_params`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

__all__ = ["decode_params", "route_encoded_slashes"]

ESCAPED = "ledger.escaped_path"
_KEPT = re.compile(r"(%2[fF]|%25)")


def route_encoded_slashes(scope: Any) -> None:
    """Before routing: keep ``%2F`` and ``%25`` encoded in ``scope["path"]`` if the raw path
    has any (a path decoded twice, as some clients' test transports do, stays right too)."""
    raw = scope.get("raw_path")
    if not raw or (b"%2f" not in (lowered := raw.lower()) and b"%25" not in lowered):
        return
    path = raw.partition(b"?")[0].decode("latin-1")
    parts = _KEPT.split(path)
    scope["path"] = "".join(
        part.upper() if index % 2 else unquote(part) for index, part in enumerate(parts)
    )
    scope.setdefault("state", {})[ESCAPED] = True


def decode_params(scope: Any) -> None:
    """After routing: the path parameters of a path :func:`route_encoded_slashes` kept encoded,
    decoded (a new dict: the router's cache holds the one it handed over)."""
    if scope.get("state", {}).get(ESCAPED):
        scope["path_params"] = {
            name: unquote(value) if isinstance(value, str) else value
            for name, value in scope.get("path_params", {}).items()
        }
