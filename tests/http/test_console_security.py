"""The console's defences against unauthenticated load: sign-in rates, the hashing pool of its
own, the form body limit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.http.app import create_app
from ledger.operators import Operators
from ledger.settings import Settings, SettingsError
from support.console import PASSWORD, ROLES, csrf_of, sign_in
from support.httpkit import OPERATOR_HEADERS, serve, settings_for


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The passwords checked, one per hash run."""
    seen: list[str] = []
    real = ledger.operators.verify_password

    def counted(password: str, stored: str) -> bool:
        seen.append(password)
        return real(password, stored)

    monkeypatch.setattr(ledger.operators, "verify_password", counted)
    return seen


def staffed(tmp_path: Path) -> None:
    with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
        staff = Operators(book.store)
        for name, role in ROLES.items():
            staff.add(name, role, PASSWORD)


class FromPeer:
    """The app, as if every request's TCP peer were ``host`` (the test client says
    ``testclient``, which is no address)."""

    def __init__(self, app: Any, host: str) -> None:
        self.app, self.host = app, host

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope["client"] = (self.host, 50000)
        await self.app(scope, receive, send)


@contextmanager
def served_to(tmp_path: Path, host: str, **overrides: Any) -> Iterator[TestClient[Any]]:
    """A test client whose requests come from ``host``, on an app with a staff."""
    app = create_app(settings_for(tmp_path, **overrides))
    with TestClient(FromPeer(app, host), raise_server_exceptions=False) as client:
        staffed(tmp_path)
        yield client


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path, sign_in_rate="3/minute") as found:
        staffed(tmp_path)
        yield found


def test_sign_ins_over_the_rate_of_one_address_are_answered_429_before_any_hash(
    client: TestClient[Any], hashes: list[str]
) -> None:
    answers = [sign_in(client, "ada", "wrong password").status_code for _ in range(3)]
    assert answers == [401, 401, 401]
    refused = sign_in(client, "ada")
    assert refused.status_code == 429
    assert "auth.throttled" in refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert len(hashes) == 3


def test_sign_ins_over_the_overall_rate_are_answered_429_whatever_their_address(
    tmp_path: Path, hashes: list[str]
) -> None:
    with served_to(
        tmp_path,
        "10.0.0.1",
        sign_in_rate="1/minute",
        sign_in_rate_total="4/minute",
        trusted_proxies=(ip_network("10.0.0.1"),),
    ) as client:
        form = csrf_of(client.get("/console/sign-in").text)
        statuses = []
        for n in range(6):
            answer = client.post(
                "/console/sign-in",
                data={"name": "ada", "password": "wrong", "csrf": form},
                headers={"x-forwarded-for": f"198.51.100.{n}"},
                follow_redirects=False,
            )
            statuses.append(answer.status_code)
            if answer.status_code == 401:  # a failed sign-in hands out a new form token
                form = csrf_of(answer.text)
        assert statuses == [401, 401, 401, 401, 429, 429]
        assert len(hashes) == 4


def test_sign_ins_hash_on_a_pool_of_their_own_so_ready_and_admin_never_wait_behind_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, hashing = threading.Event(), threading.Semaphore(0)
    real = ledger.operators.verify_password

    def stuck(password: str, stored: str) -> bool:
        hashing.release()
        release.wait(30)
        return real(password, stored)

    monkeypatch.setattr(ledger.operators, "verify_password", stuck)
    with serve(tmp_path, worker_threads=2, hash_threads=2, sign_in_rate="100/minute") as client:
        staffed(tmp_path)
        form = csrf_of(client.get("/console/sign-in").text)
        data = {"name": "ada", "password": "wrong", "csrf": form}
        with ThreadPoolExecutor(max_workers=12) as pool:
            flood = [
                pool.submit(client.post, "/console/sign-in", data=data, follow_redirects=False)
                for _ in range(8)
            ]
            try:
                for _ in range(2):  # both hashing threads are stuck
                    assert hashing.acquire(timeout=10)
                ready = pool.submit(client.get, "/ready")
                admin = pool.submit(client.get, "/admin/audit", headers=OPERATOR_HEADERS)
                assert ready.result(timeout=10).status_code == 200
                assert admin.result(timeout=10).status_code == 200
            finally:
                release.set()
            statuses = sorted(answer.result(timeout=30).status_code for answer in flood)
    # Two hashing, four queued behind them; the rest were turned away at once.
    assert statuses == [401] * 6 + [429] * 2


def test_a_sign_in_body_over_the_form_limit_is_refused_413_unparsed(
    client: TestClient[Any], hashes: list[str]
) -> None:
    form = csrf_of(client.get("/console/sign-in").text)
    data = {"name": "ada", "password": "x" * 200_000, "csrf": form}
    answer = client.post("/console/sign-in", data=data, follow_redirects=False)
    assert answer.status_code == 413
    assert answer.json()["error"] == "request.too_large"
    assert hashes == []
    # and every other console form has the same limit
    assert sign_in(client, "ada").status_code == 303
    csrf = csrf_of(client.get("/console/overview").text)
    big = {"csrf": csrf, "kind": "deposit", "uid": "u1", "reference": "r" * 100_000}
    assert client.post("/console/users/movements", data=big).status_code == 413


def test_the_sign_in_limits_are_read_from_the_environment_and_checked() -> None:
    found = Settings.from_env(
        {
            "LEDGER_SIGN_IN_RATE": "5/minute",
            "LEDGER_SIGN_IN_RATE_TOTAL": "2 per second",
            "LEDGER_HASH_THREADS": "1",
        }
    )
    assert (found.sign_in_rate, found.sign_in_rate_total, found.hash_threads) == (
        "5/minute",
        "2 per second",
        1,
    )
    for name, value in (
        ("LEDGER_SIGN_IN_RATE", "lots"),
        ("LEDGER_SIGN_IN_RATE_TOTAL", "0/minute"),
        ("LEDGER_HASH_THREADS", "0"),
    ):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({name: value})


@pytest.mark.parametrize(
    ("overrides", "headers", "secure"),
    [
        ({}, {"x-forwarded-proto": "https"}, False),  # nobody trusted: the header is ignored
        ({"trusted_proxies": (ip_network("10.0.0.0/8"),)}, {"x-forwarded-proto": "https"}, True),
        ({"trusted_proxies": (ip_network("10.0.0.0/8"),)}, {"x-forwarded-proto": "http"}, False),
        ({"trusted_proxies": (ip_network("10.9.9.9"),)}, {"x-forwarded-proto": "https"}, False),
        ({"secure_cookies": "always"}, {}, True),
    ],
)
def test_the_session_cookie_is_secure_whenever_the_request_reached_a_trusted_proxy_over_tls(
    tmp_path: Path, overrides: dict[str, Any], headers: dict[str, str], secure: bool
) -> None:
    with served_to(tmp_path, "10.0.0.1", **overrides) as client:
        form = client.get("/console/sign-in", headers=headers)
        token = csrf_of(form.text)
        # Set by hand: the test client keeps a Secure cookie from a plain-HTTP request.
        client.cookies.clear()
        answer = client.post(
            "/console/sign-in",
            data={"name": "ada", "password": PASSWORD, "csrf": token},
            headers={**headers, "cookie": f"ledger_console_sign_in={token}"},
            follow_redirects=False,
        )
        assert answer.status_code == 303
        cookies = answer.headers.get_list("set-cookie")
        session = next(c for c in cookies if c.startswith("ledger_console="))
        assert ("secure" in session.lower().split("; ")) is secure
        assert ("secure" in form.headers["set-cookie"].lower().split("; ")) is secure


@pytest.mark.parametrize(
    "path",
    [
        "/console/sign-in",
        "/console/overview",
        "/console/audit.csv",
        "/console/static/console.css",
        "/console/tournaments?uid=x",
        "/console/nowhere",
    ],
)
def test_every_console_answer_carries_the_security_headers_and_hsts_only_under_tls(
    tmp_path: Path, path: str
) -> None:
    with served_to(tmp_path, "10.0.0.1", trusted_proxies=(ip_network("10.0.0.0/8"),)) as client:
        assert sign_in(client, "ada").status_code == 303
        plain = client.get(path)
        tls = client.get(path, headers={"x-forwarded-proto": "https"})
    policy = plain.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy
    assert plain.headers["x-content-type-options"] == "nosniff"
    assert plain.headers["x-frame-options"] == "DENY"
    assert plain.headers["cache-control"] == "no-store"
    assert "strict-transport-security" not in plain.headers
    assert tls.headers["strict-transport-security"].startswith("max-age=")
