"""The operator API under ``/admin``: money in and out, and read-only views of the books.

It has its own bearer token (``LEDGER_OPERATOR_TOKEN``), checked by a guard on the whole router in
constant time. With no token configured the API answers 403 ``operator.disabled``: an unprotected
deposit endpoint would be a money printer.

Amounts in request bodies are parsed exactly (:func:`ledger.contract.parse_json`), whether sent
as JSON numbers or decimal strings, and answered as decimal strings.

Every request under ``/admin``, answered or refused, writes one JSON line on the
``ledger.operator`` logger (see :func:`_operator_log`): an operator can trace who moved which
money when, and who tried.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any

from litestar import Request, Response, Router, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter
from litestar.response import Stream
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from .. import views
from ..contract import parse_json
from ..deliveries import DeliveryFilter
from ..errors import BetNotFound, InvalidRequest, LedgerError, UserNotFound
from ..operators import Operators
from ..paging import DEFAULT_LIMIT, EXPORT_PAGE, Page, csv_lines, every
from ..service import Ledger, parse_instant
from ..settings import Settings
from ..storable import storable
from ..views import Balance, HoldView, Movement, StatementLine
from .auth import check_operator, client_address
from .callbacks import require_json
from .console.audit import audit_answer
from .filenames import CSV, attachment
from .logs import fingerprint, iso_utc
from .openapi import DELIVERIES, OPERATOR_SECURITY, operator_docs
from .params import parse_id
from .runtime import Runtime
from .slashes import decode_params

__all__ = ["operator_router"]

log = logging.getLogger("ledger.operator")

# The key, in the ASGI scope's state, of the details a handler adds to its request's log line.
_LOG_DETAILS = "ledger.operator_log"

# Logged texts are cut to this many characters: a hostile 200 KB user id must not become a
# 200 KB log line.
LOGGED_TEXT = 128

# An error body is read for its key up to this size (error bodies are small; a failed
# /admin/check's names its problems, and its handler names its key itself).
_ERROR_BODY = 64 * 1024

UserId = Annotated[str, PathParameter(description="The user's uid on the operator side")]


def operator_router(runtime: Runtime) -> Router:
    """The ``/admin`` router, bound to ``runtime``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        check_operator(connection.headers.get("authorization"), runtime.settings)

    @post(
        "/deposits",
        status_code=200,
        summary="Credit a user from outside (idempotent)",
        **operator_docs(movement=True),
    )
    async def deposit(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        _note(request, user=user, currency=currency, amount=amount, reference=reference)
        # Its event carries the caller's X-Request-Id, like a callback's.
        request_id = _request_id(request)
        movement = await runtime.call(
            lambda ledger: ledger.deposit(user, currency, amount, reference, request_id=request_id)
        )
        return _answer(request, movement)

    @post(
        "/withdrawals",
        status_code=200,
        summary="Pay a user out (idempotent, no overdraft)",
        **operator_docs(movement=True, funds=True),
    )
    async def withdrawal(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        _note(request, user=user, currency=currency, amount=amount, reference=reference)
        # Its event carries the caller's X-Request-Id, like a callback's.
        request_id = _request_id(request)
        movement = await runtime.call(
            lambda ledger: ledger.withdraw(user, currency, amount, reference, request_id=request_id)
        )
        return _answer(request, movement)

    @get(
        "/users/{uid:str}/balances",
        summary="A user's available and held balances, now or at a past moment",
        **operator_docs("request.invalid", "user.not_found"),
    )
    async def balances(
        uid: UserId,
        at: Annotated[
            str | None,
            QueryParameter(
                description="ISO 8601 moment with a zone (2026-11-20T00:00:00Z): the balances "
                "then, exactly"
            ),
        ] = None,
    ) -> dict[str, Any]:
        if at is not None:
            moment = parse_instant(at, "at")

            def read_at(ledger: Ledger) -> list[Balance]:
                ledger.require_user(uid)
                return ledger.balance_at(uid, moment)

            return views.balances_at_dict(uid, moment, await runtime.call(read_at))
        found = await runtime.call(lambda ledger: ledger.user(uid))
        if found is None:
            # Not an empty 200: an unknown user must not look like one with nothing.
            raise UserNotFound(f"user {uid} is unknown")
        return views.balances_dict(uid, found.balances or [])

    @get(
        "/users/{uid:str}/statement",
        summary="A user's movements, newest first, with the balance after each; paginated",
        **operator_docs("request.invalid", "request.invalid_cursor", "user.not_found"),
    )
    async def statement(
        uid: UserId,
        currency: Annotated[str | None, QueryParameter(description="Only this currency")] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=10_000)] = 50,
        before: Annotated[
            str | None,
            QueryParameter(description="The previous page's next (or, older form, next_before)"),
        ] = None,
        format: Annotated[
            str, QueryParameter(description="json, or csv for every line (streamed)")
        ] = "json",
    ) -> Any:
        """Page through with ``before`` set to the previous page's ``next``;
        ``format=csv`` exports every line from ``before`` on, read a page at a time."""
        csv = _csv_format(format)

        def read(ledger: Ledger) -> Page[StatementLine]:
            # The page first: a bad cursor is a 400 whoever the user is.
            page = ledger.statement_page(
                uid, currency, limit=EXPORT_PAGE if csv else limit, before=before
            )
            ledger.require_user(uid)
            return page

        page = await runtime.call(read)
        if csv:
            return _csv_stream(
                runtime,
                page,
                lambda ledger, after: ledger.statement_page(
                    uid, currency, limit=EXPORT_PAGE, before=after
                ),
                views.STATEMENT_COLUMNS,
                f"statement-{uid}.csv",
            )
        return views.statement_dict(uid, page.items, page.next)

    @get(
        "/holds",
        summary="Open holds (placed bets not yet settled or refunded), oldest first",
        **operator_docs("request.invalid", "request.invalid_cursor"),
    )
    async def holds(
        stale: Annotated[
            bool, QueryParameter(description="Only the stale ones: the bets to chase")
        ] = False,
        user: Annotated[str | None, QueryParameter(description="Only this user's")] = None,
        pool: Annotated[str | None, QueryParameter(description="Only this tournament's")] = None,
        older_than: Annotated[
            str | None, QueryParameter(description="Placed longer ago than this: 2d, 12h, 90m")
        ] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=1000)] = 50,
        before: Annotated[
            str | None, QueryParameter(description="The previous page's next")
        ] = None,
        format: Annotated[
            str, QueryParameter(description="json, or csv for every hold (streamed)")
        ] = "json",
    ) -> Any:
        csv = _csv_format(format)
        pool_uid = None if pool is None else parse_id(pool, "pool")

        def read(ledger: Ledger, after: str | None, size: int) -> Page[HoldView]:
            return ledger.holds(
                stale=stale,
                user=user,
                pool_uid=pool_uid,
                older_than=older_than,
                limit=size,
                before=after,
            )

        page = await runtime.call(
            lambda ledger: read(ledger, before, EXPORT_PAGE if csv else limit)
        )
        if csv:
            return _csv_stream(
                runtime,
                page,
                lambda ledger, after: read(ledger, after, EXPORT_PAGE),
                views.HOLD_COLUMNS,
                "holds.csv",
            )
        return views.holds_dict(page.items, page.next)

    @get(
        "/house",
        summary="The house accounts per currency, and a period's totals",
        **operator_docs("request.invalid"),
    )
    async def house(
        since: Annotated[
            str | None, QueryParameter(description="ISO 8601 with a zone; from (inclusive)")
        ] = None,
        until: Annotated[
            str | None, QueryParameter(description="ISO 8601 with a zone; until (exclusive)")
        ] = None,
        currency: Annotated[str | None, QueryParameter(description="Only this currency")] = None,
    ) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.house(since, until, currency))
        return found.to_dict()

    @get(
        "/bets/{bet_uid:str}",
        summary="A bet as the ledger recorded it",
        **operator_docs("request.invalid", "bet.not_found"),
    )
    async def bet(bet_uid: Annotated[str, PathParameter(description="bet.uid")]) -> dict[str, Any]:
        uid = parse_id(bet_uid, "bet_uid")
        found = await runtime.call(lambda ledger: ledger.bet(uid))
        if found is None:
            raise BetNotFound(f"bet {uid} is unknown", bet_uid=uid)
        return found.to_dict()

    @get(
        "/tournaments/{pool_uid:str}/report",
        summary="A tournament's entries, stakes, payouts",
        **operator_docs("request.invalid"),
    )
    async def report(
        pool_uid: Annotated[str, PathParameter(description="pool.uid")],
    ) -> dict[str, Any]:
        uid = parse_id(pool_uid, "pool_uid")
        found = await runtime.call(lambda ledger: ledger.pool_report(uid))
        return found.to_dict()

    @get(
        "/check",
        summary="Verify the journal's invariants (500 when any fails)",
        **operator_docs("ledger.check_failed"),
    )
    async def check(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        """200 with ``ok: true`` when the books hold; 500 with the problems when they do not,
        so that a monitoring probe (``curl -f``) fails loudly."""
        found = await runtime.call(lambda ledger: ledger.check())
        body = views.check_dict(found)
        if not found.ok:
            _note(request, error="ledger.check_failed")
            body["error"] = "ledger.check_failed"
            body["message"] = f"{len(found.problems)} invariant(s) violated"
        return Response(body, status_code=200 if found.ok else 500)

    @get(
        "/deliveries",
        summary="The callback delivery journal, newest first, paginated (or all of it as CSV)",
        **operator_docs("request.invalid", success=DELIVERIES),
    )
    async def deliveries(
        request_id: Annotated[str | None, QueryParameter(description="X-Request-Id")] = None,
        bet: Annotated[str | None, QueryParameter(description="Named this bet uid")] = None,
        status: Annotated[str | None, QueryParameter(description="Answered this status")] = None,
        event: Annotated[str | None, QueryParameter(description="X-Callback-Event")] = None,
        since: Annotated[str | None, QueryParameter(description="Received at or after")] = None,
        until: Annotated[str | None, QueryParameter(description="Received before")] = None,
        limit: Annotated[str | None, QueryParameter(description="Page size, 1 to 1000")] = None,
        before: Annotated[str | None, QueryParameter(description="The previous next")] = None,
        output: Annotated[str | None, QueryParameter(name="format", description="csv")] = None,
    ) -> Response[Any]:
        """``{"deliveries": [...], "next"}``; page on with ``before`` set to ``next``.
        ``format=csv`` streams every page matching the filters (``limit``/``before`` ignored)."""
        wanted = DeliveryFilter.parse(
            request_id=request_id,
            bet=bet,
            status=status,
            event=event,
            since=since,
            until=until,
        )
        if output not in (None, "", "json", "csv"):
            raise InvalidRequest(f"format: expected json or csv, got {output[:16]!r}")
        if output == "csv":
            ledger = await runtime.offload(runtime.ledger)
            rows = every(lambda after: ledger.deliveries(wanted, limit=EXPORT_PAGE, before=after))
            # A plain iterator: Litestar draws each chunk on a worker thread, so the page reads
            # never block the event loop, and only one page is in memory at a time.
            lines = csv_lines(map(views.delivery_dict, rows), views.DELIVERY_COLUMNS)
            return Stream(
                lines,
                media_type=CSV,
                headers={"Content-Disposition": 'attachment; filename="deliveries.csv"'},
            )
        size = DEFAULT_LIMIT if limit in (None, "") else parse_id(limit, "limit")
        page = await runtime.call(
            lambda ledger: ledger.deliveries(wanted, limit=size, before=before)
        )
        return Response(views.deliveries_dict(page.items, page.next))

    # Imported here: the directory's and the feed's modules use this one's helpers.
    from .directory import directory_handlers
    from .events import events_handler
    from .webhooks import webhook_handlers

    @get(
        "/audit",
        summary="The console operators' audit log, newest first, paged; CSV with format=csv",
        **operator_docs("request.invalid"),
    )
    async def audit(
        request: Request[Any, Any, Any],
        action: Annotated[str | None, QueryParameter(description="Only this action")] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=1000)] = 50,
        after: Annotated[str | None, QueryParameter(description="The previous page's next")] = None,
        format: Annotated[str, QueryParameter(description="json or csv (every entry)")] = "json",
    ) -> Response[Any]:
        """Who (operator), when, from where (ip), what (action, target, detail), outcome."""
        return await audit_answer(request, runtime, action, limit, after, format)

    handlers: list[HTTPRouteHandler] = [
        audit,
        deposit,
        withdrawal,
        balances,
        statement,
        holds,
        house,
        bet,
        report,
        check,
        _reconciliations(runtime),
        deliveries,
        events_handler(runtime),
        *directory_handlers(runtime),
        *webhook_handlers(runtime),
    ]
    return Router(
        path="/admin",
        route_handlers=handlers,
        guards=[guard],
        # Outside the guard: refused requests (401, 403) are logged too.
        middleware=[_operator_log(runtime)],
        security=OPERATOR_SECURITY,
        tags=["operator"],
    )


def _reconciliations(runtime: Runtime) -> HTTPRouteHandler:
    """``POST /admin/reconciliations``: the platform's file as the body, the report back."""

    @post(
        "/reconciliations",
        status_code=200,
        summary="Compare a platform file of bets with the books (reads only)",
        **operator_docs("request.invalid", "request.too_large", "reconcile.unreadable_file"),
    )
    async def reconciliations(
        request: Request[Any, Any, Any],
        pools_only: Annotated[
            bool, QueryParameter(description="Compare with the file's pools only")
        ] = False,
        limit: Annotated[
            int, QueryParameter(description="Differing bets listed at most", ge=1, le=100_000)
        ] = 1000,
    ) -> dict[str, Any]:
        """The body is the platform's record of its bets, CSV, TSV, a JSON array or JSON lines
        (detected); the answer is the report, 200 whether or not the books agree (``ok``)."""
        body = await request.body()

        def work(ledger: Ledger) -> dict[str, Any]:
            with ledger.reconcile(body, pools_only=pools_only) as found:
                return found.to_dict(limit)

        report = await runtime.call(work)
        _note(request, ok=report["ok"], differing=report["differing"])
        return report

    return reconciliations


def _movement(body: bytes) -> tuple[str, str, Any, str]:
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    missing = [name for name in ("user", "currency", "amount", "reference") if name not in data]
    if missing:
        # The reference is required: it is what makes a retried deposit land once.
        raise InvalidRequest(f"missing field(s): {', '.join(missing)}")
    for name in ("user", "currency", "reference"):
        if not isinstance(data[name], str):
            raise InvalidRequest(f"{name}: expected a string")
    return data["user"], data["currency"], data["amount"], data["reference"]


def _answer(request: Request[Any, Any, Any], movement: Movement) -> dict[str, Any]:
    answer = movement.to_dict()
    _note(request, **answer)
    return answer


def _note(request: Request[Any, Any, Any], **fields: Any) -> None:
    """Add ``fields`` to this request's operator log line."""
    details = request.scope.get("state", {}).get(_LOG_DETAILS)
    if isinstance(details, dict):
        details.update(fields)


def _request_id(request: Request[Any, Any, Any]) -> str | None:
    """The caller's X-Request-Id as its event keeps it: up to the column's 255 characters."""
    found = request.headers.get("x-request-id")
    return None if found is None else storable(found[:255])


def _bounded(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    text = str(value)
    return text if len(text) <= LOGGED_TEXT else text[:LOGGED_TEXT] + "..."


def _operator_log(runtime: Runtime) -> Callable[[ASGIApp], ASGIApp]:
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
    action = "export" if export else _ACTION_OF_PATH.get(path, "admin")
    status = line["status"]
    outcome = "ok" if status < 400 else str(line.get("error") or f"http.{status}")
    who = f"token:{line['who']}"
    noted = {
        name: line.get(name)
        for name in ("currency", "amount", "reference", "applied", "request_id")
    }
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


class _CsvStream(Stream):
    """A streamed CSV answer: its own media type, not the route's (JSON for the page form)."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = self.media_type
        return super().to_asgi_response(*args, **kwargs)


def _csv_format(value: str) -> bool:
    if value not in ("json", "csv"):
        raise InvalidRequest(f"format: expected json or csv, got {value!r}")
    return value == "csv"


def _csv_stream(
    runtime: Runtime,
    first: Page[Any],
    read: Callable[[Ledger, str], Page[Any]],
    columns: Sequence[str],
    filename: str,
) -> _CsvStream:
    """CSV of ``first`` and every page after it, read one page at a time as the client takes
    them: a year of a busy user's statement never sits in memory. The first page is read before
    answering, so that bad input is still a 4xx; a failure later cuts the stream short."""
    ledger = runtime.ledger()

    def rows() -> Iterator[dict[str, Any]]:
        page = first
        while True:
            yield from (item.to_dict() for item in page.items)
            if page.next is None:
                return
            page = read(ledger, page.next)

    def chunks() -> Iterator[str]:
        # Litestar hands each item of a sync iterator over from a worker thread: send ~64 KB
        # at a time, not a line at a time.
        buffer: list[str] = []
        size = 0
        for line in csv_lines(rows(), columns):
            buffer.append(line)
            size += len(line)
            if size >= 65_536:
                yield "".join(buffer)
                buffer, size = [], 0
        if buffer:
            yield "".join(buffer)

    return _CsvStream(
        chunks(),
        media_type=CSV,
        headers={"Content-Disposition": attachment(filename)},
    )
