"""The operator's directory over HTTP, on both stores: /admin/tournaments, /admin/users and
/admin/bets as cursor-paged lists and CSV exports, their records, and 404 for the unknown."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.httpkit import OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place, refund, settle


@pytest.fixture
def wallet(tmp_path: Path, store_url: str) -> Iterator[Wallet]:
    with serve(tmp_path, database_url=store_url) as client:
        yield Wallet(client)


def get(wallet: Wallet, path: str, **params: Any) -> Any:
    return wallet.client.get(path, params=params, headers=OPERATOR_HEADERS)


def books(wallet: Wallet) -> None:
    """Five tournaments (pools 1-5), users u1 and u2; pool 2 refunded, pool 3 settled."""
    wallet.deposit("u1", "100.00")
    wallet.deposit("u2", "100.00")
    for pool in (1, 2, 3, 4, 5):
        body = entry(10 + pool, user="u1" if pool % 2 else "u2", pool=pool)
        assert wallet.place(place(body)).status_code == 200
    assert wallet.refund(refund(2, (12, "u2"))).status_code == 200
    assert wallet.settle(settle(3, (13, "5.00", "u1"))).status_code == 200


def test_tournaments_page_by_cursor_and_filter_by_status_and_search(wallet: Wallet) -> None:
    books(wallet)
    first = get(wallet, "/admin/tournaments", limit=2)
    assert first.status_code == 200
    assert [item["uid"] for item in first.json()["tournaments"]] == [5, 4]
    second = get(wallet, "/admin/tournaments", limit=2, before=first.json()["next"])
    assert [item["uid"] for item in second.json()["tournaments"]] == [3, 2]
    closed = get(wallet, "/admin/tournaments", status="closed").json()
    assert [(item["uid"], item["entries"]) for item in closed["tournaments"]] == [
        (3, {"settled": 1})
    ]
    assert closed["next"] is None
    found = get(wallet, "/admin/tournaments", q="tournament 4").json()["tournaments"]
    assert [item["name"] for item in found] == ["Tournament 4"]


def test_a_tournament_answers_its_record_and_its_report(wallet: Wallet) -> None:
    books(wallet)
    answer = get(wallet, "/admin/tournaments/2")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["name"], body["status"], body["game_type"]) == (
        "Tournament 2",
        "cancelled",
        "football",
    )
    assert body["currencies"][0]["by_state"] == {"refunded": 1}


def test_users_search_by_uid_or_name_and_a_user_answers_with_balances(wallet: Wallet) -> None:
    books(wallet)
    listed = get(wallet, "/admin/users", q="NAME-U2").json()
    assert [item["uid"] for item in listed["users"]] == ["u2"]
    assert listed["users"][0]["client"] == "acme"
    user = get(wallet, "/admin/users/u1").json()
    assert user["name"] == "name-u1"
    assert user["balances"] == [{"currency": "EUR", "available": "72.00", "held": "22.00"}]


def test_bets_filter_by_user_pool_and_state_and_page(wallet: Wallet) -> None:
    books(wallet)
    mine = get(wallet, "/admin/bets", user="u1", limit=2).json()
    assert [bet["uid"] for bet in mine["bets"]] == [15, 13]
    rest = get(wallet, "/admin/bets", user="u1", limit=2, before=mine["next"]).json()
    assert [bet["uid"] for bet in rest["bets"]] == [11]
    assert rest["next"] is None
    settled = get(wallet, "/admin/bets", state="settled").json()["bets"]
    assert [(bet["uid"], bet["pool_name"], bet["user_name"]) for bet in settled] == [
        (13, "Tournament 3", "name-u1")
    ]
    assert [bet["uid"] for bet in get(wallet, "/admin/bets", pool=4).json()["bets"]] == [14]


def test_the_bet_view_carries_names_times_and_postings(wallet: Wallet) -> None:
    books(wallet)
    bet = get(wallet, "/admin/bets/12").json()
    assert (bet["user_name"], bet["pool_name"], bet["state"]) == (
        "name-u2",
        "Tournament 2",
        "refunded",
    )
    assert bet["placed_at"] <= bet["closed_at"]
    assert [(leg["kind"], leg["account"], leg["amount"]) for leg in bet["postings"]] == [
        ("hold", "available", "-11.00"),
        ("hold", "held", "11.00"),
        ("refund", "held", "-11.00"),
        ("refund", "available", "11.00"),
    ]


@pytest.mark.parametrize(
    ("path", "columns", "name"),
    [
        ("/admin/tournaments", ["uid", "name", "currency"], "tournaments"),
        ("/admin/users", ["uid", "name", "client"], "users"),
        ("/admin/bets", ["uid", "user", "user_name", "pool_uid", "pool_name"], "bets"),
    ],
)
def test_csv_exports_every_page_of_a_list(
    wallet: Wallet, path: str, columns: list[str], name: str
) -> None:
    books(wallet)
    listed = get(wallet, path, limit=1000).json()[name]
    exported = get(wallet, path, format="csv", limit=1)
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert len(rows) == len(listed) > 1  # every page, whatever the page size
    for row, item in zip(rows, listed, strict=True):
        assert [row[column] for column in columns] == [
            "" if item[column] is None else str(item[column]) for column in columns
        ]


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/admin/users/ghost", "user.not_found"),
        ("/admin/users/ghost/balances", "user.not_found"),
        ("/admin/users/ghost/statement", "user.not_found"),
        ("/admin/tournaments/404", "tournament.not_found"),
        ("/admin/bets/404", "bet.not_found"),
    ],
)
def test_an_unknown_user_tournament_or_bet_is_404_never_an_empty_200(
    wallet: Wallet, path: str, key: str
) -> None:
    answer = get(wallet, path)
    assert answer.status_code == 404
    assert answer.json()["error"] == key


def test_a_user_known_by_a_deposit_alone_answers_200(wallet: Wallet) -> None:
    wallet.deposit("cash-only", "5.00")
    assert get(wallet, "/admin/users/cash-only").json()["name"] is None
    assert get(wallet, "/admin/users/cash-only/balances").status_code == 200


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/admin/tournaments", {"before": "garbage"}),
        ("/admin/users", {"limit": 0}),
        ("/admin/bets", {"state": "lost"}),
        ("/admin/bets", {"pool": "seven"}),
        ("/admin/tournaments/seven", {}),
    ],
)
def test_bad_list_parameters_are_a_400_in_the_projects_shape(
    wallet: Wallet, path: str, params: dict[str, Any]
) -> None:
    answer = get(wallet, path, **params)
    assert answer.status_code == 400
    assert answer.json()["error"] in {"request.invalid", "request.invalid_cursor"}
