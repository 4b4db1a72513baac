"""The console's roles and its defences (CSRF, session fixation) in a real browser: headless
Chromium through Selenium (tests/support/browser.py), against a real ``ledger serve`` on
127.0.0.1, once per store.

Marked ``browser``: the default run leaves them out, ``.ci/run`` installs the browser and runs
them. A missing browser fails the run; it never skips.
"""

from __future__ import annotations

import re

import httpx
import pytest
from selenium.webdriver.common.by import By

from support.browser import Console, available, find_user
from support.console import PASSWORD

pytestmark = pytest.mark.browser


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
    console: Console,
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
    with httpx.Client(base_url=console.url) as attacker:
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
