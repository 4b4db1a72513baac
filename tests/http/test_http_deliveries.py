"""The delivery journal over HTTP: every delivery leaves a row, found by filters, pages and CSV.

The app runs on SQLite and on Postgres (``store_url``).
"""

from __future__ import annotations

import csv
import io
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import ledger
from ledger.deliveries import DeliveryRecord
from ledger.errors import StoreBusy
from ledger.settings import Settings, SettingsError
from support.httpkit import OPERATOR_HEADERS, PLACE, SETTLE, Wallet, dumps, headers, serve
from support.payloads import entry, place, refund, settle


@pytest.fixture
def wallet(tmp_path: Path, store_url: str) -> Iterator[Wallet]:
    with serve(tmp_path, database_url=store_url) as client:
        yield Wallet(client)


def send(wallet: Wallet, path: str, body: Any, event: str, request_id: str, **extra: str) -> Any:
    return wallet.client.post(
        path, content=dumps(body), headers=headers(event, **{"X-Request-Id": request_id, **extra})
    )


def journal(wallet: Wallet, **params: Any) -> Any:
    response = wallet.client.get("/admin/deliveries", params=params, headers=OPERATOR_HEADERS)
    assert response.status_code == 200, response.text
    return response.json()


def eventually(wallet: Wallet, request_id: str) -> dict[str, Any]:
    """A refused delivery's row is written after the answer: wait a moment for it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = journal(wallet, request_id=request_id)["deliveries"]
        if found:
            assert len(found) == 1
            return dict(found[0])
        time.sleep(0.02)
    raise AssertionError(f"no journal row for {request_id}")


def test_an_accepted_place_bet_is_in_the_journal_when_it_is_answered(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    answered = send(wallet, "/bets", place(entry(11), entry(12)), PLACE, "rq-ok")
    assert answered.status_code == 200
    # No waiting: the row was committed with the bets, before the answer.
    [found] = journal(wallet, request_id="rq-ok")["deliveries"]
    assert found["status"] == 200
    assert found["error"] is None
    assert found["event"] == PLACE
    assert found["path"] == "/bets"
    assert found["client"] == "acme"
    assert found["subject"] == "platform"
    assert "address" in found  # the test client has no IP address to record
    assert found["bet_count"] == 2
    assert found["bet_uids"] == [11, 12]
    assert isinstance(found["duration_ms"], int | float)  # a number, as in the log lines
    assert found["duration_ms"] >= 0


@pytest.mark.parametrize(
    ("case", "status", "error"),
    [
        ("poor", 402, "user.insufficient_funds"),
        ("twice", 409, "bet.already_refunded"),
        ("bad", 400, "request.invalid"),
        ("stranger", 401, "auth.invalid_token"),
    ],
)
def test_a_refused_delivery_is_journalled_with_its_status_and_error(
    wallet: Wallet, case: str, status: int, error: str
) -> None:
    wallet.deposit("u1", "100.00")
    if case == "poor":
        answered = send(wallet, "/bets", place(entry(21, user="u2")), PLACE, "rq-" + case)
    elif case == "twice":
        assert wallet.place(place(entry(21))).status_code == 200
        assert wallet.refund(refund(7, 21)).status_code == 200
        answered = send(wallet, "/winners", settle(7, (21, "5.00")), SETTLE, "rq-" + case)
    elif case == "bad":
        answered = send(wallet, "/bets", {"bets": "no"}, PLACE, "rq-" + case)
    else:
        answered = send(
            wallet, "/bets", place(entry(21)), PLACE, "rq-" + case, Authorization="Bearer x y"
        )
    assert answered.status_code == status, answered.text
    found = eventually(wallet, "rq-" + case)
    assert (found["status"], found["error"]) == (status, error)
    if case == "stranger":
        assert found["client"] is None
        assert found["subject"] is None


def test_filters_page_and_csv_over_http(wallet: Wallet) -> None:
    wallet.deposit("u1", "1000.00")
    for uid in range(1, 6):
        assert send(wallet, "/bets", place(entry(uid)), PLACE, f"rq-{uid}").status_code == 200
    assert send(wallet, "/winners", settle(7, (3, "1.00")), SETTLE, "rq-win").status_code == 200

    assert [d["request_id"] for d in journal(wallet, bet=3)["deliveries"]] == ["rq-win", "rq-3"]
    assert [d["request_id"] for d in journal(wallet, event=SETTLE)["deliveries"]] == ["rq-win"]
    assert len(journal(wallet, status=200)["deliveries"]) == 6
    assert journal(wallet, status=402)["deliveries"] == []
    assert journal(wallet, until="2000-01-01T00:00:00Z")["deliveries"] == []
    assert len(journal(wallet, since="2000-01-01T00:00:00Z")["deliveries"]) == 6

    seen, before = [], None
    while True:
        page = journal(wallet, limit=4, **({"before": before} if before else {}))
        seen += [d["request_id"] for d in page["deliveries"]]
        if page["next"] is None:
            break
        before = page["next"]
    assert seen == ["rq-win", "rq-5", "rq-4", "rq-3", "rq-2", "rq-1"]

    exported = wallet.client.get(
        "/admin/deliveries", params={"format": "csv", "status": "200"}, headers=OPERATOR_HEADERS
    )
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [row["request_id"] for row in rows] == seen
    assert rows[0]["bet_uids"] == "[3]"


@pytest.mark.parametrize(
    "params",
    [
        {"status": "abc"},
        {"bet": "x"},
        {"event": "bet:nope"},
        {"since": "yesterday"},
        {"limit": "0"},
        {"before": "garbage!"},
        {"format": "xml"},
    ],
)
def test_a_bad_filter_is_a_400_with_the_projects_error_shape(
    wallet: Wallet, params: dict[str, str]
) -> None:
    response = wallet.client.get("/admin/deliveries", params=params, headers=OPERATOR_HEADERS)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("request.")


def test_the_bet_view_lists_the_deliveries_that_named_the_bet(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    assert send(wallet, "/bets", place(entry(31)), PLACE, "rq-place").status_code == 200
    assert send(wallet, "/winners", settle(7, (31, "2.00")), SETTLE, "rq-settle").status_code == 200
    view = wallet.client.get("/admin/bets/31", headers=OPERATOR_HEADERS).json()
    assert [(d["request_id"], d["event"], d["status"]) for d in view["deliveries"]] == [
        ("rq-settle", SETTLE, 200),
        ("rq-place", PLACE, 200),
    ]
    assert all(d["received_at"] for d in view["deliveries"])


def test_with_the_journal_switched_off_nothing_is_recorded(tmp_path: Path) -> None:
    with serve(tmp_path, delivery_journal=False) as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        assert send(wallet, "/bets", place(entry(41)), PLACE, "rq-off").status_code == 200
        assert send(wallet, "/bets", place(entry(42, user="u9")), PLACE, "rq-x").status_code == 402
        time.sleep(0.2)
        assert journal(wallet)["deliveries"] == []


def test_the_journal_settings_are_read_and_checked() -> None:
    read = Settings.from_env(
        {"LEDGER_DELIVERY_JOURNAL": "off", "LEDGER_DELIVERY_RETENTION_DAYS": "30"}
    )
    assert (read.delivery_journal, read.delivery_retention_days) == (False, 30)
    assert Settings.from_env({}).delivery_retention_days == 120
    for environ in ({"LEDGER_DELIVERY_JOURNAL": "maybe"}, {"LEDGER_DELIVERY_RETENTION_DAYS": "0"}):
        with pytest.raises(SettingsError):
            Settings.from_env(environ)


@pytest.mark.parametrize("how", ["raises", "fails later"])
def test_a_refusal_that_cannot_be_journalled_is_logged_and_answered_as_before(
    wallet: Wallet, how: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: ledger.Ledger, record: DeliveryRecord) -> Future[None]:
        if how == "raises":
            raise RuntimeError("journal broken")
        failed: Future[None] = Future()
        failed.set_exception(StoreBusy("journal busy"))
        return failed

    monkeypatch.setattr(ledger.Ledger, "record_delivery", broken)
    with caplog.at_level(logging.WARNING, logger="ledger.journal"):
        answered = send(wallet, "/bets", place(entry(51, user="u5")), PLACE, "rq-lost")
    assert answered.status_code == 402
    assert answered.json()["error"] == "user.insufficient_funds"
    assert any("rq-lost" in line and "not journalled" in line for line in caplog.messages)
