"""The console's pages on the operator's books, through Litestar's test client, on both stores:
users found by name, statements with running balances, bets with their postings and deliveries,
tournaments, deliveries, stale holds, the overview's figures, every list's CSV export (audited),
and an accessibility check of every page as each role.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.contract import PLACE_BET, SETTLE_BET
from ledger.http.console import books, deliveries, users
from ledger.operators import Operators
from support.console import PASSWORD, ROLES, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, dumps, headers, serve
from support.payloads import entry, place, settle

ENDED = "2020-01-01T00:00:00Z"  # a tournament that should have ended long ago


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


def deliver(client: TestClient[Any], path: str, body: Any, event: str, request_id: str) -> None:
    answer = client.post(
        path, content=dumps(body), headers=headers(event, **{"X-Request-Id": request_id})
    )
    assert answer.is_success, answer.text


@pytest.fixture
def client(tmp_path: Path, store_url: str) -> Iterator[TestClient[Any]]:
    """A server on ``store_url`` with three operators, Ann (u1) and Bob (u2): Ann's bet 1001 in
    tournament 7 settled, Bob's bet 1002 open in tournament 8, which should have ended."""
    with serve(tmp_path, database_url=store_url) as found:
        with ledger.open_ledger(store_url) as book:
            staff = Operators(book.store)
            for name, role in ROLES.items():
                staff.add(name, role, PASSWORD)
        wallet = Wallet(found)
        wallet.deposit("u1", "100.00")
        wallet.deposit("u2", "50.00")
        ann = entry(1001, user="u1", pool=7)
        ann["user"]["name"] = "Ann Example"
        deliver(found, "/bets", place(ann), PLACE_BET, "req-ann-place")
        bob = entry(1002, user="u2", pool=8)
        bob["user"]["name"] = "Bob Sample"
        bob["pool"]["estimatedEndTime"] = ENDED
        deliver(found, "/bets", place(bob), PLACE_BET, "req-bob-place")
        won = settle(7, (1001, "25.00"))
        won["pools"][0]["bets"][0]["user"]["name"] = "Ann Example"  # the latest name wins
        deliver(found, "/winners", won, SETTLE_BET, "req-ann-settle")
        yield found


def short_pages(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Every list of the console paged ``rows`` at a time."""
    for module in (books, deliveries, users):
        monkeypatch.setattr(module, "LIST_PAGE", rows)


def signed_in(client: TestClient[Any], name: str) -> None:
    answer = sign_in(client, name)
    assert answer.status_code == 303, answer.text


def cells(html: str, table: str) -> list[list[str]]:
    """The text of each body row's cells of the table with this id (or class)."""
    grid = Grid(table)
    grid.feed(html)
    return grid.rows


class Grid(HTMLParser):
    def __init__(self, wanted: str) -> None:
        super().__init__()
        self.wanted, self.depth = wanted, 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and (
            found.get("id") == self.wanted or self.wanted in (found.get("class") or "").split()
        ):
            self.depth = 1
        elif tag == "table" and self.depth:
            self.depth += 1
        elif self.depth and tag == "tbody":
            self.body = True
        elif self.depth and self.body and tag == "tr":
            self.rows.append([])
        elif self.depth and self.body and tag == "td":
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "tbody":
            self.body = False
        elif tag == "table" and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def audited_exports(client: TestClient[Any]) -> list[tuple[str, str, str]]:
    answer = client.get("/admin/audit", params={"action": "export"}, headers=OPERATOR_HEADERS)
    return [(item["operator"], item["target"], item["outcome"]) for item in answer.json()["audit"]]


# --- the pages --------------------------------------------------------------------------------


def test_users_are_found_by_name_or_uid_and_a_statement_shows_running_balances(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    by_name = cells(client.get("/console/users", params={"q": "ann ex"}).text, "users")
    assert [row[:2] for row in by_name] == [["u1", "Ann Example"]]
    by_uid = cells(client.get("/console/users", params={"q": "u2"}).text, "users")
    assert [row[:2] for row in by_uid] == [["u2", "Bob Sample"]]
    page = client.get("/console/users", params={"uid": "u1"}).text
    assert "Ann Example" in page
    # Each line with the balance its account had after it; newest first (the legs of one
    # transaction in the order they were written).
    statement = [(row[2], row[4], row[5], row[6]) for row in cells(page, "statement")]
    assert statement[-1] == ("available", "100.00", "100.00", "deposit")
    assert sorted(statement) == sorted(
        [
            ("available", "25.00", "114.00", "settle"),
            ("held", "-11.00", "0.00", "settle"),
            ("available", "-11.00", "89.00", "hold"),
            ("held", "11.00", "11.00", "hold"),
            ("available", "100.00", "100.00", "deposit"),
        ]
    )
    assert [row[0] for row in cells(page, "bets")] == ["1001"]
    assert client.get("/console/users", params={"uid": "nobody"}).status_code == 404


def test_a_statement_and_every_list_page_on_with_their_opaque_cursors(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    short_pages(monkeypatch, 2)
    signed_in(client, "vic")
    first = client.get("/console/users", params={"uid": "u1"}).text
    older = re.search(r'href="/console/users\?uid=u1&amp;before=([^"]+)"', first)
    assert older, first
    rest = client.get(
        "/console/users",
        params={"uid": "u1", "before": older.group(1)},
        headers={"HX-Request": "true"},
    ).text
    # htmx gets the next rows only, ready to append to the table.
    assert "<h1" not in rest
    assert "settle" not in rest
    assert "hold" in rest


PLACED = ["req-ann-more", "req-bob-place", "req-ann-place"]


@pytest.mark.parametrize(
    ("path", "table", "column", "every_row"),
    [
        ("/console/users", "users", 0, ["u2", "u1"]),
        ("/console/bets", "bets", 0, ["1003", "1002", "1001"]),
        ("/console/bets?user=u1", "bets", 0, ["1003", "1001"]),
        ("/console/tournaments", "tournaments", 0, ["9", "8", "7"]),
        ("/console/deliveries", "deliveries", 1, [*PLACED[:1], "req-ann-settle", *PLACED[1:]]),
        (f"/console/deliveries?event={PLACE_BET}", "deliveries", 1, PLACED),
        ("/console/holds?all=1", "holds", 0, ["1002", "1003"]),
        ("/console/tournaments?uid=9", "holds", 0, ["1003"]),
    ],
)
def test_every_list_pages_through_all_its_rows_with_its_cursor_keeping_its_filters(
    client: TestClient[Any],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    table: str,
    column: int,
    every_row: list[str],
) -> None:
    deliver(client, "/bets", place(entry(1003, user="u1", pool=9)), PLACE_BET, "req-ann-more")
    short_pages(monkeypatch, 1)
    signed_in(client, "vic")
    seen: list[str] = []
    url: str | None = path
    while url is not None:
        page = client.get(url)
        assert page.status_code == 200, page.text
        seen += [row[column] for row in cells(page.text, table) if len(row) > column]
        following = re.search(r'<a href="(\?[^"]+)" rel="next"', page.text)
        url = None if following is None else path.partition("?")[0] + unescape(following[1])
        assert len(seen) <= len(every_row), seen
    assert seen == every_row


def test_a_bet_shows_its_lifecycle_postings_and_every_delivery_that_named_it(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    page = client.get("/console/bets", params={"uid": "1001"}).text
    assert "Ann Example" in page
    assert "Tournament 7" in page
    assert "paid 25.00 EUR" in page
    legs = [(row[2], row[4], row[5]) for row in cells(page, "bet-postings")]
    assert sorted(legs) == sorted(
        [
            ("available", "-11.00", "hold"),
            ("held", "11.00", "hold"),
            ("held", "-11.00", "settle"),
            ("available", "25.00", "settle"),
        ]
    )
    named = [(row[1], row[2], row[3]) for row in cells(page, "bet-deliveries")]
    assert named == [
        ("req-ann-settle", SETTLE_BET, "200"),
        ("req-ann-place", PLACE_BET, "200"),
    ]
    assert 'href="/console/deliveries?request_id=req-ann-place"' in page
    assert 'href="/console/deliveries?bet=1001"' in page


def test_deliveries_are_searched_by_request_id_bet_status_event_and_time(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")

    def found(**params: str) -> list[str]:
        page = client.get("/console/deliveries", params=params)
        assert page.status_code == 200, page.text
        return [row[1] for row in cells(page.text, "deliveries") if len(row) > 1]

    assert found() == ["req-ann-settle", "req-bob-place", "req-ann-place"]
    assert found(request_id="req-bob-place") == ["req-bob-place"]
    assert found(bet="1001") == ["req-ann-settle", "req-ann-place"]
    assert found(event=SETTLE_BET, status="200") == ["req-ann-settle"]
    assert found(status="402") == []
    assert found(since="2999-01-01T00:00") == []
    assert found(until="2999-01-01T00:00", since="2020-01-01T00:00") == found()
    bad = client.get("/console/deliveries", params={"since": "yesterday"})
    assert bad.status_code == 400
    assert "request.invalid" in bad.text


def test_stale_holds_are_listed_oldest_first_and_a_tournament_shows_its_open_holds(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    stale = cells(client.get("/console/holds").text, "holds")
    # The tournament's name beside its uid.
    assert [(row[0], row[1], row[2], row[8]) for row in stale] == [
        ("1002", "u2", "8 Tournament 8", "stale")
    ]
    listed = cells(client.get("/console/tournaments").text, "tournaments")
    assert [(row[0], row[1], row[4]) for row in listed] == [
        ("8", "Tournament 8", "2020-01-01 00:00"),
        ("7", "Tournament 7", "-"),
    ]
    eight = client.get("/console/tournaments", params={"uid": "8"}).text
    assert [row[0] for row in cells(eight, "report")] == ["EUR"]
    assert [row[0] for row in cells(eight, "holds")] == ["1002"]
    seven = client.get("/console/tournaments", params={"uid": "7"}).text
    assert cells(seven, "holds") == [["No open hold here."]]


def test_the_overview_shows_the_days_deliveries_stale_holds_and_the_hourly_activity(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    page = client.get("/console/overview").text
    # The count before the error key: on a phone the count (the link) is never scrolled away.
    assert [row[:4] for row in cells(page, "deliveries-24h")] == [
        [PLACE_BET, "200", "2", ""],
        [SETTLE_BET, "200", "1", ""],
    ]
    assert "1 stale hold</a>" in page
    (hour,) = cells(page, "activity")
    assert hour[1:] == ["EUR", "2", "20.00", "25.00"]
    # The chart is drawn from the page's own data with the vendored uPlot: nothing external.
    assert "/console/static/uPlot.iife.min.js" in page
    assert re.findall(r'(?:src|href)="(https?:)?//', page) == []
    assert client.get("/console/static/uPlot.iife.min.js").status_code == 200


@pytest.mark.parametrize(
    ("path", "params", "first_line"),
    [
        ("/console/users.csv", {"q": "ann"}, "u1,Ann Example"),
        ("/console/bets.csv", {"user": "u2"}, "1002,u2,Bob Sample,8"),
        ("/console/statement.csv", {"uid": "u2"}, None),
        ("/console/tournaments.csv", {}, "8,Tournament 8"),
        ("/console/deliveries.csv", {"request_id": "req-bob-place"}, None),
        ("/console/holds.csv", {}, "1002,u2,8,EUR,10.00,1.00"),
        ("/console/audit.csv", {}, None),
    ],
)
def test_every_list_exports_as_csv_and_each_export_is_audited(
    client: TestClient[Any], path: str, params: dict[str, str], first_line: str | None
) -> None:
    signed_in(client, "vic")
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(answer.text)))
    assert len(rows) >= 2, answer.text
    if first_line is not None:
        assert answer.text.splitlines()[1].startswith(first_line), answer.text
    name = path.removeprefix("/console/").removesuffix(".csv")
    assert ("vic", name, "ok") in audited_exports(client)


def test_an_export_refused_for_bad_input_is_a_400_and_audited_as_refused(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    assert client.get("/console/deliveries.csv", params={"since": "x"}).status_code == 400
    assert client.get("/console/statement.csv", params={"uid": "nobody"}).status_code == 404
    assert ("vic", "deliveries", "request.invalid") in audited_exports(client)
    assert ("vic", "statement", "user.not_found") in audited_exports(client)


# --- accessibility ------------------------------------------------------------------------------

PAGES = [
    "/console/overview",
    "/console/users",
    "/console/users?q=ann",
    "/console/users?uid=u1",
    "/console/bets",
    "/console/bets?uid=1001",
    "/console/tournaments",
    "/console/tournaments?uid=8",
    "/console/deliveries",
    "/console/deliveries?bet=1001",
    "/console/holds",
    "/console/holds?all=1",
    "/console/earnings",
    "/console/users?uid=u1&at=2026-01-01",
    "/console/check",
    "/console/audit",
    "/console/operators",
    # The pages that say no: a path that is none, an unknown user, bet and tournament.
    "/console/nowhere",
    "/console/users?uid=nobody",
    "/console/bets?uid=999999",
    "/console/tournaments?uid=999999",
]


class Rules(HTMLParser):
    """What the accessibility check reads: the page's language, inputs and their labels,
    headings in order, table headers' scope, forms sent by a real button."""

    def __init__(self) -> None:
        super().__init__()
        self.lang: str | None = None
        self.inputs: list[dict[str, str | None]] = []
        self.labelled: set[str] = set()
        self.headings: list[int] = []
        self.headers_without_scope: list[str] = []
        self.forms = 0
        self.buttons = 0
        self.in_th: list[str] | None = None
        self.scope: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "html":
            self.lang = found.get("lang")
        elif tag in ("input", "select", "textarea") and found.get("type") != "hidden":
            self.inputs.append(found)
        elif tag == "label" and found.get("for"):
            self.labelled.add(str(found["for"]))
        elif re.fullmatch(r"h[1-6]", tag):
            self.headings.append(int(tag[1]))
        elif tag == "th":
            self.in_th, self.scope = [], found.get("scope")
        elif tag == "form":
            self.forms += 1
        elif tag == "button":
            self.buttons += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self.in_th is not None:
            if self.scope not in ("col", "row"):
                self.headers_without_scope.append("".join(self.in_th))
            self.in_th = None

    def handle_data(self, data: str) -> None:
        if self.in_th is not None:
            self.in_th.append(data)


@pytest.mark.parametrize("role", ["vic", "cal", "ada"])
def test_every_page_as_every_role_labels_inputs_orders_headings_and_scopes_table_headers(
    client: TestClient[Any], role: str
) -> None:
    paths = ["/console/sign-in", *PAGES]  # the first one before signing in
    for path in paths:
        if path == PAGES[0]:
            signed_in(client, role)
        answer = client.get(path)
        # An operators page refused to a viewer is itself a page that must pass.
        assert answer.status_code in (200, 403, 404), (path, answer.status_code, answer.text)
        rules = Rules()
        rules.feed(answer.text)
        assert rules.lang == "en", path
        for field in rules.inputs:
            assert field.get("id") in rules.labelled, (path, field)
        assert rules.headings[:1] == [1], (path, rules.headings)
        assert rules.headings.count(1) == 1, (path, rules.headings)
        for before, after in zip(rules.headings, rules.headings[1:], strict=False):
            assert after <= before + 1, (path, rules.headings)
        assert rules.headers_without_scope == [], path
        # Every form is sent with a real button (Enter or Space on it), never a script-only link.
        assert rules.buttons >= rules.forms, path
