"""The platform's callbacks: ``POST /bets``, ``/bets/cancel``, ``/winners`` (contract 4.1).

Every delivery goes through :func:`_deliver`, in this order: the caller's address (allowlist), its
token (401/403), the ``X-Callback-Event`` header (400 on a mismatch), the body (413 over the limit),
then the ledger. The raw body bytes go to the ledger unparsed, because its JSON parser keeps every
number exact; Litestar's parser would not. The ledger answers every callback with a future of its
durable result (:mod:`ledger.writer`), which the handler awaits on the event loop.

Each delivery, whatever its outcome, writes one JSON log line on the ``ledger.http`` logger (and
nothing else goes there, so that it is a clean JSON-lines stream) and updates the metrics; the
line's ``event`` is the event the delivery was counted as in the metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import msgspec
from litestar import Request, post
from litestar.exceptions import HTTPException
from litestar.handlers import HTTPRouteHandler
from litestar.response.base import ASGIResponse
from litestar.types import ASGIApp, Receive, Scope, Send
from msgspec import Struct

from ..contract import (
    PLACE_BET,
    PLATFORM_TIMEOUTS,
    REFUND_BET,
    REFUND_TOURNAMENT,
    SETTLE_BET,
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
    validate,
)
from ..deliveries import Delivery, DeliveryRecord, answered_uids
from ..domain import ClosedBets, PlacedBets
from ..errors import InvalidRequest, LedgerError, StoreBusy, UnsupportedMediaType
from ..service import Ledger
from ..storable import storable
from .asgi_request import header_text, headers_of, read_body
from .auth import authenticate, client_address, require_address, require_role
from .errors import http_error_key, send_error
from .logs import log_json
from .openapi import callback_docs
from .runtime import Runtime

__all__ = ["callback_handlers", "callback_routes", "require_json"]

log = logging.getLogger("ledger.http")
# Not ledger.http: that logger is a clean JSON-lines stream of deliveries.
log_journal = logging.getLogger("ledger.journal")

# Seconds a delivery may take before it is answered 503: the platform's timeouts less a margin
# for the answer to travel.
DEADLINES = {event: timeout - 10.0 for event, timeout in PLATFORM_TIMEOUTS.items()}

# A log line names at most this many bet uids (a settle may carry a million).
LOGGED_UIDS = 20
# X-Request-Id is kept (logged and journalled) up to the journal column's 255 characters, and an
# error message up to LOGGED_MESSAGE: a 16 MB header was once written whole into the log line.
REQUEST_ID_MAX = 255
# A body over this is decoded on one of the runtime's worker threads: a million-participant
# settle is 300 MB of JSON and seconds of decoding, during which the event loop keeps answering
# other deliveries and /health. No faster (benchmark (c) alike with and without); only the
# loop's latency is at stake.
OFF_LOOP_BODY = 64 * 1024
LOGGED_MESSAGE = 500


@dataclass(frozen=True)
class Answer:
    """What the ledger did, as the response body and the bet uids to log."""

    body: dict[str, Any]
    bet_uids: Sequence[int]


def _answer(result: PlacedBets | ClosedBets) -> Answer:
    if isinstance(result, PlacedBets):
        return Answer({"secrets": result.secrets}, answered_uids(result))
    # Counts, not uid lists: a settle answer for a million participants would be megabytes that
    # the platform ignores anyway.
    return Answer(
        {"closed": len(result.closed), "unchanged": len(result.unchanged)}, answered_uids(result)
    )


Submit = Callable[
    [Ledger, bytes | bytearray, Delivery | None], "Future[PlacedBets] | Future[ClosedBets]"
]


@dataclass(frozen=True)
class CallbackRoute:
    """One callback endpoint: which events it accepts, who may call it, what it submits."""

    path: str
    events: tuple[str, ...]  # the first is the default, used when the header is absent
    roles: tuple[str, ...]
    need_subject: bool
    model: type[Struct]
    submit: Submit
    summary: str
    description: str


def require_json(content_type: str | None) -> None:
    """Refuse a body declared as something other than JSON (415); an undeclared one is read.

    The body is parsed as JSON whatever its label, so without this a form post or a text/plain
    body that happened to be valid JSON would move money: found by the hostile-input tests.
    """
    if content_type is None:
        return
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaType(f"Content-Type {media or 'empty'!r}: expected application/json")


def _callbacks(refund_tournament_path: str | None) -> list[CallbackRoute]:
    # Keep accepting cancel:tournament on /bets/cancel even with a separate path configured:
    # the contract makes /bets/cancel the default, and refusing it would strand a re-send that
    # the platform still routes there during a switch-over.
    refund_events = (REFUND_BET, REFUND_TOURNAMENT)
    callbacks = [
        CallbackRoute(
            "/bets",
            (PLACE_BET,),
            ("user", "admin"),
            False,
            PlaceBetsRequest,
            lambda ledger, body, delivery: ledger.submit_place_bets(body, delivery=delivery),
            "Place Bet",
            "Hold `amount + rake` for each entry, all or none; free entries hold nothing. "
            "Answers `{secrets}`; 402 `user.insufficient_funds` when the user is short.",
        ),
        CallbackRoute(
            "/bets/cancel",
            refund_events,
            ("admin",),
            True,
            RefundRequest,
            lambda ledger, body, delivery: ledger.submit_refund(body, delivery=delivery),
            "Refund Bet / Refund Tournament",
            "Reverse each named bet's hold exactly once, all or none.",
        ),
        CallbackRoute(
            "/winners",
            (SETTLE_BET,),
            ("admin",),
            True,
            SettleRequest,
            lambda ledger, body, delivery: ledger.submit_settle(body, delivery=delivery),
            "Settle Bet",
            "Capture each hold and credit positive payouts, each bet exactly once, all or none.",
        ),
    ]
    if refund_tournament_path:
        callbacks.append(
            CallbackRoute(
                refund_tournament_path,
                (REFUND_TOURNAMENT,),
                ("admin",),
                True,
                RefundRequest,
                lambda ledger, body, delivery: ledger.submit_refund(body, delivery=delivery),
                "Refund Tournament",
                "Refund every named bet of a cancelled tournament exactly once, all or none.",
            )
        )
    return callbacks


def callback_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The route handlers of every configured callback, bound to ``runtime``."""
    return [
        _handler(runtime, callback)
        for callback in _callbacks(runtime.settings.refund_tournament_path)
    ]


def callback_routes(runtime: Runtime) -> dict[str, ASGIApp]:
    """Every configured callback as a bare ASGI app, by its exact path (see ``ledger.http.app``).

    The same delivery as the route handler's, answered the same way, errors included: only
    Litestar's routing, request object and response machinery are left out.
    """

    def route(callback: CallbackRoute) -> ASGIApp:
        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                answer = await _deliver(runtime, callback, scope, receive)
            except Exception as error:  # noqa: BLE001 - rendered by the app's one error table
                await send_error(scope, receive, send, error)
                return
            await answer(scope, receive, send)

        return serve

    return {
        callback.path: route(callback)
        for callback in _callbacks(runtime.settings.refund_tournament_path)
    }


def _handler(runtime: Runtime, callback: CallbackRoute) -> HTTPRouteHandler:
    async def handle(request: Request[Any, Any, Any]) -> ASGIResponse:
        return await _deliver(runtime, callback, request.scope, request.receive)

    handle.__name__ = "callback_" + callback.path.strip("/").replace("/", "_")
    return post(
        callback.path,
        status_code=200,
        summary=callback.summary,
        description=callback.description,
        tags=["callbacks"],
        **callback_docs(callback.model),
    )(handle)


async def _deliver(
    runtime: Runtime, callback: CallbackRoute, scope: Scope, receive: Receive
) -> ASGIResponse:
    settings = runtime.settings
    metrics = runtime.metrics
    started = time.perf_counter()
    headers = headers_of(scope["headers"])
    header = header_text(headers, b"x-callback-event")
    event = header if header in callback.events else callback.events[0]
    peer = scope.get("client")
    address = client_address(
        peer[0] if peer else None,
        header_text(headers, b"x-forwarded-for"),
        settings.trusted_proxies,
    )
    ip = str(address) if address else None
    request_id = header_text(headers, b"x-request-id")
    if request_id is not None:
        request_id = storable(request_id[:REQUEST_ID_MAX])
    status, outcome, message = 500, "internal", ""
    authenticated = False
    bet_uids: Sequence[int] = ()
    delivery = Delivery.arrived(request_id, event, callback.path, ip)
    metrics.in_progress.inc()
    try:
        require_address(address, settings.allowed_ips)
        caller = authenticate(header_text(headers, b"authorization"), settings)
        authenticated = True
        delivery = delivery.caller(caller.client, caller.subject)
        require_role(caller, callback.roles, need_subject=callback.need_subject)
        require_json(header_text(headers, b"content-type"))
        if header is not None and header not in callback.events:
            raise InvalidRequest(
                f"X-Callback-Event {header[:64]!r} does not belong on {callback.path} "
                f"(expected {' or '.join(callback.events)})",
                key="request.wrong_event",
            )
        body = await read_body(receive, headers.get(b"content-length"), settings.max_body_bytes)
        ledger = runtime.opened()
        if ledger is None:
            # The database was down when last tried. Bad input is still a 400 (a 503 would make
            # the platform re-send a hopeless request), so validate before trying it again.
            await runtime.offload(lambda: validate(callback.model, body))
            ledger = await runtime.offload(runtime.ledger)
        deadline = DEADLINES[event]
        # The command writes the 200 journal row itself, in the transaction of its effects.
        journalled = delivery if settings.delivery_journal else None
        opened = ledger

        def submit() -> Future[Any]:
            return callback.submit(opened, body, journalled)

        future = await runtime.offload(submit) if len(body) > OFF_LOOP_BODY else submit()
        try:
            # One timer for every waiting delivery (LoopFutures), not an anyio cancel scope or
            # an asyncio timeout each. What is awaited is not chained back to the submitted
            # work, so the deadline abandons the wait, never the work.
            result = await runtime.awaitable(
                cast("Future[PlacedBets | ClosedBets]", future), deadline
            )
        except TimeoutError:
            # A frozen database (or a huge request on a slow one) must not outlast the
            # platform's timeout: a 5xx says "outcome unknown", and the platform's re-send of
            # the full set is idempotent whether or not this one ends up applied.
            raise StoreBusy(
                f"no answer within {deadline:.0f} s; the outcome is unknown, re-send",
                key="request.timeout",
            ) from None
        answer = _answer(result)
        status, outcome, bet_uids = 200, "ok", answer.bet_uids
        # Encoded here and handed to Litestar as a finished ASGI response: its Response turns
        # into one only after resolving a response handler, headers and cookies per request.
        return _JsonAnswer(msgspec.json.encode(answer.body))
    except LedgerError as exc:
        status, outcome, message = exc.status, exc.key, exc.message
        bet_uids = [exc.bet_uid] if exc.bet_uid is not None else ()
        raise
    except HTTPException as exc:
        status, outcome, message = exc.status_code, http_error_key(exc.status_code), exc.detail
        raise
    finally:
        elapsed = time.perf_counter() - started
        metrics.in_progress.dec()
        metrics.delivered(event, outcome, status, elapsed)
        line: dict[str, Any] = {
            # "msg" first, as on the operator log: a reader can tell the lines apart by prefix.
            "msg": "callback",
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "request_id": request_id,
            "event": event,
            "path": callback.path,
            "ip": ip,
            "status": status,
            "outcome": outcome,
            "duration_ms": round(elapsed * 1000, 3),
            "bet_count": len(bet_uids),
            "bet_uids": list(bet_uids[:LOGGED_UIDS]),
        }
        if message:
            line["message"] = message[:LOGGED_MESSAGE]
        log_json(log, logging.INFO if status < 500 else logging.ERROR, line)
        # Anyone can send a refused delivery: those without valid credentials are journalled
        # at a bounded rate (limits.RefusalJournal), so the journal cannot be flooded.
        if (
            status != 200
            and settings.delivery_journal
            and (authenticated or runtime.refusals.admit())
        ):
            _record_refusal(runtime, delivery.record(status, outcome, bet_uids))


class _JsonAnswer(ASGIResponse):
    """A 200 JSON answer, sent as two ASGI messages.

    Litestar's own ``ASGIResponse`` builds a mutable header collection, encodes it and its
    cookies, and runs an after-response hook, for every answer: a tenth of a Place Bet's own time
    on the event loop, for two fixed headers.
    """

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self.body
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _record_refusal(runtime: Runtime, record: DeliveryRecord) -> None:
    """Journal a refused delivery after the fact, best effort: a failure to record it is
    logged and never changes the answer; nothing waits for it."""
    ledger = runtime.opened()
    if ledger is None:
        log_journal.warning(
            "delivery %s (%s) not journalled: the database is down",
            record.request_id,
            record.status,
        )
        return
    try:
        future = ledger.record_delivery(record)
    except Exception:
        log_journal.exception("delivery %s not journalled", record.request_id)
        return

    def done(finished: Future[None]) -> None:
        error = finished.exception()
        if error is not None:
            log_journal.warning(
                "delivery %s (%s) not journalled: %r", record.request_id, record.status, error
            )

    future.add_done_callback(done)
