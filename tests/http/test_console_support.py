"""The console as a support agent, a cashier and an on-call engineer use it, through Litestar's
test client on both stores: a movement shows the new balance at once, no page is a dead end, the
journal keeps its detail, the views they ask for exist with their exports, and every time and
duration reads the same way."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.contract import PLACE_BET, SETTLE_BET
from ledger.http.console import users
from ledger.http.console.overview import chart
from ledger.operators import Operators
from ledger.views import HourActivity
from support.console import PASSWORD, ROLES, csrf_of, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, dumps, headers, serve
from support.payloads import entry, place, settle

ENDED = "2020-01-01T00:00:00Z"


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


def deliver(client: TestClient[Any], body: Any, event: str, request_id: str, **sent: str) -> Any:
    return client.post(
        "/winners" if event == SETTLE_BET else "/bets",
        content=dumps(body),
        headers={**headers(event, **{"X-Request-Id": request_id}), **sent},
    )


@pytest.fixture
def client(tmp_path: Path, store_url: str) -> Iterator[TestClient[Any]]:
    """Ann (u1) placed bet 2001 and then 1500 in tournament 7 (uids out of time order) and five
    entries in tournament 9 in one request; Bob (u2) bet 1002 in tournament 8, long ended; two
    deliveries were refused 401, each with its own error key."""
    with serve(tmp_path, database_url=store_url) as found:
        with ledger.open_ledger(store_url) as book:
            staff = Operators(book.store)
            for name, role in ROLES.items():
                staff.add(name, role, PASSWORD)
        wallet = Wallet(found)
        wallet.deposit("u1", "100.00")
        wallet.deposit("u2", "50.00")
        for uid in (2001, 1500):
            assert deliver(found, place(entry(uid, pool=7)), PLACE_BET, f"Req-Ann-{uid}").is_success
        five = place(*(entry(3001 + n, pool=9) for n in range(5)))
        assert deliver(found, five, PLACE_BET, "req-five").is_success
        bob = entry(1002, user="u2", pool=8)
        bob["pool"]["estimatedEndTime"] = ENDED
        assert deliver(found, place(bob), PLACE_BET, "req-bob").is_success
        assert deliver(
            found, settle(7, (2001, "25.00"), (1500, "0")), SETTLE_BET, "req-s"
        ).is_success
        missing = deliver(found, place(entry(4001)), PLACE_BET, "req-401-a", Authorization="")
        invalid = deliver(
            found, place(entry(4002)), PLACE_BET, "req-401-b", Authorization="Bearer acme x"
        )
        assert (missing.status_code, invalid.status_code) == (401, 401)
        yield found


def signed_in(client: TestClient[Any], name: str) -> str:
    answer = sign_in(client, name)
    assert answer.status_code == 303, answer.text
    return csrf_of(client.get("/console/overview").text)


def rows(html: str, table: str) -> list[str]:
    """Each body row of the first table with this id (or class), its cells' text joined by
    ``|``."""
    found = re.search(rf'<table (?:id|class)="{table}">(.*?)</table>', html, re.S)
    assert found, f"no table {table}"
    body = found.group(1).partition("<tbody")[2]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in body.split("<tr")[1:]]
    return ["|".join(" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in row) for row in cells]


def exported(client: TestClient[Any], path: str, **params: str) -> list[dict[str, str]]:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(answer.text)))


# --- a movement shows the new figures ------------------------------------------------------------


def test_a_deposit_answers_with_the_users_new_balance_and_statement_line(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    form = {"csrf": csrf, "uid": "u2", "kind": "deposit", "currency": "EUR"}
    # As htmx sends it: the answer replaces the user's section.
    htmx = {"HX-Request": "true", "X-CSRF-Token": csrf}
    answer = client.post(
        "/console/users/movements",
        data={**form, "amount": "7.50", "reference": "t-1"},
        headers=htmx,
    )
    assert answer.status_code == 200
    assert "<h1" not in answer.text
    assert "applied; the balances and the statement show it" in answer.text
    assert rows(answer.text, "balances") == ["EUR|46.50|11.00"]
    # The statement's newest line is the deposit, with the balance it left.
    newest = rows(answer.text, "statement")[0]
    assert "|7.50|46.50|deposit|" in newest
    # Without htmx (a browser without scripts): the whole page, with the same new figures.
    plain = client.post(
        "/console/users/movements", data={**form, "amount": "2.50", "reference": "t-2"}
    )
    assert rows(plain.text, "balances") == ["EUR|49.00|11.00"]


def test_a_refused_withdrawal_is_shown_beside_the_form_and_leaves_the_page_as_it_was(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    form = {"csrf": csrf, "uid": "u2", "kind": "withdrawal", "currency": "EUR"}
    answer = client.post(
        "/console/users/movements",
        data={**form, "amount": "500", "reference": "too-much"},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 402
    assert answer.headers["hx-retarget"] == "#movement-result"
    assert "user.insufficient_funds" in answer.text


# --- no dead ends --------------------------------------------------------------------------------


def test_the_servers_root_leads_to_the_console(client: TestClient[Any]) -> None:
    answer = client.get("/", follow_redirects=False)
    assert answer.status_code in (302, 307)
    assert answer.headers["location"] == "/console"
    assert answer.headers["x-frame-options"] == "DENY"


def test_an_unknown_console_page_is_a_console_404_with_the_navigation(
    client: TestClient[Any],
) -> None:
    stranger = client.get("/console/nowhere/at-all")
    assert stranger.status_code == 404
    assert stranger.headers["content-type"].startswith("text/html")
    assert 'id="go-sign-in"' in stranger.text
    signed_in(client, "vic")
    lost = client.get("/console/usres")
    assert lost.status_code == 404
    assert "<h1>Not found</h1>" in lost.text
    assert "no console page at /console/usres" in lost.text
    for page in ("/console/overview", "/console/users", "/console/deliveries"):
        assert f'href="{page}"' in lost.text
    # The API's own unknown paths keep their JSON.
    assert client.get("/admin/nowhere").json()["error"] == "not_found"


def test_an_unknown_user_bet_or_tournament_offers_the_search_it_came_from(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    user = client.get("/console/users", params={"uid": "u404"})
    assert user.status_code == 404
    assert 'action="/console/users"' in user.text
    assert 'name="q" value="u404"' in user.text
    bet = client.get("/console/bets", params={"uid": "999999"})
    assert bet.status_code == 404
    assert 'id="find-bet"' in bet.text
    tournament = client.get("/console/tournaments", params={"uid": "999999"})
    assert tournament.status_code == 404
    assert 'id="filter-tournaments"' in tournament.text


def test_a_page_refused_for_a_role_says_what_the_role_allows(client: TestClient[Any]) -> None:
    signed_in(client, "cal")
    answer = client.get("/console/operators")
    assert answer.status_code == 403
    assert "Not for the cashier role" in answer.text
    assert "deposit or withdraw, set a player" in answer.text
    assert 'id="roles"' in answer.text
    assert "<h1>Refused</h1>" not in answer.text


def test_the_sign_in_page_names_the_console_and_how_operators_are_made(
    client: TestClient[Any],
) -> None:
    page = client.get("/console/sign-in").text
    assert "/console" in page
    assert "ledger operators add" in page


# --- the journal keeps its detail ----------------------------------------------------------------


def test_the_overviews_error_counts_link_to_the_deliveries_of_that_error_key(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    page = client.get("/console/overview").text
    links = re.findall(r'href="(/console/deliveries\?[^"]*error=[^"]*)"', page)
    keys = sorted(re.search(r"error=([^&]+)", link).group(1) for link in links)  # type: ignore[union-attr]
    assert keys == ["auth.invalid_token", "auth.missing_token"]
    for link in links:
        listed = rows(client.get(link.replace("&amp;", "&")).text, "deliveries")
        assert len(listed) == 1
        assert link.split("error=")[1].split("&")[0] in listed[0]


def test_deliveries_are_found_by_error_key_and_by_a_request_id_prefix_in_any_case(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    by_error = client.get("/console/deliveries", params={"error": "auth.missing_token"}).text
    assert [row.split("|")[1] for row in rows(by_error, "deliveries")] == ["req-401-a"]
    by_prefix = client.get("/console/deliveries", params={"request_id": "req-ann"}).text
    assert [row.split("|")[1] for row in rows(by_prefix, "deliveries")] == [
        "Req-Ann-1500",
        "Req-Ann-2001",
    ]
    # A wildcard typed is a character like any other.
    assert (
        "No delivery matches"
        in client.get("/console/deliveries", params={"request_id": "req_ann"}).text
    )
    assert [
        row["request_id"]
        for row in exported(client, "/console/deliveries.csv", error="auth.invalid_token")
    ] == ["req-401-b"]


def test_a_delivery_row_shows_a_few_bet_uids_and_how_many_more_on_one_line_per_time(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    page = client.get("/console/deliveries", params={"request_id": "req-five"}).text
    (row,) = rows(page, "deliveries")
    assert "3001 3002 3003 and 2 more" in row
    assert re.search(r'<td class="time">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>', page)
    assert ".time" in client.get("/console/static/console.css").text


# --- the views a support agent asks for ----------------------------------------------------------


def test_house_earnings_for_a_chosen_period_are_shown_and_exported(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    page = client.get("/console/earnings", params={"since": "2020-01-01", "until": ""}).text
    assert "From 2020-01-01 00:00:00 until now" in page
    # The figures of the operator API's house report for the same period.
    house = client.get(
        "/admin/house", params={"since": "2020-01-01T00:00:00Z"}, headers=OPERATOR_HEADERS
    ).json()["currencies"][0]
    (eur,) = rows(page, "earnings")
    assert eur.split("|")[:4] == [
        "EUR",
        house["rake_earned"],
        house["stakes_captured"],
        house["prizes_paid"],
    ]
    assert house["prizes_paid"] == "25.00"
    future = client.get("/console/earnings", params={"since": "2100-01-01 00:00"}).text
    assert rows(future, "earnings")[0].split("|")[1:4] == ["0.00", "0.00", "0.00"]
    (line,) = exported(client, "/console/earnings.csv", since="2020-01-01")
    assert (line["currency"], line["rake_earned"], line["since"]) == (
        "EUR",
        house["rake_earned"],
        "2020-01-01T00:00:00+00:00",
    )
    # The month so far, when nothing is asked.
    first = datetime.now(UTC).strftime("%Y-%m-01 00:00")
    assert f'value="{first}"' in client.get("/console/earnings").text


def test_a_users_balance_at_a_chosen_moment_is_shown_and_exported(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    before = client.get("/console/users", params={"uid": "u1", "at": "2020-01-01 00:00"}).text
    assert rows(before, "balances-at") == ["No money at that time."]
    later = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M")
    now = client.get("/console/users", params={"uid": "u1", "at": later}).text
    assert rows(now, "balances-at") == rows(now, "balances")
    (line,) = exported(client, "/console/balances.csv", uid="u1", at=later)
    assert (line["currency"], line["available"]) == ("EUR", rows(now, "balances")[0].split("|")[1])
    bad = client.get("/console/users", params={"uid": "u1", "at": "11/21/26"})
    assert bad.status_code == 400


def test_the_next_page_of_a_users_bets_keeps_the_moment_of_the_balances_asked_for(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(users, "LIST_PAGE", 2)
    signed_in(client, "vic")
    page = client.get("/console/users", params={"uid": "u1", "at": "2026-01-01"}).text
    following = re.search(r'<a href="\?([^"]+)" rel="next"', page)
    assert following, page
    assert "at=2026-01-01T00%3A00%3A00Z" in following.group(1)
    assert "bets_before=" in following.group(1)


def test_the_user_list_shows_each_users_balances_and_exports_them(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    listed = rows(client.get("/console/users").text, "users")
    assert [row.split("|")[0] for row in listed] == ["u2", "u1"]
    assert "EUR 39.00 / 11.00" in listed[0]
    users = exported(client, "/console/users.csv")
    assert '"available":"39.00"' in users[0]["balances"]


def test_bets_are_listed_the_last_placed_first_with_their_tournaments_names(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    listed = rows(client.get("/console/bets").text, "bets")
    assert [row.split("|")[0] for row in listed] == [
        "1002",
        *map(str, range(3005, 3000, -1)),
        "1500",
        "2001",
    ]
    assert "7 Tournament 7" in listed[-1]
    by_uid = rows(client.get("/console/bets", params={"order": "uid"}).text, "bets")
    assert [row.split("|")[0] for row in by_uid][:2] == ["3005", "3004"]
    assert [line["uid"] for line in exported(client, "/console/bets.csv", user="u1")][-2:] == [
        "1500",
        "2001",
    ]


def test_a_tournament_lists_every_entry_and_holds_name_their_tournament(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    nine = client.get("/console/tournaments", params={"uid": "9"}).text
    assert [row.split("|")[0] for row in rows(nine, "bets")] == [
        str(uid) for uid in range(3005, 3000, -1)
    ]
    assert 'href="/console/bets.csv?pool=9&amp;order=time"' in nine
    holds = rows(client.get("/console/holds").text, "holds")
    assert holds[0].split("|")[2] == "8 Tournament 8"


# --- formats -------------------------------------------------------------------------------------


def test_no_time_field_is_left_to_the_browsers_locale_and_durations_read_as_words(
    client: TestClient[Any],
) -> None:
    signed_in(client, "ada")
    holds = client.get("/console/holds").text
    assert "estimated end plus 6 hours has passed" in holds
    assert "7 days after" in holds
    for path in ("/console/deliveries", "/console/earnings", "/console/users?uid=u1"):
        page = client.get(path).text
        assert 'type="datetime-local"' not in page
        assert re.search(r'placeholder="YYYY-MM-DD HH:MM"', page), path
    searched = client.get("/console/deliveries", params={"since": "2020-01-01 00:00"})
    assert searched.status_code == 200
    assert client.get("/console/deliveries", params={"since": "11/21/2026"}).status_code == 400


def test_known_choices_are_selects_currency_and_tournament_status(client: TestClient[Any]) -> None:
    signed_in(client, "cal")
    user = client.get("/console/users", params={"uid": "u1"}).text
    assert re.search(
        r'<select id="currency" name="currency" required><option selected>EUR</option></select>',
        user,
    )
    listed = client.get("/console/tournaments").text
    assert '<select id="tournaments-status" name="status">' in listed


def test_the_chart_of_a_young_ledger_starts_at_its_first_activity() -> None:
    now = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    busy = HourActivity(
        hour=datetime(2026, 11, 22, 7, tzinfo=UTC),
        currency="EUR",
        entries=3,
        stakes=Decimal("30.00"),
        payouts=Decimal("0.00"),
    )
    drawn = chart([busy], now)
    assert [datetime.fromtimestamp(x, UTC).hour for x in drawn["x"]] == [6, 7, 8, 9]
    assert drawn["currencies"]["EUR"]["entries"] == [0, 3, 0, 0]
    # With nothing to draw, the whole week.
    assert len(chart([], now)["x"]) == 7 * 24
