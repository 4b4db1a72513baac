"""The console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) through Selenium, against a real ``ledger serve`` on 127.0.0.1, once per
store.

Marked ``browser``: the default run leaves them out, ``.ci/run`` installs the browser and runs
them. A missing browser fails the run; it never skips. Screenshots of every page, at 1280 px and
at a phone's 390 px, land in ``$LEDGER_SCREENSHOTS`` when it is set (one folder per test and
store), else in the test's tmp dir (``screens/``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from support.httpkit import (
    CLIENT,
    OPERATOR,
    OPERATOR_HEADERS,
    PLACE,
    SECRET,
    Server,
    dumps,
    headers,
    ledger_command,
    run_server,
)
from support.payloads import entry, place

pytestmark = pytest.mark.browser

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PASSWORD = "correct horse battery"
ROLES = {"vic": "viewer", "cal": "cashier", "ada": "admin"}


@pytest.fixture
def driver() -> Iterator[WebDriver]:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    assert not missing, f"install Debian's chromium and chromium-driver: {missing} missing"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests run as root in CI
        "--disable-gpu",
        "--window-size=1280,900",
        # Nothing may leave 127.0.0.1: no component updates, no background fetches.
        "--disable-component-update",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-default-apps",
        "--no-first-run",
    ):
        options.add_argument(argument)
    # The driver's path, always: without it Selenium Manager would try to download one.
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def server(tmp_path: Path, store_url: str) -> Iterator[Server]:
    env = {
        "LEDGER_DATABASE_URL": store_url,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
    }
    # The first operators are made as the README says: `ledger operators add`.
    for name, role in ROLES.items():
        subprocess.run(
            [*ledger_command(), "operators", "add", name, "--role", role, "--password-stdin"],
            input=PASSWORD + "\n",
            env={**env, "PATH": "/usr/bin:/bin"},
            check=True,
            capture_output=True,
            text=True,
        )
    with run_server(tmp_path, env) as running:
        with httpx.Client(base_url=running.url) as http:
            deposit = {"user": "u1", "currency": "EUR", "amount": "100.00", "reference": "top-up-1"}
            assert http.post("/admin/deposits", json=deposit, headers=OPERATOR_HEADERS).is_success
            body = dumps(place(entry(1001, pool=7)))
            sent = headers(PLACE, **{"X-Request-Id": "req-place-1001"})
            assert http.post("/bets", content=body, headers=sent).is_success
            # A stale hold: Bob's entry in a tournament that should have ended long ago.
            deposit = {"user": "u2", "currency": "EUR", "amount": "50.00", "reference": "top-up-2"}
            assert http.post("/admin/deposits", json=deposit, headers=OPERATOR_HEADERS).is_success
            ended = entry(1002, user="u2", pool=8)
            ended["pool"]["estimatedEndTime"] = "2020-01-01T00:00:00Z"
            sent = headers(PLACE, **{"X-Request-Id": "req-place-1002"})
            assert http.post("/bets", content=dumps(place(ended)), headers=sent).is_success
            # Five free entries of Cy's in one request (a row naming more bets than it shows).
            free = [entry(3001 + n, user="u3", pool=9, amount=0, rake=0) for n in range(5)]
            sent = headers(PLACE, **{"X-Request-Id": "Req-Free-Five"})
            assert http.post("/bets", content=dumps(place(*free)), headers=sent).is_success
            # Two deliveries refused 401, each with its own error key.
            for request_id, authorization in (("req-no-token", ""), ("req-bad-token", "Bearer x")):
                sent = headers(
                    PLACE, **{"X-Request-Id": request_id, "Authorization": authorization}
                )
                body = dumps(place(entry(4001)))
                assert http.post("/bets", content=body, headers=sent).status_code == 401
        yield running


class Console:
    """The browser on one server: navigation, reads that survive page loads, screenshots."""

    def __init__(self, driver: WebDriver, server: Server, screens: Path) -> None:
        self.driver, self.url, self.screens = driver, server.url, screens
        screens.mkdir(exist_ok=True)

    def open(self, path: str) -> None:
        self.driver.get(self.url + path)

    def read(self, script: str, until: Callable[[Any], bool] = bool) -> Any:
        """``script``'s value once ``until`` holds; one ``execute_script`` per try, so a page
        being replaced meanwhile is retried rather than read half-gone."""
        found: list[Any] = []

        def ready(driver: WebDriver) -> bool:
            value = driver.execute_script(script)
            found[:] = [value]
            return until(value)

        WebDriverWait(self.driver, 15, ignored_exceptions=[WebDriverException]).until(ready)
        return found[0]

    def text(self, selector: str, until: Callable[[str], bool] = bool) -> str:
        script = (
            f"const e = document.querySelector({json.dumps(selector)});"
            " return e ? e.innerText : '';"
        )
        return str(self.read(script, until))

    def fill(self, selector: str, value: str) -> None:
        field = self.driver.find_element(By.CSS_SELECTOR, selector)
        field.clear()
        field.send_keys(value)

    def click(self, selector: str) -> None:
        self.driver.find_element(By.CSS_SELECTOR, selector).click()

    def width(self, pixels: int) -> None:
        """Lay pages out ``pixels`` wide from the next load on: a phone's width through the
        DevTools' device metrics (headless Chromium lays no window out under 500 px)."""
        if pixels < 600:
            metrics = {"width": pixels, "height": 844, "deviceScaleFactor": 1, "mobile": True}
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        else:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            self.driver.set_window_size(pixels, 1250)

    def shot(self, name: str) -> Path:
        """The whole page, not only what the window shows, as ``name.png``."""
        path = self.screens / f"{name}.png"
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000)}
        picture = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1}},
        )
        path.write_bytes(base64.b64decode(picture["data"]))
        return path

    def sign_in(self, name: str) -> None:
        self.open("/console/sign-in")
        self.text("h1")
        self.fill("#name", name)
        self.fill("#password", PASSWORD)
        self.click("#sign-in")
        self.text("#whoami", lambda text: text == f"{name} ({ROLES[name]})")

    def sign_out(self) -> None:
        self.click("#sign-out")
        self.text("h1", lambda text: text.startswith("Sign in"))

    def post(self, path: str, form: dict[str, str]) -> int:
        """POST ``form`` from the page itself (the browser's cookies, no CSRF header)."""
        script = """
            const [url, form, done] = arguments;
            fetch(url, {method: 'POST', body: new URLSearchParams(form), redirect: 'manual'})
                .then(answer => done(answer.status));
        """
        return int(self.driver.execute_async_script(script, self.url + path, form))

    def csrf(self) -> str:
        return str(self.read("return document.querySelector('input[name=csrf]').value;"))

    def requested(self) -> list[str]:
        """Every URL this page loaded (itself and its resources)."""
        script = "return performance.getEntries().map(e => e.name).filter(n => n.includes('://'));"
        return list(self.read(script, lambda names: True))


@pytest.fixture
def console(
    driver: WebDriver, server: Server, tmp_path: Path, request: pytest.FixtureRequest
) -> Console:
    chosen = os.environ.get("LEDGER_SCREENSHOTS")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
    screens = Path(chosen) / name if chosen else tmp_path / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    return Console(driver, server, screens)


def available(console: Console) -> str:
    return console.text("#balances tbody tr td:nth-child(2)")


def find_user(console: Console, uid: str, name: str | None = None) -> None:
    """Search the users by name (by default the one the platform gave ``uid``), open ``uid``."""
    query = name or f"name-{uid}"
    console.open("/console/users")
    console.fill("#q", query)
    console.click("#find-user")
    # The results page, not the one the search left (whose list may hold the same link).
    console.text("#users-heading", lambda text: query in text)
    link = json.dumps(f"#users a[href$='uid={uid}']")
    console.read(f"const a = document.querySelector({link}); if (a) a.click(); return !!a;")
    console.text("#user-heading", lambda text: uid in text)


def test_each_role_does_what_it_may_in_a_real_browser(console: Console) -> None:
    # A viewer finds a user, reads a balance and a statement line, and may not move money.
    console.open("/console/overview")
    console.text("h1", lambda text: text.startswith("Sign in"))
    console.shot("sign-in")
    console.sign_in("vic")
    console.shot("overview")
    assert console.text("#totals tbody") == "EUR\t128.00\t22.00\t-150.00"
    find_user(console, "u1")
    assert available(console) == "89.00"
    assert "top-up-1" in console.text("#statement")
    assert console.driver.find_elements(By.ID, "movement") == []
    refused = console.post(
        "/console/users/movements",
        {"csrf": console.csrf(), "uid": "u1", "kind": "deposit", "currency": "EUR",
         "amount": "5", "reference": "viewer-try"},
    )  # fmt: skip
    assert refused == 403
    console.sign_out()

    # A cashier deposits; a double click moves the money once.
    console.sign_in("cal")
    find_user(console, "u1")
    # EUR, the ledger's one currency, is already chosen.
    console.fill("#amount", "5.25")
    console.fill("#reference", "ticket-42")
    console.click("#move")
    console.driver.execute_script("document.querySelector('#move').click()")
    console.text("#movement-done", lambda text: "ticket-42" in text)
    console.shot("deposit")
    find_user(console, "u1")
    assert available(console) == "94.25"
    console.shot("users")

    # Follow the bet from the statement to its page, and on to its tournament.
    console.click("#statement a[href*='/console/bets?uid=1001']")
    assert console.text("#bet-state") == "placed"
    assert "10.00" in console.text("#bet-facts")
    console.shot("bet")
    console.click("#bet-facts a[href*='/console/tournaments']")
    assert "EUR" in console.text("#report tbody")
    console.shot("tournament")
    console.open("/console/check")
    assert console.driver.find_elements(By.ID, "run-check") == []  # not for a cashier
    console.sign_out()

    # An admin runs check, reads the audit log and the operators.
    console.sign_in("ada")
    console.open("/console/check")
    console.click("#run-check")
    assert "The books balance" in console.text("#check-ok")
    console.shot("check")
    console.open("/console/audit")
    audit = console.text("#audit tbody")
    assert "cal\t" in audit
    assert "deposit\tu1\tok" in audit
    assert "withdrawal" not in audit
    assert "deposit\tu1\toperator.forbidden" in audit  # the viewer's try
    console.shot("audit")
    console.open("/console/operators")
    assert "vic" in console.text("#operators")
    console.shot("operators")
    assert all(url.startswith(console.url) for url in console.requested())

    # A phone-width screen: the page reflows rather than scrolling sideways.
    console.width(390)
    console.open("/console/overview")
    width = console.read("return [document.documentElement.scrollWidth, window.innerWidth];")
    assert width[0] <= width[1]
    console.shot("overview-phone")
    console.sign_out()


def test_csrf_and_session_fixation_attempts_are_refused_in_a_real_browser(
    console: Console, server: Server
) -> None:
    console.sign_in("cal")
    find_user(console, "u1")
    form = {"uid": "u1", "kind": "deposit", "currency": "EUR", "amount": "1", "reference": "x"}
    # A request forged with the victim's cookies but without the session's token: refused.
    assert console.post("/console/users/movements", form) == 403
    assert console.post("/console/users/movements", {**form, "csrf": "forged"}) == 403
    find_user(console, "u1")
    assert available(console) == "89.00"
    console.sign_out()

    # Fixation: an attacker signs in, plants their session token in the victim's browser, and
    # waits for the victim to sign in on top of it.
    with httpx.Client(base_url=server.url) as attacker:
        page = attacker.get("/console/sign-in").text
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token is not None
        attacker.post(
            "/console/sign-in", data={"name": "vic", "password": PASSWORD, "csrf": token.group(1)}
        )
        planted = attacker.cookies["ledger_console"]
        console.open("/console/sign-in")
        console.driver.add_cookie({"name": "ledger_console", "value": planted, "path": "/console"})
        console.sign_in("cal")
        assert console.driver.get_cookie("ledger_console")["value"] != planted  # type: ignore[index]
        assert attacker.get("/console/overview").status_code == 303  # planted token is dead
    console.shot("after-fixation-attempt")


def fetch(console: Console, path: str) -> list[Any]:
    """GET ``path`` from the page itself (the browser's cookies): ``[status, type, body]``."""
    script = """
        const [url, done] = arguments;
        fetch(url).then(answer => answer.text().then(
            body => done([answer.status, answer.headers.get('content-type'), body])));
    """
    return list(console.driver.execute_async_script(script, console.url + path))


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


def rows(console: Console, selector: str) -> list[str]:
    """The text of each row of the table body at ``selector``, cells joined by tabs."""
    script = (
        f"return [...document.querySelectorAll({json.dumps(selector + ' tr')})]"
        ".map(row => row.innerText.trim());"
    )
    return list(console.read(script, lambda found: found is not None))


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
