"""The trail of every ``/admin`` request: one JSON line on ``ledger.operator``, and for a call
with the operator token that changes something or exports a list, an audit entry.

Every request under ``/admin``, answered or refused, writes the line (see :func:`operator_log`):
an operator can trace who moved which money when, and who tried. A handler adds its own details
(the user, the amount...) to its request's line with :func:`note`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from litestar import Request
from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ...errors import LedgerError
from ...operators import Operators
from ...service import Ledger
from ...settings import Settings
from ..auth import check_operator, client_address
from ..logs import fingerprint, iso_utc
from ..runtime import Runtime
from ..slashes import decode_params

__all__ = ["LOGGED_TEXT", "note", "operator_log"]

log = logging.getLogger("ledger.operator")

# The key, in the ASGI scope's state, of the details a handler adds to its request's log line.
_LOG_DETAILS = "ledger.operator_log"

# Logged texts are cut to this many characters: a hostile 200 KB user id must not become a
# 200 KB log line.
LOGGED_TEXT = 128

# An error body is read for its key up to this size (error bodies are small; a failed
# /admin/check's names its problems, and its handler names its key itself).
_ERROR_BODY = 64 * 1024


def note(request: Request[Any, Any, Any], **fields: Any) -> None:
    """Add ``fields`` to this request's operator log line."""
    details = request.scope.get("state", {}).get(_LOG_DETAILS)
    if isinstance(details, dict):
        details.update(fields)


def _bounded(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    text = str(value)
    return text if len(text) <= LOGGED_TEXT else text[:LOGGED_TEXT] + "..."


def operator_log(runtime: Runtime) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware writing one JSON line per operator request on ``ledger.operator``.

    The line says when (``ts``, ISO-8601 UTC, as the answer is sent), who (``who``: the
    fingerprint of the bearer token presented, never the token), from where (``ip``), what
    (``method``, ``path``, ``query``; for a deposit or withdrawal ``user``, ``currency``,
    ``amount``, ``reference`` and ``applied``) and the outcome (``status``, ``error``).

    A call with the operator token that changes something or exports a list is also written to
    the audit log (:func:`_audited`), as the console's actions are.
    """
    settings = runtime.settings

    def middleware(app: ASGIApp) -> ASGIApp:
        async def logged(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:  # pragma: no cover - the router serves HTTP only
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            decode_params(scope)
            details: dict[str, Any] = {}
            scope.setdefault("state", {})[_LOG_DETAILS] = details
            status = 500
            body = bytearray()

            async def capture(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                elif message["type"] == "http.response.body" and status >= 400:
                    body.extend(message.get("body", b"")[: _ERROR_BODY - len(body)])
                await send(message)

            try:
                await app(scope, receive, capture)
            finally:
                line = _log_line(scope, settings, status, bytes(body), details)
                line["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
                log.log(
                    logging.INFO if status < 500 else logging.ERROR,
                    json.dumps(line, separators=(",", ":")),
                )
                await _audited(runtime, scope, line)

        return logged

    return middleware


# Written by the route itself (an export of the audit log records itself, with its filter).
_SELF_AUDITED = ("/admin/audit",)
_ACTION_OF_PATH = {
    "/admin/deposits": "deposit",
    "/admin/withdrawals": "withdrawal",
    "/admin/reconciliations": "reconcile",
}


_LIMIT_FIELDS = ("kind", "period", "until", "reason", "by")


def _action_of_user_path(path: str) -> str:
    """The action of a write under ``/admin/users/{uid}``: a limit's change or an exclusion."""
    if path.startswith("/admin/users/"):
        if path.endswith("/exclusions"):
            return "exclude"
        if path.endswith("/exclusions/lift"):
            return "lift_exclusion"
        if "/limits" in path:
            return "limit"
    return "admin"


async def _audited(runtime: Runtime, scope: Scope, line: dict[str, Any]) -> None:
    """Write the audit entry of an operator-token call that changes something or exports a list
    (as ``token:<fingerprint>``); reads and calls without the token are only logged."""
    settings = runtime.settings
    path, method = str(scope["path"]).rstrip("/"), scope.get("method")
    export = b"format=csv" in scope.get("query_string", b"")
    if (method in ("GET", "HEAD") and not export) or path in _SELF_AUDITED:
        return
    headers = Headers.from_scope(scope)
    try:
        check_operator(headers.get("authorization"), settings)
    except LedgerError:
        return
    action = "export" if export else _ACTION_OF_PATH.get(path) or _action_of_user_path(path)
    status = line["status"]
    outcome = "ok" if status < 400 else str(line.get("error") or f"http.{status}")
    who = f"token:{line['who']}"
    noted = {
        name: line.get(name)
        for name in ("currency", "amount", "reference", "applied", "request_id")
    }
    # A limit's change or an exclusion: what was asked, and who asked (the player or staff).
    noted.update({name: line[name] for name in _LIMIT_FIELDS if name in line})
    target = line.get("user") or path

    def write(ledger: Ledger) -> None:
        Operators(ledger.store).record(
            who, line["ip"], action, target, outcome=outcome, method=method, path=path, **noted
        )

    try:
        await runtime.call(write)
    except LedgerError as exc:
        log.warning("operator call not audited: %s", exc.message)


def _log_line(
    scope: Scope, settings: Settings, status: int, body: bytes, details: dict[str, Any]
) -> dict[str, Any]:
    headers = Headers.from_scope(scope)
    scheme, _, presented = (headers.get("authorization") or "").strip().partition(" ")
    presented = presented.strip()
    client = scope.get("client")
    address = client_address(
        client[0] if client else None, headers.get("x-forwarded-for"), settings.trusted_proxies
    )
    error = details.pop("error", None)
    if error is None and status >= 400:
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        error = answer.get("error") if isinstance(answer, dict) else None
    query = scope.get("query_string", b"").decode("latin-1")
    line: dict[str, Any] = {
        "msg": "operator",
        "ts": iso_utc(time.time()),
        "who": fingerprint(presented) if scheme.lower() == "bearer" and presented else None,
        "ip": str(address) if address else None,
        "method": scope.get("method"),
        "path": _bounded(scope["path"]),
        "query": _bounded(query) if query else None,
        "status": status,
        "error": _bounded(error),
        "request_id": _bounded(headers.get("x-request-id")),
    }
    line.update({name: _bounded(value) for name, value in details.items()})
    return line
