"""The directory's commands on both stores: ``ledger tournaments``, ``tournament``, ``users``,
``user`` and ``bets`` (pages by ``--before``, ``--json``, ``--csv`` of every page), the bet view's
names and postings, and exit 1 for an unknown user, tournament or bet."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner, Result

import ledger
from ledger.cli import main
from support import payloads as P


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def url(store_url: str) -> str:
    """Users u1 and u2 in tournaments 1-3; tournament 2 refunded, bet 11 settled."""
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "100", "d1")
        book.deposit("u2", "EUR", "100", "d2")
        book.place_bets(P.place(P.entry(11, user="u1", pool=1), P.entry(12, user="u2", pool=2)))
        book.place_bets(P.place(P.entry(13, user="u1", pool=3)))
        book.refund(P.refund(2, (12, "u2")))
        book.settle(P.settle(1, (11, "4.00", "u1")))
    return store_url


def test_tournaments_print_a_page_and_the_next_cursor_then_the_rest(url: str) -> None:
    first = run("tournaments", "--limit", "2", "--db", url)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert lines[0].startswith("3  Tournament 3  EUR  status -  entries: placed 1")
    assert lines[1].startswith("2  Tournament 2  EUR  status cancelled")
    cursor = lines[-1].removeprefix("next page: --before ")
    rest = json.loads(run("tournaments", "--json", "--before", cursor, "--db", url).output)
    assert [item["uid"] for item in rest["tournaments"]] == [1]
    assert rest["next"] is None
    closed = json.loads(run("tournaments", "--status", "closed", "--json", "--db", url).output)
    assert [item["uid"] for item in closed["tournaments"]] == [1]
    found = json.loads(run("tournaments", "--search", "NAMENT 2", "--json", "--db", url).output)
    assert [item["uid"] for item in found["tournaments"]] == [2]


def test_list_commands_export_every_page_as_csv(url: str) -> None:
    for command, count in (("tournaments", 3), ("users", 2), ("bets", 3)):
        result = run(command, "--csv", "--limit", "1", "--db", url)
        assert result.exit_code == 0, result.output
        rows = list(csv.DictReader(io.StringIO(result.output)))
        assert len(rows) == count, command
    rows = list(csv.DictReader(io.StringIO(run("bets", "--csv", "--db", url).output)))
    assert [(row["uid"], row["state"], row["user_name"]) for row in rows] == [
        ("13", "placed", "name-u1"),
        ("12", "refunded", "name-u2"),
        ("11", "settled", "name-u1"),
    ]


def test_users_search_and_a_user_shows_balances(url: str) -> None:
    found = json.loads(run("users", "--search", "U2", "--json", "--db", url).output)
    assert [item["uid"] for item in found["users"]] == ["u2"]
    shown = run("user", "u1", "--db", url)
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0] == "user u1: name-u1, client acme"
    assert "EUR  available 82.00  held 11.00" in shown.output
    data = json.loads(run("user", "u1", "--json", "--db", url).output)
    assert data["balances"] == [{"currency": "EUR", "available": "82.00", "held": "11.00"}]


def test_bets_filter_by_user_pool_and_state(url: str) -> None:
    def uids(*args: str) -> list[int]:
        answer = json.loads(run("bets", "--json", "--db", url, *args).output)
        return [bet["uid"] for bet in answer["bets"]]

    assert uids("--user", "u1") == [13, 11]
    assert uids("--pool", "2") == [12]
    assert uids("--state", "settled") == [11]
    assert uids("--user", "u1", "--state", "placed") == [13]


def test_the_bet_and_tournament_views_show_names_and_postings(url: str) -> None:
    bet = run("bet", "11", "--db", url)
    assert bet.exit_code == 0, bet.output
    assert "user u1 (name-u1), pool 1 (Tournament 1)" in bet.output
    assert [line.split()[1:4] for line in bet.output.splitlines()[1:]] == [
        ["hold", "available", "-11.00"],
        ["hold", "held", "11.00"],
        ["settle", "held", "-11.00"],
        ["settle", "available", "4.00"],
    ]
    shown = run("tournament", "1", "--db", url)
    assert shown.exit_code == 0, shown.output
    assert "EUR: 1 entries (settled 1), stakes 10.00, rake 1.00, payouts 4.00 EUR" in shown.output


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("user", "ghost"), "user.not_found"),
        (("balance", "ghost"), "user.not_found"),
        (("statement", "ghost"), "user.not_found"),
        (("tournament", "404"), "tournament.not_found"),
        (("bet", "404"), "bet.not_found"),
        (("tournaments", "--before", "garbage"), "request.invalid_cursor"),
    ],
)
def test_an_unknown_user_tournament_or_bet_exits_1_with_its_key(
    url: str, args: tuple[str, ...], key: str
) -> None:
    result = CliRunner().invoke(main, [*args, "--db", url])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {key}: ")
