"""The console in a real browser, for tests/browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) through Selenium, a ``ledger serve`` with operators and a small book, and
:class:`Console`, the browser on one server (navigation, reads that survive page loads,
screenshots).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from support.console import PASSWORD, ROLES
from support.httpkit import (
    OPERATOR_HEADERS,
    PLACE,
    Server,
    dumps,
    headers,
    ledger_command,
    run_server,
    server_env,
)
from support.payloads import entry, place

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@contextlib.contextmanager
def chromium() -> Iterator[WebDriver]:
    """Headless Chromium through Debian's chromium-driver (never one Selenium would download)."""
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


@contextlib.contextmanager
def seeded_server(tmp_path: Path, store_url: str) -> Iterator[Server]:
    """A ``ledger serve`` on ``store_url`` with the three operators of :data:`ROLES` and a small
    book: two users' deposits and entries (one hold stale), five free entries in one request,
    two deliveries refused 401."""
    env = server_env(store_url)
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


def screens_for(tmp_path: Path, test_name: str) -> Path:
    """Where a test's screenshots go: ``$LEDGER_SCREENSHOTS/<test>`` when set, else its tmp dir."""
    chosen = os.environ.get("LEDGER_SCREENSHOTS")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", test_name).strip("-")
    screens = Path(chosen) / name if chosen else tmp_path / "screens"
    screens.mkdir(parents=True, exist_ok=True)
    return screens


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


def fetch(console: Console, path: str) -> list[Any]:
    """GET ``path`` from the page itself (the browser's cookies): ``[status, type, body]``."""
    script = """
        const [url, done] = arguments;
        fetch(url).then(answer => answer.text().then(
            body => done([answer.status, answer.headers.get('content-type'), body])));
    """
    return list(console.driver.execute_async_script(script, console.url + path))


def rows(console: Console, selector: str) -> list[str]:
    """The text of each row of the table body at ``selector``, cells joined by tabs."""
    script = (
        f"return [...document.querySelectorAll({json.dumps(selector + ' tr')})]"
        ".map(row => row.innerText.trim());"
    )
    return list(console.read(script, lambda found: found is not None))
