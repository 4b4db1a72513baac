"""The operator's books over HTTP, on both stores: statements with running balances (cursor
paging, CSV), balances at a moment, open and stale holds, house summaries, the stale gauge."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import ledger
from support.httpkit import OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place, refund, settle


@pytest.fixture
def wallet(tmp_path: Path, store_url: str) -> Iterator[Wallet]:
    with serve(tmp_path, database_url=store_url) as client:
        yield Wallet(client)


def admin_get(wallet: Wallet, path: str, **params: Any) -> Any:
    return wallet.client.get(path, params=params, headers=OPERATOR_HEADERS)


def ok(wallet: Wallet, path: str, **params: Any) -> Any:
    response = admin_get(wallet, path, **params)
    assert response.status_code == 200, response.text
    return response


def test_statement_lines_carry_balance_after_and_pool_and_page_by_cursor(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    assert wallet.place(place(entry(1, pool=7))).status_code == 200
    for number in range(3):
        wallet.deposit("u1", f"{number + 1}.00", ref=f"d{number}")
    seen = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        body = ok(wallet, "/admin/users/u1/statement", **params).json()
        seen.extend(body["lines"])
        if body["next"] is None:
            assert body["next_before"] is None
            break
        params["before"] = body["next"]
    assert [line["amount"] for line in seen[:3]] == ["3.00", "2.00", "1.00"]
    assert [line["balance_after"] for line in seen[:3]] == ["15.00", "12.00", "10.00"]
    held = next(line for line in seen if line["account"] == "held")
    assert (held["balance_after"], held["bet_uid"], held["pool_uid"]) == ("11.00", 1, 7)
    assert len(seen) == 6


def test_statement_exports_every_line_as_csv(
    wallet: Wallet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.http.operator.books.EXPORT_PAGE", 2)  # the export reads 2 pages
    for number in range(3):
        wallet.deposit("u1", f"{number + 1}.00", ref=f"d{number}")
    response = ok(wallet, "/admin/users/u1/statement", format="csv", limit=1)
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    # Every line, not one page: the export reads page after page.
    assert [(row["amount"], row["balance_after"]) for row in rows] == [
        ("3.00", "6.00"),
        ("2.00", "3.00"),
        ("1.00", "1.00"),
    ]
    assert list(rows[0]) == [
        "id",
        "created_at",
        "account",
        "currency",
        "amount",
        "balance_after",
        "kind",
        "bet_uid",
        "pool_uid",
        "reference",
        "transaction_id",
    ]


def test_csv_with_an_unknown_format_is_400(wallet: Wallet) -> None:
    response = admin_get(wallet, "/admin/users/u1/statement", format="xml")
    assert response.status_code == 400
    assert response.json()["error"] == "request.invalid"


def test_balances_at_a_moment(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    between = datetime.now(UTC)
    assert wallet.place(place(entry(1))).status_code == 200
    body = ok(wallet, "/admin/users/u1/balances", at=between.isoformat()).json()
    assert body == {
        "user": "u1",
        "at": between.isoformat(),
        "balances": [{"currency": "EUR", "available": "20.00", "held": "0.00"}],
    }
    assert wallet.balance("u1") == ("9.00", "11.00")
    before = ok(wallet, "/admin/users/u1/balances", at="2020-01-01T00:00:00Z").json()
    assert before["balances"] == []


@pytest.mark.parametrize("moment", ["2026-11-20T00:00:00", "last tuesday"])
def test_balances_at_a_moment_without_a_zone_is_400(wallet: Wallet, moment: str) -> None:
    response = admin_get(wallet, "/admin/users/u1/balances", at=moment)
    assert response.status_code == 400
    assert response.json()["error"] == "request.invalid"


def test_holds_list_pages_filters_and_exports(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.deposit("u2", "100.00")
    assert wallet.place(place(entry(1, pool=7), entry(2, pool=8, user="u2"))).status_code == 200
    assert wallet.place(place(entry(3, pool=7))).status_code == 200
    assert wallet.place(place(entry(4, pool=9))).status_code == 200
    assert wallet.refund(refund(9, 4)).status_code == 200
    first = ok(wallet, "/admin/holds", limit=2).json()
    second = ok(wallet, "/admin/holds", limit=2, before=first["next"]).json()
    assert [hold["uid"] for hold in first["holds"] + second["holds"]] == [1, 2, 3]
    assert second["next"] is None
    assert first["holds"][0] == {
        "uid": 1,
        "user": "u1",
        "pool_uid": 7,
        "currency": "EUR",
        "amount": "10.00",
        "rake": "1.00",
        "funding": "cash",
        "placed_at": first["holds"][0]["placed_at"],
        "stale": False,
    }
    assert [h["uid"] for h in ok(wallet, "/admin/holds", user="u2").json()["holds"]] == [2]
    assert [h["uid"] for h in ok(wallet, "/admin/holds", pool="7").json()["holds"]] == [1, 3]
    assert ok(wallet, "/admin/holds", stale="true").json() == {"holds": [], "next": None}
    assert ok(wallet, "/admin/holds", older_than="1d").json()["holds"] == []
    exported = ok(wallet, "/admin/holds", format="csv", limit=1).text
    assert [row["uid"] for row in csv.DictReader(io.StringIO(exported))] == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"before": "nope"}, "request.invalid_cursor"),
        ({"pool": "x"}, "request.invalid"),
        ({"older_than": "ages"}, "request.invalid"),
        ({"limit": 0}, "request.invalid"),
    ],
)
def test_holds_with_bad_filters_are_400(wallet: Wallet, params: dict[str, Any], key: str) -> None:
    response = admin_get(wallet, "/admin/holds", **params)
    assert response.status_code == 400
    assert response.json()["error"] == key


def test_stale_holds_are_listed_and_counted_on_metrics(tmp_path: Path, store_url: str) -> None:
    # A stale age that every hold has passed by the time anyone looks.
    with serve(tmp_path, database_url=store_url, stale_hold_days=1e-12) as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        assert wallet.place(place(entry(1), entry(2))).status_code == 200
        assert wallet.settle(settle(7, (2, "0"))).status_code == 200
        stale = ok(wallet, "/admin/holds", stale="true").json()["holds"]
        assert [(hold["uid"], hold["stale"]) for hold in stale] == [(1, True)]
        assert "ledger_stale_holds 1.0" in client.get("/metrics").text


def test_stale_gauge_is_zero_without_stale_holds(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    assert wallet.place(place(entry(1))).status_code == 200
    assert "ledger_stale_holds 0.0" in wallet.client.get("/metrics").text


def test_house_summary_over_a_period(wallet: Wallet) -> None:
    start = datetime.now(UTC).isoformat()
    wallet.deposit("u1", "100.00")
    assert wallet.place(place(entry(1), entry(2))).status_code == 200
    assert wallet.settle(settle(7, (1, "5.00"), (2, "0"))).status_code == 200
    body = ok(wallet, "/admin/house", since=start, currency="EUR").json()
    assert body["since"] == start
    assert body["until"] is None
    (eur,) = body["currencies"]
    assert eur["balances"] == {
        "house:cash": "-100.00",
        "house:entries": "20.00",
        "house:prizes": "-5.00",
        "house:rake": "2.00",
    }
    assert (eur["deposits"], eur["rake_earned"], eur["prizes_paid"]) == ("100.00", "2.00", "5.00")
    assert (eur["stakes_captured"], eur["entries"], eur["unique_players"]) == ("20.00", 2, 1)
    later = ok(wallet, "/admin/house", since=datetime.now(UTC).isoformat()).json()
    assert later["currencies"][0]["rake_earned"] == "0.00"


def test_house_with_a_bad_period_is_400(wallet: Wallet) -> None:
    response = admin_get(wallet, "/admin/house", since="2026-11-20")
    assert response.status_code == 400
    assert response.json()["error"] == "request.invalid"


def test_a_stuck_stale_count_does_not_hold_up_the_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def stuck(self: ledger.Ledger) -> int:
        release.wait()  # a frozen database: without the scrape's bound, this test hangs
        return 0

    monkeypatch.setattr("ledger.http.ops.STALE_GAUGE_TIMEOUT", 0.2)
    monkeypatch.setattr(ledger.Ledger, "count_stale_holds", stuck)
    try:
        with serve(tmp_path) as client:
            response = client.get("/metrics")
            assert response.status_code == 200
            assert "ledger_callback_in_progress" in response.text
            assert "ledger_stale_holds 0.0" in response.text  # never set: its initial value
            release.set()
    finally:
        release.set()
