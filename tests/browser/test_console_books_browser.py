"""The console's pages in a real browser (the books, the delivery journal, every page fitting
the screen), against a real ``ledger serve`` on 127.0.0.1, once per store; marked ``browser`` as
test_console_roles_browser says. Screenshots of every page, at 1280 px and at a phone's 390 px,
land in ``$LEDGER_SCREENSHOTS`` when it is set (one folder per test and store), else in the
test's tmp dir (``screens/``).
"""

from __future__ import annotations

import re

import pytest

from support.browser import Console, available, fetch, find_user, rows

pytestmark = pytest.mark.browser


def test_the_books_pages_answer_a_support_ticket_in_a_real_browser(console: Console) -> None:
    console.sign_in("vic")
    # Find the user by name, read a running balance on their statement.
    find_user(console, "u1")
    console.shot("user")
    # Account, currency, amount and the balance after it: the hold left 89.00 available.
    statement = console.text("#statement tbody")
    assert "available\tEUR\t-11.00\t89.00\thold" in statement
    assert "held\tEUR\t11.00\t11.00\thold" in statement
    assert console.text("#statement tbody tr:last-child td.balance-after") == "100.00"
    assert "1001" in console.text("#user table.bets")

    # Follow the bet to the deliveries that named it, and on to the delivery search.
    console.click("#statement a[href*='/console/bets?uid=1001']")
    assert "req-place-1001" in console.text("#bet-deliveries")
    assert "hold" in console.text("#bet-postings")
    console.shot("bet-deliveries")
    console.click("#bet-deliveries a[href*='request_id=req-place-1001']")
    assert "req-place-1001" in console.text("#deliveries tbody")
    assert "req-place-1002" not in console.text("#deliveries tbody")

    # Find a delivery by request id with the search form.
    console.open("/console/deliveries")
    console.fill("#request-id", "req-place-1002")
    console.click("#find-deliveries")
    # Waits for the results page: the unfiltered one lists both deliveries.
    console.text("#deliveries tbody", lambda text: "req-place-1002" in text and "1001" not in text)
    assert console.read("return document.querySelectorAll('#deliveries tbody tr').length;") == 1
    console.shot("deliveries")

    # The stale hold, from the overview's count to the holds page.
    console.open("/console/overview")
    assert console.text("#stale-holds").startswith("1 stale hold")
    console.click("#stale-holds a")
    assert console.text("table.holds tbody").startswith("1002\tu2\t8")
    console.shot("holds")

    # Export a list as CSV: the same link the page shows, and the export is in the audit log.
    href = console.read("return document.querySelector('#holds-csv').getAttribute('href');")
    status, kind, body = fetch(console, href)
    assert status == 200
    assert kind.startswith("text/csv")
    assert body.splitlines()[1].startswith("1002,u2,8,EUR,10.00,1.00")
    console.open("/console/audit")
    assert "export\tholds\tok" in console.text("#audit tbody")
    assert all(url.startswith(console.url) for url in console.requested())
    console.sign_out()


PAGES = {
    "sign-in": "/console/sign-in",
    "overview": "/console/overview",
    "users": "/console/users",
    "user": "/console/users?uid=u1",
    "user-balance-at": "/console/users?uid=u1&at=2026-01-01",
    "bets": "/console/bets",
    "bet": "/console/bets?uid=1001",
    "tournaments": "/console/tournaments",
    "tournament": "/console/tournaments?uid=9",
    "earnings": "/console/earnings",
    "deliveries": "/console/deliveries",
    "deliveries-by-error": "/console/deliveries?error=auth.missing_token",
    "holds": "/console/holds",
    "check": "/console/check",
    "audit": "/console/audit",
    "operators": "/console/operators",
    "not-found": "/console/no-such-page",
    "unknown-user": "/console/users?uid=nobody",
}
# Pages a cashier sees otherwise: the movement form, and Operators refused with the roles.
CASHIER_PAGES = {"user-cashier": "/console/users?uid=u1", "refused-role": "/console/operators"}


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_fits_the_screen_and_is_saved_as_a_screenshot(
    console: Console, width: int
) -> None:
    console.open(PAGES["sign-in"])
    console.width(width)
    for who, pages in (("ada", PAGES), ("cal", CASHIER_PAGES)):
        console.sign_in(who)
        for name, path in pages.items():
            console.open(path)
            console.text("h1")
            if name == "overview":
                # The chart is drawn by the vendored uPlot from the page's own data.
                console.read("return document.querySelectorAll('#activity-charts .uplot').length;")
            fits = console.read(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                lambda value: value is not None,
            )
            console.shot(f"{name}-{width}")
            assert fits, f"{path} scrolls sideways at {width} px"
            assert all(url.startswith(console.url) for url in console.requested()), path
        console.sign_out()


def test_a_cashiers_deposit_shows_the_new_balance_and_statement_line_at_once(
    console: Console,
) -> None:
    console.sign_in("cal")
    find_user(console, "u1")
    assert available(console) == "89.00"
    # The currency is a choice among the ledger's currencies, not free text.
    options = console.read(
        "return [...document.querySelectorAll('#currency option')].map(o => o.value);"
    )
    assert options == ["EUR"]
    console.fill("#amount", "5.25")
    console.fill("#reference", "ticket-77")
    console.click("#move")
    console.text("#movement-done", lambda text: "ticket-77" in text)
    # No reload: the balances and the statement beside "applied" are the new ones.
    assert available(console) == "94.25"
    newest = rows(console, "#statement tbody")[0]
    assert "5.25\t94.25\tdeposit" in newest
    assert "ticket-77" in newest
    console.shot("deposit-applied")
    # A refusal lands beside the form, the figures stay.
    console.driver.execute_script("document.querySelector('#kind').value = 'withdrawal';")
    console.fill("#amount", "1000")
    console.fill("#reference", "ticket-78")
    console.click("#move")
    assert "user.insufficient_funds" in console.text("#movement-result #error")
    assert available(console) == "94.25"
    console.shot("withdrawal-refused")


def test_no_console_page_is_a_dead_end_in_a_real_browser(console: Console) -> None:
    console.sign_in("cal")
    # The server's root leads to the console.
    console.open("/")
    console.text("h1", lambda text: text == "Overview")
    # A mistyped address: a console page with the navigation, not the API's JSON.
    console.open("/console/overveiw")
    assert console.text("h1") == "Not found"
    assert "no console page at /console/overveiw" in console.text("#error")
    console.shot("not-found")
    console.click("#pages a[href='/console/users']")
    console.text("h1", lambda text: text == "Users")
    # An unknown user: the search again, filled with what was asked.
    console.open("/console/users?uid=name-u1")
    assert console.text("h1") == "Not found"
    console.click("#find-user")
    console.text("#users-heading", lambda text: "name-u1" in text)
    assert "u1" in console.text("#users tbody")
    # An unknown bet: a way to find another.
    console.open("/console/bets?uid=424242")
    console.fill("#bet-uid", "1001")
    console.click("#find-bet")
    assert console.text("#bet-state") == "placed"
    # A page refused for the role says what the role may do.
    console.open("/console/operators")
    assert console.text("h1") == "Not for the cashier role"
    assert "deposit or withdraw" in console.text("#role-explained")
    assert console.text("#roles tr.mine").startswith("cashier")
    console.shot("refused-role")
    console.sign_out()
    help_text = console.text("#sign-in-help")
    assert "/console" in help_text
    assert "ledger operators add" in help_text


def test_the_delivery_journal_keeps_its_detail_in_a_real_browser(console: Console) -> None:
    console.sign_in("vic")
    # Each refused delivery's count on the overview opens the deliveries of its own error key.
    for key, request_id in (
        ("auth.missing_token", "req-no-token"),
        ("auth.invalid_token", "req-bad-token"),
    ):
        console.open("/console/overview")
        console.click(f"#deliveries-24h a[href*='error={key}']")
        console.text("#delivery-error", lambda _: True)
        assert console.read("return document.querySelector('#delivery-error').value;") == key
        listed = rows(console, "#deliveries tbody")
        assert len(listed) == 1
        assert request_id in listed[0]
    console.shot("deliveries-by-error")
    # The start of a request id, in another case.
    console.open("/console/deliveries")
    console.fill("#request-id", "REQ-PLACE-")
    console.click("#find-deliveries")
    console.text("#deliveries tbody", lambda text: "req-no-token" not in text)
    found = rows(console, "#deliveries tbody")
    assert [row.split("\t")[1] for row in found] == ["req-place-1002", "req-place-1001"]
    # A row naming five bets shows three and how many more, its date on one line.
    console.open("/console/deliveries?request_id=req-free")
    (row,) = rows(console, "#deliveries tbody")
    assert "3001 3002 3003 and 2 more" in row
    heights = console.read(
        "const cell = document.querySelector('#deliveries td.time');"
        " return [cell.getBoundingClientRect().height,"
        " parseFloat(getComputedStyle(cell).lineHeight)];"
    )
    assert heights[0] < 2 * heights[1]
    console.shot("deliveries-five-bets")


def test_the_views_a_support_agent_asks_for_in_a_real_browser(console: Console) -> None:
    console.sign_in("vic")
    # House earnings for a chosen period, typed as ISO 8601 UTC.
    console.open("/console/earnings")
    console.fill("#earnings-since", "2020-01-01 00:00")
    console.click("#show-earnings")
    console.text("#earnings-heading", lambda text: "2020-01-01 00:00:00" in text)
    assert rows(console, "#earnings tbody")[0].startswith("EUR\t")
    console.shot("earnings")
    href = console.read("return document.querySelector('#earnings-csv').getAttribute('href');")
    status, kind, body = fetch(console, href)
    assert (status, kind.split(";")[0]) == (200, "text/csv")
    assert body.splitlines()[1].startswith("2020-01-01T00:00:00+00:00,,EUR,")
    # A user's balances at a moment: before their first deposit, nothing.
    find_user(console, "u1")
    console.fill("#at", "2020-01-01 00:00")
    console.click("#show-balance-at")
    console.text("#balances-at-heading", lambda text: "2020-01-01 00:00:00" in text)
    assert rows(console, "#balances-at tbody") == ["No money at that time."]
    console.shot("balance-at")
    # The user list with each user's balances.
    console.open("/console/users")
    users = {row.split("\t")[0]: row for row in rows(console, "#users tbody")}
    assert "EUR 89.00 / 11.00" in users["u1"]
    # Bets the last placed first, each with its tournament's name.
    console.open("/console/bets")
    uids = [row.split("\t")[0] for row in rows(console, "#bets-heading ~ .scroll tbody")]
    assert uids == ["3005", "3004", "3003", "3002", "3001", "1002", "1001"]
    assert "7 Tournament 7" in rows(console, "#bets-heading ~ .scroll tbody")[-1]
    # A tournament's every entry, exported like every list.
    console.open("/console/tournaments?uid=9")
    assert len(rows(console, "#entries tbody")) == 5
    href = console.read(
        "return document.querySelector('#tournament-entries-csv').getAttribute('href');"
    )
    status, _, body = fetch(console, href)
    assert status == 200
    assert len(body.splitlines()) == 6
    console.shot("tournament-entries")
    # The stale hold names its tournament; its grace reads as words.
    console.open("/console/holds")
    assert "8 Tournament 8" in rows(console, "table.holds tbody")[0]
    assert "estimated end plus 6 hours" in console.text("main")
    # The tournament status is a choice.
    console.open("/console/tournaments")
    assert console.read("return document.querySelector('#tournaments-status').tagName;") == "SELECT"


def test_times_read_as_iso_8601_utc_on_charts_and_in_fields_in_a_real_browser(
    console: Console,
) -> None:
    console.sign_in("vic")
    console.open("/console/overview")
    ticks = console.read(
        "const f = document.querySelector('#activity-charts figure');"
        " return f ? f.dataset.ticks : null;"
    )
    labels = ticks.split(" | ")
    assert labels, ticks
    assert all(re.fullmatch(r"\d\d:\d\d( \d{4}-\d\d-\d\d)?", label) for label in labels), ticks
    assert re.search(r"\d{4}-\d\d-\d\d", labels[0]), ticks
    # A young ledger: the chart covers its few hours, not a week.
    hours = console.read(
        "return JSON.parse(document.querySelector('#activity-data').textContent).x.length;"
    )
    assert hours <= 3
    console.shot("chart")
    # No field leaves a time to the browser's locale.
    for path in ("/console/deliveries", "/console/earnings", "/console/users?uid=u1"):
        console.open(path)
        kinds = console.read(
            "return [...document.querySelectorAll('input')].map(i => i.type);",
            lambda found: found is not None,
        )
        assert "datetime-local" not in kinds, path
        assert "date" not in kinds, path
    console.open("/console/deliveries")
    console.fill("#delivery-since", "11/21/2026")
    assert console.read(
        "return document.querySelector('#delivery-since').validity.patternMismatch;"
    )
