"""The event feed over HTTP: ``GET /admin/events`` pages the feed in commit order and long-polls.

The app runs on SQLite and on Postgres (``store_url``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import ledger
from ledger.service import EVENT_POLL
from support.httpkit import OPERATOR_HEADERS, PLACE, SETTLE, Wallet, dumps, headers, serve
from support.payloads import entry, place, settle


@pytest.fixture
def wallet(tmp_path: Path, store_url: str) -> Iterator[Wallet]:
    with serve(tmp_path, database_url=store_url) as client:
        yield Wallet(client)


def feed(wallet: Wallet, **params: Any) -> Any:
    response = wallet.client.get("/admin/events", params=params, headers=OPERATOR_HEADERS)
    assert response.status_code == 200, response.text
    return response.json()


def test_callbacks_and_movements_append_events_carrying_their_request_ids(wallet: Wallet) -> None:
    answered = wallet.client.post(
        "/admin/deposits",
        json={"user": "u1", "currency": "EUR", "amount": "100.00", "reference": "d1"},
        headers={**OPERATOR_HEADERS, "X-Request-Id": "op-7"},
    )
    assert answered.status_code == 200
    placed = wallet.client.post(
        "/bets",
        content=dumps(place(entry(11, amount="12.34", rake="0.66"))),
        headers=headers(PLACE, **{"X-Request-Id": "rq-place"}),
    )
    assert placed.status_code == 200
    settled = wallet.client.post(
        "/winners",
        content=dumps(settle(7, (11, "40.00"))),
        headers=headers(SETTLE, **{"X-Request-Id": "rq-settle"}),
    )
    assert settled.status_code == 200

    body = feed(wallet)
    assert body["next"] == 3
    deposit, bet, paid = body["events"]
    assert (deposit["id"], deposit["type"], deposit["amount"]) == (1, "deposit", "100.00")
    assert (deposit["reference"], deposit["request_id"]) == ("d1", "op-7")
    assert bet["type"] == "bet.placed"
    assert (bet["bet"], bet["pool"], bet["user"]) == (11, 7, "u1")
    assert (bet["amount"], bet["rake"], bet["currency"]) == ("12.34", "0.66", "EUR")
    assert bet["request_id"] == "rq-place"
    assert (paid["type"], paid["payout"], paid["payout_currency"]) == (
        "bet.settled",
        "40.00",
        "EUR",
    )
    assert paid["request_id"] == "rq-settle"
    assert paid["committed_at"].endswith("+00:00")
    assert feed(wallet, after=2, limit=5)["events"] == [paid]
    assert [e["id"] for e in feed(wallet, types="deposit,bet.settled")["events"]] == [1, 3]


def test_a_refused_callback_appends_nothing(wallet: Wallet) -> None:
    wallet.deposit("u1", "5.00")
    refused = wallet.place(place(entry(11)))
    assert refused.status_code == 402
    assert [e["type"] for e in feed(wallet)["events"]] == ["deposit"]


def test_the_feed_needs_the_operator_token(wallet: Wallet) -> None:
    assert wallet.client.get("/admin/events").status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert wallet.client.get("/admin/events", headers=wrong).status_code == 401


@pytest.mark.parametrize(
    "params",
    [{"after": "-1"}, {"after": "x"}, {"wait": "soon"}, {"types": "bet.lost"}, {"limit": "0"}],
)
def test_bad_parameters_are_a_400_naming_the_problem(
    wallet: Wallet, params: dict[str, str]
) -> None:
    response = wallet.client.get("/admin/events", params=params, headers=OPERATOR_HEADERS)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "request.invalid"


def test_a_long_poll_answers_as_soon_as_an_event_commits(wallet: Wallet) -> None:
    wallet.deposit("u1", "1.00", ref="first")
    answer: Future[Any] = Future()
    asked = threading.Event()

    def poll() -> None:
        asked.set()
        answer.set_result(feed(wallet, after=1, wait=55))

    thread = threading.Thread(target=poll)
    thread.start()
    assert asked.wait(10)
    wallet.deposit("u1", "2.00", ref="second")
    # Long before the 55 s wait ends (a bound against a hang, not a timing).
    body = answer.result(timeout=45)
    thread.join()
    assert [e["reference"] for e in body["events"]] == ["second"]
    assert body["next"] == 2


def test_a_long_poll_with_nothing_new_answers_empty_when_its_wait_ends(wallet: Wallet) -> None:
    wallet.deposit("u1", "1.00")
    assert feed(wallet, after=1, wait="0.05") == {"events": [], "next": 1}


def test_the_appended_events_are_counted_in_the_metrics(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    assert wallet.place(place(entry(11), entry(12))).status_code == 200
    metrics = wallet.client.get("/metrics").text
    assert "ledger_events_appended_total 3.0" in metrics.splitlines()


def test_idle_long_polls_share_one_watcher_instead_of_polling_each(
    wallet: Wallet, monkeypatch: pytest.MonkeyPatch
) -> None:
    wallet.deposit("u1", "1.00", ref="first")
    reads: list[str] = []
    for name in ("events", "last_event_id"):
        real = getattr(ledger.Ledger, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            reads.append(_name)
            return _real(self, *args, **kw)

        monkeypatch.setattr(ledger.Ledger, name, counted)
    waiters, seconds = 20, 1.5
    with ThreadPoolExecutor(max_workers=waiters) as pool:
        answers = list(pool.map(lambda _: feed(wallet, after=1, wait=seconds), range(waiters)))
    assert answers == [{"events": [], "next": 1}] * waiters
    # Each waiter reads its page when it comes and when its wait ends; the one watcher reads
    # the feed's head every EVENT_POLL. Polling on its own, each waiter read every EVENT_POLL.
    assert reads.count("events") <= 2 * waiters
    assert reads.count("last_event_id") <= 2 * seconds / EVENT_POLL + 2


def test_long_polls_beyond_the_cap_are_answered_503_with_retry_after(
    tmp_path: Path, store_url: str
) -> None:
    with serve(tmp_path, database_url=store_url, event_waiters=2) as client:
        Wallet(client).deposit("u1", "1.00")
        params = {"after": 1, "wait": 3}
        with ThreadPoolExecutor(max_workers=2) as pool:
            waiting = [
                pool.submit(client.get, "/admin/events", params=params, headers=OPERATOR_HEADERS)
                for _ in range(2)
            ]
            deadline = time.monotonic() + 10
            while "ledger_event_waiters 2.0" not in client.get("/metrics").text:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            refused = client.get("/admin/events", params=params, headers=OPERATOR_HEADERS)
            assert [answer.result(timeout=30).status_code for answer in waiting] == [200, 200]
        metrics = client.get("/metrics").text
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == "events.too_many_waiters"
    assert "ledger_event_waiters_refused_total 1.0" in metrics
