"""The operator API calls the reliability tests make: deposits, balances, and a snapshot of the
journal's counts and every balance."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

import httpx

from support.httpkit import (
    OPERATOR,
)

OPERATOR_AUTH = {"Authorization": f"Bearer {OPERATOR}"}


@dataclass(frozen=True)
class Snapshot:
    """What the ledger holds, as the operator API shows it: journal counts and balances."""

    counts: tuple[int, int, int, int]
    balances: tuple[tuple[str, str], ...]


def snapshot(http: httpx.Client, users: list[str]) -> Snapshot:
    check = http.get("/admin/check", headers=OPERATOR_AUTH)
    assert check.status_code == 200, check.text
    body = check.json()
    assert body["ok"] is True, body
    balances = []
    for user in users:
        found = http.get(f"/admin/users/{user}/balances", headers=OPERATOR_AUTH)
        if found.status_code == 404 and found.json()["error"] == "user.not_found":
            # Still unknown counts too: a refused request must not even record the user.
            balances.append((user, "unknown"))
            continue
        assert found.status_code == 200, found.text
        balances.append((user, json.dumps(found.json()["balances"], sort_keys=True)))
    counts = (body["transactions"], body["postings"], body["accounts"], body["bets"])
    return Snapshot(counts, tuple(balances))


def deposit(http: httpx.Client, user: str, amount: str, currency: str = "EUR") -> None:
    body = {"user": user, "currency": currency, "amount": amount, "reference": f"dep-{user}"}
    response = http.post("/admin/deposits", json=body, headers=OPERATOR_AUTH)
    assert response.status_code == 200, response.text


def balances_of(http: httpx.Client, user: str, currency: str = "EUR") -> tuple[Decimal, Decimal]:
    response = http.get(f"/admin/users/{user}/balances", headers=OPERATOR_AUTH)
    if response.status_code == 404 and response.json()["error"] == "user.not_found":
        return Decimal(0), Decimal(0)  # a user the ledger never saw holds nothing
    assert response.status_code == 200, response.text
    for item in response.json()["balances"]:
        if item["currency"] == currency:
            return Decimal(item["available"]), Decimal(item["held"])
    return Decimal(0), Decimal(0)
