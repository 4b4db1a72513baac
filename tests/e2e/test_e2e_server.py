"""End to end: a real ``ledger serve`` process driven over HTTP, as the platform would.

The scenario is the contract's verification scenario (section 4.3 items 5 and 6) plus the checks
the hosted validator leaves to the client (item 8), on SQLite and on Postgres; balances are
checked through the operator API after every step.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from support.httpkit import (
    CLIENT,
    OPERATOR,
    PLACE,
    REFUND_BET,
    REFUND_TOURNAMENT,
    SECRET,
    SETTLE,
    dumps,
    headers,
    run_server,
)
from support.payloads import entry, place, refund, settle

ERROR_KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


class Platform:
    """The platform's side (callbacks) and the operator's (balances), over real HTTP."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def deliver(self, path: str, event: str, body: Any) -> httpx.Response:
        return self.http.post(path, content=dumps(body), headers=headers(event))

    def deposit(self, user: str, amount: str) -> None:
        body = {"user": user, "currency": "EUR", "amount": amount, "reference": f"dep-{user}"}
        response = self.http.post("/admin/deposits", json=body, headers=self.operator)
        assert response.status_code == 200, response.text

    @property
    def operator(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {OPERATOR}"}

    def balance(self, user: str) -> tuple[str, str]:
        response = self.http.get(f"/admin/users/{user}/balances", headers=self.operator)
        if response.status_code == 404 and response.json()["error"] == "user.not_found":
            return "0.00", "0.00"  # a user the ledger never saw holds nothing
        assert response.status_code == 200, response.text
        found = {item["currency"]: item for item in response.json()["balances"]}
        eur = found.get("EUR", {"available": "0.00", "held": "0.00"})
        return eur["available"], eur["held"]

    def ok(self, response: httpx.Response) -> None:
        assert response.status_code == 200, response.text
        assert "error" not in response.json()

    def twice(self, path: str, event: str, body: Any, user: str) -> tuple[str, str]:
        """Deliver, then re-send the identical payload: it must change nothing (item 8)."""
        self.ok(self.deliver(path, event, body))
        after = self.balance(user)
        self.ok(self.deliver(path, event, body))
        assert self.balance(user) == after, "a re-send moved money"
        return after


def test_verification_scenario_over_real_http(tmp_path: Path, store_url: str) -> None:
    env = {
        "LEDGER_DATABASE_URL": store_url,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
    }
    with run_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as http:
        platform = Platform(http)
        platform.deposit("u1", "100.00")
        assert platform.balance("u1") == ("100.00", "0.00")

        # Place Bet, paid: debits amount plus rake. Two teams of u1 in tournament 501.
        paid = place(entry(1001, pool=501), entry(1002, pool=501))
        assert platform.twice("/bets", PLACE, paid, "u1") == ("78.00", "22.00")

        # Settle Bet: one cash win, one zero payout; each paid once.
        results = settle(501, (1001, "25.00"), (1002, "0.00"))
        assert platform.twice("/winners", SETTLE, results, "u1") == ("103.00", "0.00")

        # Refund Bet: credits amount plus rake.
        platform.ok(platform.deliver("/bets", PLACE, place(entry(1003, pool=502))))
        assert platform.balance("u1") == ("92.00", "11.00")
        assert platform.twice("/bets/cancel", REFUND_BET, refund(502, 1003), "u1") == (
            "103.00",
            "0.00",
        )

        # Refund Tournament: every bet refunded exactly once.
        entries = place(
            entry(1004, pool=503, amount=Decimal("5.50"), rake=Decimal("0.50")),
            entry(1005, pool=503, amount=Decimal("5.50"), rake=Decimal("0.50")),
        )
        platform.ok(platform.deliver("/bets", PLACE, entries))
        assert platform.balance("u1") == ("91.00", "12.00")
        cancel = refund(503, 1004, 1005)
        assert platform.twice("/bets/cancel", REFUND_TOURNAMENT, cancel, "u1") == (
            "103.00",
            "0.00",
        )

        # Free-to-play: 200 with no debit, for a funded and an unfunded user alike.
        free = place(
            entry(1006, pool=504, amount=Decimal("0.0"), rake=Decimal("0.0")),
            entry(1007, user="nobody", pool=504, amount=Decimal("0.0"), rake=Decimal("0.0")),
        )
        assert platform.twice("/bets", PLACE, free, "u1") == ("103.00", "0.00")
        assert platform.balance("nobody") == ("0.00", "0.00")

        # An unfunded user is rejected with 402 and a snake_cased or dotted key, nothing held.
        for _ in range(2):
            response = platform.deliver("/bets", PLACE, place(entry(1008, user="u9", pool=505)))
            assert response.status_code == 402
            assert ERROR_KEY.match(response.json()["error"]), response.json()
        assert platform.balance("u9") == ("0.00", "0.00")

        check = http.get("/admin/check", headers=platform.operator)
        assert check.status_code == 200
        assert check.json()["ok"] is True
        metrics = http.get("/metrics").text
        assert 'outcome="user.insufficient_funds",status="402"} 2.0' in metrics
    # Every delivery was logged as one JSON line with its request id.
    assert server.output().count('"request_id":"00000000-0000-4000-8000-000000000001"') == 14


def test_development_mode_prints_a_curl_that_places_a_bet(tmp_path: Path) -> None:
    env = {"LEDGER_DATABASE_URL": f"sqlite:///{tmp_path}/dev.db"}
    with run_server(tmp_path, env, stdout=subprocess.PIPE) as server:
        assert server.process.stdout is not None
        lines: list[str] = []
        while len([line for line in lines if line.startswith("curl ")]) < 3:
            line = server.process.stdout.readline()
            assert line, "the banner ended early:\n" + "".join(lines)
            lines.append(line.strip())
        banner = "\n".join(lines)
        assert "Authorization: Bearer dev ey" in banner
        assert "export LEDGER_JWT_SECRET=" in banner
        free_bet, deposit, paid_bet = [line for line in lines if line.startswith("curl ")]

        def run(command: str) -> dict[str, Any]:
            done = subprocess.run(
                shlex.split(command), capture_output=True, text=True, timeout=30, check=True
            )
            import json

            result: dict[str, Any] = json.loads(done.stdout)
            return result

        assert "secrets" in run(free_bet)
        assert run(paid_bet)["error"] == "user.insufficient_funds"
        assert run(deposit)["applied"] is True
        assert "secrets" in run(paid_bet)


def test_trusted_proxy_forwarded_address_is_checked_against_the_allowlist(
    tmp_path: Path,
) -> None:
    env = {
        "LEDGER_DATABASE_URL": f"sqlite:///{tmp_path}/wallet.db",
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_ALLOWED_IPS": "203.0.113.0/24",
        "LEDGER_TRUSTED_PROXIES": "127.0.0.1",
    }
    body = dumps(place(entry(1, amount=Decimal("0"), rake=Decimal("0"))))
    with run_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as http:
        allowed = http.post(
            "/bets", content=body, headers=headers(PLACE, **{"X-Forwarded-For": "203.0.113.5"})
        )
        assert allowed.status_code == 200, allowed.text
        refused = http.post(
            "/bets", content=body, headers=headers(PLACE, **{"X-Forwarded-For": "192.0.2.1"})
        )
        assert refused.status_code == 403
        assert refused.json()["error"] == "auth.ip_forbidden"


def test_concurrent_identical_deliveries_debit_once(tmp_path: Path, store_url: str) -> None:
    env = {
        "LEDGER_DATABASE_URL": store_url,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
    }
    body = place(entry(2001, pool=601), entry(2002, pool=601))
    with run_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as http:
        platform = Platform(http)
        platform.deposit("u1", "50.00")
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(
                pool.map(lambda _: platform.deliver("/bets", PLACE, body).status_code, range(16))
            )
        assert statuses == [200] * 16
        assert platform.balance("u1") == ("28.00", "22.00")
        results = settle(601, (2001, "7.00"), (2002, "0.00"))
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(
                pool.map(
                    lambda _: platform.deliver("/winners", SETTLE, results).status_code, range(16)
                )
            )
        assert statuses == [200] * 16
        assert platform.balance("u1") == ("35.00", "0.00")
