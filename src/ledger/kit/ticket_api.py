"""The simulated platform's ticket administration API (contract section 4.2), in memory.

The simulator serves it on a loopback port so that :mod:`ledger.kit.tickets` can be exercised over
real HTTP, and issues the ticket JWTs its Place Bet callbacks carry. Where the contract is silent
(paths, auth statuses, 422 conditions, limits) the choices are stated at each place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

import jwt
from litestar import Litestar, Request, Response, delete, get, post

from .platform import dumps
from .server_thread import ServerThread
from .ticket_store import MAX_LIMIT, StoredTicket, TicketProblem, TicketStore

# The tickets themselves live in .ticket_store; the server thread in .server_thread. Both are
# named here too, beside the app, because the kit's callers start the three together.
__all__ = ["ServerThread", "StoredTicket", "TicketStore", "create_ticket_app"]


def _problem(status: int, message: str, error: str) -> Response[bytes]:
    return _json(status, {"message": message, "error": error})


def _json(status: int, data: Any) -> Response[bytes]:
    return Response(content=dumps(data).encode(), status_code=status, media_type="application/json")


def _authorize(header: str | None, *, client_name: str, secrets: tuple[str, ...]) -> None:
    """``Bearer <client_name> <admin_jwt>`` (contract 5.3 and 5.4).

    The contract does not show the statuses: 401 for a missing or invalid token, 403 for a
    valid token of the wrong client or without the admin role.
    """
    parts = (header or "").split()
    if len(parts) != 3 or parts[0].lower() != "bearer":
        raise TicketProblem(401, "auth.invalid_token", "expected 'Bearer <client_name> <JWT>'")
    _, client, token = parts
    claims: dict[str, Any] | None = None
    for secret in secrets:
        try:
            claims = jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["exp"]})
            break
        except jwt.InvalidSignatureError:
            continue
        except jwt.PyJWTError as exc:
            raise TicketProblem(401, "auth.invalid_token", str(exc)) from None
    if claims is None:
        raise TicketProblem(401, "auth.invalid_token", "signature verification failed")
    if client != client_name:
        raise TicketProblem(403, "auth.forbidden", f"unknown client {client!r}")
    if claims.get("role") != "admin":
        raise TicketProblem(403, "auth.forbidden", "the token's role must be admin")
    if not any(claims.get(name) not in (None, "") for name in ("id", "uid", "sub")):
        raise TicketProblem(401, "auth.invalid_token", "an admin token needs id, uid or sub")


def _int(value: str, name: str, minimum: int, maximum: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise TicketProblem(400, "request.invalid", f"{name} must be an integer") from None
    if number < minimum or (maximum is not None and number > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise TicketProblem(400, "request.invalid", f"{name} must be {bound}")
    return number


def create_ticket_app(
    store: TicketStore,
    *,
    client_name: str,
    secrets: tuple[str, ...] | None = None,
) -> Litestar:
    """The ticket API as a Litestar app: POST/GET ``/tournament_tickets``, DELETE ``/{id}``."""
    accepted = secrets or (store.secret,)

    def guarded(action: Callable[[], Any], request: Request[Any, Any, Any]) -> Response[bytes]:
        try:
            _authorize(
                request.headers.get("authorization"), client_name=client_name, secrets=accepted
            )
            return _json(200, action())
        except TicketProblem as problem:
            return _problem(problem.status, problem.message, problem.error)

    @post("/tournament_tickets", status_code=200)
    async def create_tickets(request: Request[Any, Any, Any]) -> Response[bytes]:
        raw = await request.body()

        def action() -> Any:
            try:
                body = json.loads(raw, parse_float=Decimal) if raw else None
            except ValueError:
                raise TicketProblem(
                    422, "tournament_ticket.invalid", "the body is not JSON"
                ) from None
            return store.create(body)

        return guarded(action, request)

    @get("/tournament_tickets")
    async def list_tickets(request: Request[Any, Any, Any]) -> Response[bytes]:
        def action() -> Any:
            query = parse_qsl(
                request.scope.get("query_string", b"").decode(), keep_blank_values=True
            )
            ids: list[int] | None = None
            options: dict[str, Any] = {}
            for name, value in query:
                if name in ("ids", "ids[]"):
                    # Repeated ids=, Rails-style ids[]= and comma-separated lists all work.
                    ids = (ids or []) + [
                        _int(part, "ids", 1) for part in value.split(",") if part.strip()
                    ]
                elif name == "user_id":
                    options["user_id"] = value
                elif name == "ref":
                    options["ref"] = value
                elif name == "limit":
                    options["limit"] = _int(value, "limit", 1, MAX_LIMIT)
                elif name == "page":
                    options["page"] = _int(value, "page", 0)
            return store.list(ids=ids, **options)

        return guarded(action, request)

    @delete("/tournament_tickets/{ticket_id:str}", status_code=200)
    async def delete_ticket(request: Request[Any, Any, Any]) -> Response[bytes]:
        ticket_id = str(request.path_params["ticket_id"])
        return guarded(lambda: store.delete(_int(ticket_id, "id", 1)), request)

    return Litestar(
        route_handlers=[create_tickets, list_tickets, delete_ticket],
        openapi_config=None,
        # Litestar's default logging set-up would reconfigure the host process's root logger.
        logging_config=None,
        debug=False,
    )
