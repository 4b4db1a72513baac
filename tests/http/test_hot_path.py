"""The callback hot path's cheap parts keep every behaviour of the expensive ones they replace.

- The writer's answers reach the event loop a whole batch per loop callback, and a caller that
  stops waiting (a deadline) abandons the wait, never the work.
- The delivery log line is written without logging's per-record machinery where ``ledger serve``
  configured the logger, batched per loop turn, and is an ordinary record anywhere else.
- Metrics count through cached children exactly as ``labels()`` did.
- The request read from the ASGI scope and ``receive`` keeps Litestar's rules: the first of
  repeated headers, 413 over the body limit, 400 when the client hangs up mid-body.
- A POST to a callback's exact path is served before Litestar's router, and answered exactly as
  through it: every refusal renders the same status and body.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.exceptions import HTTPException

import ledger.http.asgi_request
import ledger.http.callbacks
from ledger.errors import InvalidRequest
from ledger.http.asgi_request import header_text, headers_of, read_body
from ledger.http.logs import JsonLinesHandler, log_json
from ledger.http.runtime import LoopFutures, Metrics
from support.httpkit import PLACE, SETTLE, Wallet, dumps, headers, serve
from support.logs import served_logging
from support.payloads import entry, place, settle

# --- the writer's answers on the loop -------------------------------------------------------------


def test_a_batch_of_answers_resolved_by_the_writer_reaches_the_loop_in_one_callback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = 0
    resolve = LoopFutures._resolve

    def counted(self: LoopFutures) -> None:
        nonlocal calls
        calls += 1
        resolve(self)

    monkeypatch.setattr(LoopFutures, "_resolve", counted)

    async def scenario() -> list[int]:
        bridge = LoopFutures(asyncio.get_running_loop())
        sources: list[Future[int]] = [Future() for _ in range(50)]
        waits = [bridge.wrap(source) for source in sources]

        def writer() -> None:  # as GroupCommit does after its commit: one future after another
            for number, source in enumerate(sources):
                source.set_result(number)

        # The loop is held while the writer answers, as it is while it serves other requests.
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join()
        return list(await asyncio.gather(*waits))

    assert asyncio.run(scenario()) == list(range(50))
    assert calls == 1


def test_an_error_of_the_writer_is_raised_to_the_waiting_handler() -> None:
    async def scenario() -> None:
        bridge = LoopFutures(asyncio.get_running_loop())
        source: Future[int] = Future()
        wait = bridge.wrap(source)
        threading.Thread(target=source.set_exception, args=(KeyError("refused"),)).start()
        with pytest.raises(KeyError, match="refused"):
            await wait

    asyncio.run(scenario())


def test_a_deadline_abandons_the_wait_but_never_cancels_the_submitted_work() -> None:
    async def scenario() -> Future[int]:
        bridge = LoopFutures(asyncio.get_running_loop())
        source: Future[int] = Future()
        with pytest.raises(TimeoutError):
            await bridge.wrap(source, 0.01)
        # The work finishes later; its answer finds nobody waiting and is dropped quietly.
        source.set_result(7)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return source

    source = asyncio.run(scenario())
    assert not source.cancelled()
    assert source.result() == 7


def test_waits_of_different_deadlines_each_fail_at_their_own_and_answered_ones_never() -> None:
    async def scenario() -> tuple[list[str], dict[float, int]]:
        loop = asyncio.get_running_loop()
        bridge = LoopFutures(loop)
        sources: list[Future[str]] = [Future() for _ in range(4)]
        started = loop.time()
        failed_at: dict[str, float] = {}

        async def wait(name: str, source: Future[str], deadline: float) -> str:
            try:
                return await bridge.wrap(source, deadline)
            except TimeoutError:
                failed_at[name] = loop.time() - started
                return f"{name} timed out"

        waits = [
            asyncio.create_task(wait("long", sources[0], 0.4)),  # armed first, expires last
            asyncio.create_task(wait("short", sources[1], 0.05)),
            asyncio.create_task(wait("answered", sources[2], 0.05)),
            asyncio.create_task(wait("late answer", sources[3], 0.05)),
        ]
        await asyncio.sleep(0.01)
        sources[2].set_result("answered in time")
        outcomes = list(await asyncio.gather(*waits))
        sources[3].set_result("too late")  # the work went on; its answer is dropped
        await asyncio.sleep(0.01)
        assert 0.05 <= failed_at["short"] < 0.4 <= failed_at["long"], failed_at
        return outcomes, {length: len(waiting) for length, waiting in bridge._deadlines.items()}

    outcomes, left = asyncio.run(scenario())
    assert outcomes == [
        "long timed out",
        "short timed out",
        "answered in time",
        "late answer timed out",
    ]
    assert left == {0.4: 0, 0.05: 0}  # nothing answered or expired is kept


def test_an_answer_that_is_ready_at_once_is_awaited_like_any_other() -> None:
    async def scenario() -> str:
        bridge = LoopFutures(asyncio.get_running_loop())
        source: Future[str] = Future()
        source.set_result("refused at once")  # the writer's queue was full, say
        return await bridge.wrap(source)

    assert asyncio.run(scenario()) == "refused at once"


# --- the delivery log line ------------------------------------------------------------------------


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def served_log() -> Iterator[CountingStream]:
    """Logging as ``ledger serve`` configures it, into a counting buffer; put back afterwards."""
    with served_logging(CountingStream()) as stream:
        yield stream


def delivery_handler() -> JsonLinesHandler:
    """The served configuration's handler, alone on ``ledger.http``.

    pytest attaches its capture handlers to every non-propagating logger when a test's call
    begins (and a line then rightly takes the ordinary path): detach them for this test.
    """
    logger = logging.getLogger("ledger.http")
    logger.handlers[:] = [h for h in logger.handlers if isinstance(h, JsonLinesHandler)]
    (handler,) = logger.handlers
    assert isinstance(handler, JsonLinesHandler)
    return handler


def test_a_served_delivery_writes_one_bare_json_line_with_its_time_and_request_id(
    tmp_path: Path, served_log: CountingStream
) -> None:
    handler = delivery_handler()
    with serve(tmp_path) as client:
        answer = client.post(
            "/bets",
            content=dumps(place(entry(1, amount="0", rake="0"))),
            headers={**headers(PLACE), "X-Request-Id": "req-42"},
        )
    handler.flush()
    assert answer.status_code == 200
    # Answered as a finished ASGI response: the same JSON and media type as Litestar's.
    assert answer.headers["content-type"] == "application/json"
    assert set(answer.json()) == {"secrets"}
    lines = [json.loads(line) for line in served_log.getvalue().splitlines() if "callback" in line]
    assert len(lines) == 1
    (line,) = lines
    assert line["msg"] == "callback"
    assert line["request_id"] == "req-42"
    assert line["ts"].endswith("+00:00")
    assert {key: line[key] for key in ("event", "path", "status", "outcome", "bet_uids")} == {
        "event": PLACE,
        "path": "/bets",
        "status": 200,
        "outcome": "ok",
        "bet_uids": [1],
    }


def test_the_lines_of_one_loop_turn_are_written_together_and_in_order(
    served_log: CountingStream,
) -> None:
    delivery_handler()
    logger = logging.getLogger("ledger.http")

    async def turn() -> None:
        for number in range(20):
            log_json(logger, logging.INFO, {"msg": "callback", "n": number})
        await asyncio.sleep(0)  # the end of the turn
        await asyncio.sleep(0)

    asyncio.run(turn())
    assert served_log.writes == 1
    assert [json.loads(line)["n"] for line in served_log.getvalue().splitlines()] == list(range(20))


def test_a_line_logged_through_logging_after_buffered_ones_comes_after_them(
    served_log: CountingStream,
) -> None:
    delivery_handler()
    logger = logging.getLogger("ledger.http")

    async def turn() -> None:
        log_json(logger, logging.INFO, {"n": 1})
        logger.info('{"n":2}')  # an ordinary record flushes what is buffered first

    asyncio.run(turn())
    assert [json.loads(line)["n"] for line in served_log.getvalue().splitlines()] == [1, 2]


def test_a_level_above_the_lines_drops_them(served_log: CountingStream) -> None:
    handler = delivery_handler()
    logging.getLogger("ledger.http").setLevel(logging.WARNING)
    log_json(logging.getLogger("ledger.http"), logging.INFO, {"n": 1})
    log_json(logging.getLogger("ledger.http"), logging.ERROR, {"n": 2})
    handler.flush()
    assert served_log.getvalue() == '{"n":2}\n'


def test_a_line_goes_through_logging_while_another_handler_listens(
    served_log: CountingStream, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("ledger.http")
    logger.addHandler(caplog.handler)
    log_json(logger, logging.INFO, {"n": 1})
    assert [r.getMessage() for r in caplog.records if r.name == "ledger.http"] == ['{"n":1}']
    assert served_log.getvalue() == '{"n":1}\n'


def test_without_the_served_configuration_a_line_is_an_ordinary_log_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="ledger.http"):
        log_json(logging.getLogger("ledger.http"), logging.INFO, {"msg": "callback", "n": 1})
    (record,) = [r for r in caplog.records if r.name == "ledger.http"]
    assert json.loads(record.getMessage()) == {"msg": "callback", "n": 1}


def test_a_lone_surrogate_in_a_line_is_escaped_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="ledger.http"):
        log_json(logging.getLogger("ledger.http"), logging.INFO, {"message": "bad \ud800"})
    (record,) = [r for r in caplog.records if r.name == "ledger.http"]
    assert record.getMessage() == '{"message":"bad \\ud800"}'


# --- metrics --------------------------------------------------------------------------------------


def sample(metrics: Metrics, name: str, labels: dict[str, str]) -> Any:
    return metrics.registry.get_sample_value(name, labels)


def test_cached_metric_children_count_every_delivery_under_its_own_labels() -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.delivered(PLACE, "ok", 200, 0.002)
    metrics.delivered(PLACE, "user.insufficient_funds", 402, 0.004)
    ok = {"event": PLACE, "outcome": "ok", "status": "200"}
    short = {"event": PLACE, "outcome": "user.insufficient_funds", "status": "402"}
    assert sample(metrics, "ledger_callback_deliveries_total", ok) == 3
    assert sample(metrics, "ledger_callback_deliveries_total", short) == 1
    assert sample(metrics, "ledger_callback_duration_seconds_count", {"event": PLACE}) == 4
    assert sample(
        metrics, "ledger_callback_duration_seconds_sum", {"event": PLACE}
    ) == pytest.approx(0.010)


# --- the request read from the ASGI scope


def messages(*items: dict[str, Any]) -> Callable[[], Awaitable[dict[str, Any]]]:
    queue = list(items)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


def read(
    receive: Callable[[], Awaitable[dict[str, Any]]], announced: bytes | None = None
) -> bytes | bytearray:
    return asyncio.run(read_body(receive, announced, 10))  # type: ignore[arg-type]


def test_a_body_sent_in_chunks_is_read_whole() -> None:
    receive = messages(
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"678", "more_body": False},
    )
    assert read(receive, b"8") == b"12345678"


def test_a_client_that_hangs_up_mid_body_is_a_400_request_incomplete() -> None:
    receive = messages(
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.disconnect"},
    )
    with pytest.raises(InvalidRequest) as refused:
        read(receive)
    assert (refused.value.status, refused.value.key) == (400, "request.incomplete")


def test_a_body_over_the_limit_is_413_whether_announced_or_only_received() -> None:
    with pytest.raises(HTTPException) as announced:
        read(messages(), b"11")
    received = messages(
        {"type": "http.request", "body": b"123456", "more_body": True},
        {"type": "http.request", "body": b"123456", "more_body": False},
    )
    with pytest.raises(HTTPException) as streamed:
        read(received)
    assert announced.value.status_code == streamed.value.status_code == 413


def test_a_large_announced_body_is_received_whole_into_one_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger.http.asgi_request, "ONE_BUFFER", 4)
    receive = messages(
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"678", "more_body": False},
    )
    body = read(receive, b"8")
    assert body == b"12345678"
    assert isinstance(body, bytearray)


def test_a_large_announced_body_keeps_the_rules_of_a_chunked_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger.http.asgi_request, "ONE_BUFFER", 4)
    hung_up = messages(
        {"type": "http.request", "body": b"12345", "more_body": True},
        {"type": "http.disconnect"},
    )
    with pytest.raises(InvalidRequest) as refused:
        read(hung_up, b"8")
    assert (refused.value.status, refused.value.key) == (400, "request.incomplete")
    beyond = messages({"type": "http.request", "body": b"123456789", "more_body": False})
    with pytest.raises(HTTPException) as too_large:
        read(beyond, b"8")
    assert too_large.value.status_code == 413
    with pytest.raises(HTTPException) as announced:
        read(messages(), b"11")
    assert announced.value.status_code == 413


def test_a_settle_body_over_a_megabyte_is_received_and_applied(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        assert wallet.place(place(entry(1))).status_code == 200
        # Whitespace after the JSON value is valid JSON: a body past the one-buffer threshold.
        body = dumps(settle(7, (1, "5.00"))) + b" " * (ledger.http.asgi_request.ONE_BUFFER + 1)
        answer = client.post("/winners", content=body, headers=headers(SETTLE))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"closed": 1, "unchanged": 0}
        assert wallet.balance("u1") == ("94.00", "0.00")


def test_headers_are_read_by_lower_case_name_and_the_first_of_repeated_ones_counts() -> None:
    headers = headers_of(
        [
            (b"X-Forwarded-For", b"10.0.0.1"),
            (b"x-forwarded-for", b"10.0.0.2"),
            (b"authorization", b"Bearer x"),
        ]
    )
    assert headers == {b"x-forwarded-for": b"10.0.0.1", b"authorization": b"Bearer x"}
    assert header_text(headers, b"authorization") == "Bearer x"
    assert header_text(headers, b"x-request-id") is None


# --- the callbacks before Litestar's router ------------------------------------------------------


def test_a_post_to_a_callbacks_exact_path_is_served_before_litestars_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def routed(*_: Any) -> None:
        raise AssertionError("through Litestar")

    with serve(tmp_path) as client:
        Wallet(client).deposit("u1", "100.00")
        monkeypatch.setattr(Litestar, "__call__", routed)
        body = dumps(place(entry(1)))
        assert client.post("/bets", content=body, headers=headers(PLACE, "user")).status_code == 200
        # The same callback with a trailing slash still goes through Litestar (here replaced):
        # only the exact path is served before it.
        slashed = client.post("/bets/", content=body, headers=headers(PLACE, "user"))
        assert slashed.status_code == 500


REFUSALS: dict[str, tuple[str, bytes, dict[str, str]]] = {
    "no token": ("/bets", dumps(place(entry(2))), {"Content-Type": "application/json"}),
    "bad token": (
        "/bets",
        dumps(place(entry(2))),
        headers(PLACE, Authorization="Bearer not-a-jwt"),
    ),
    "role": ("/winners", dumps(settle(7, (1, "5.00"))), headers(SETTLE, "user")),
    "wrong event": ("/bets", dumps(place(entry(2))), headers(SETTLE)),
    "media type": (
        "/bets",
        dumps(place(entry(2))),
        headers(PLACE, **{"Content-Type": "text/plain"}),
    ),
    "malformed": ("/bets", b'{"bets": [', headers(PLACE)),
    "invalid": ("/bets", b'{"bets": "none"}', headers(PLACE)),
    "too large": ("/bets", b" " * 5000, headers(PLACE)),
    "short of funds": ("/bets", dumps(place(entry(2, user="poor"))), headers(PLACE)),
    "unknown bet": ("/winners", dumps(settle(7, (99, "5.00"))), headers(SETTLE)),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refusal_served_before_litestars_router_is_answered_as_through_it(
    tmp_path: Path, case: str
) -> None:
    path, body, sent = REFUSALS[case]
    with serve(tmp_path, max_body_bytes=4096) as client:
        Wallet(client).deposit("u1", "100.00")
        direct = client.post(path, content=body, headers=sent)
        routed = client.post(path + "/", content=body, headers=sent)
    assert direct.status_code >= 400
    assert (direct.status_code, direct.content) == (routed.status_code, routed.content)
    assert direct.headers["content-type"] == routed.headers["content-type"]


def test_a_bug_served_before_litestars_router_is_a_500_without_its_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: object) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(ledger.http.callbacks, "_answer", broken)
    with serve(tmp_path) as client:
        Wallet(client).deposit("u1", "100.00")
        direct = client.post("/bets", content=dumps(place(entry(1))), headers=headers(PLACE))
        routed = client.post("/bets/", content=dumps(place(entry(2))), headers=headers(PLACE))
    assert direct.status_code == routed.status_code == 500
    assert direct.json() == routed.json() == {"error": "internal", "message": "internal error"}


def test_a_placed_bet_re_sent_through_litestars_router_gets_the_same_answer(
    tmp_path: Path,
) -> None:
    body = dumps(place(entry(1)))
    with serve(tmp_path) as client:
        Wallet(client).deposit("u1", "100.00")
        direct = client.post("/bets", content=body, headers=headers(PLACE, "user"))
        routed = client.post("/bets/", content=body, headers=headers(PLACE, "user"))
    assert direct.status_code == routed.status_code == 200
    assert direct.content == routed.content
    assert direct.headers["content-type"] == routed.headers["content-type"] == "application/json"
