"""The operator API of responsible-gambling limits and exclusions: every route, its refusals,
the callbacks and deposits it refuses (403 with the limit's key), the audit log and /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.operators import Operators
from support import payloads as P
from support.console import PASSWORD, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, serve


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as found:
        yield found


def put_limit(client: TestClient[Any], uid: str, **body: Any) -> Any:
    return client.put(f"/admin/users/{uid}/limits", json=body, headers=OPERATOR_HEADERS)


def test_a_first_limit_applies_at_once_and_an_increase_answers_its_effective_at(
    client: TestClient[Any],
) -> None:
    first = put_limit(client, "u1", currency="EUR", kind="stake", period="day", amount="20.00")
    assert first.status_code == 200, first.text
    assert first.json()["amount"] == "20.00"
    assert first.json()["effective_at"] is None
    raised = put_limit(client, "u1", currency="EUR", kind="stake", period="day", amount="50.00")
    answer = raised.json()
    assert answer["amount"] == "20.00"
    assert answer["pending"]["amount"] == "50.00"
    assert answer["effective_at"] == answer["pending"]["effective_at"]
    shown = client.get("/admin/users/u1/limits", headers=OPERATOR_HEADERS).json()
    [limit] = shown["limits"]
    assert (limit["kind"], limit["period"], limit["used"], limit["room"]) == (
        "stake",
        "day",
        "0.00",
        "20.00",
    )


def test_a_place_bet_past_the_stake_limit_answers_403_with_its_key_and_metrics_count_it(
    client: TestClient[Any],
) -> None:
    wallet = Wallet(client)
    wallet.deposit("u1", "100.00")
    put_limit(client, "u1", currency="EUR", kind="stake", period="day", amount="15.00")
    assert wallet.place(P.place(P.entry(1))).status_code == 200  # 11.00 with the rake
    refused = wallet.place(P.place(P.entry(2)))
    assert refused.status_code == 403
    assert refused.json()["error"] == "user.stake_limit_reached"
    assert "enough room from" in refused.json()["message"]
    assert wallet.balance("u1") == ("89.00", "11.00")
    metrics = client.get("/metrics").text
    assert 'ledger_limit_refusals_total{kind="stake"} 1.0' in metrics


def test_a_deposit_past_the_deposit_limit_answers_403_and_nothing_moves(
    client: TestClient[Any],
) -> None:
    put_limit(client, "u9", currency="EUR", kind="deposit", period="month", amount="100.00")
    body = {"user": "u9", "currency": "EUR", "amount": "100.01", "reference": "d1"}
    refused = client.post("/admin/deposits", json=body, headers=OPERATOR_HEADERS)
    assert refused.status_code == 403
    assert refused.json()["error"] == "user.deposit_limit_reached"
    assert Wallet(client).balance("u9") == ("0.00", "0.00")
    assert 'ledger_limit_refusals_total{kind="deposit"} 1.0' in client.get("/metrics").text


def test_removing_a_limit_waits_for_the_cooling_off(client: TestClient[Any]) -> None:
    put_limit(client, "u1", currency="EUR", kind="loss", period="week", amount="30.00")
    removed = client.delete(
        "/admin/users/u1/limits/loss/week", params={"currency": "EUR"}, headers=OPERATOR_HEADERS
    )
    assert removed.status_code == 200, removed.text
    answer = removed.json()
    assert answer["amount"] == "30.00"
    assert answer["pending"]["amount"] is None
    assert answer["effective_at"] is not None


def test_an_excluded_user_is_refused_at_place_bet_and_deposit_and_listed(
    client: TestClient[Any],
) -> None:
    wallet = Wallet(client)
    wallet.deposit("u1", "100.00")
    excluded = client.post(
        "/admin/users/u1/exclusions",
        json={"until": None, "reason": "self-exclusion", "by": "user"},
        headers=OPERATOR_HEADERS,
    )
    assert excluded.status_code == 200, excluded.text
    assert excluded.json()["until"] is None
    refused = wallet.place(P.place(P.entry(1)))
    assert refused.status_code == 403
    assert refused.json()["error"] == "user.excluded"
    body = {"user": "u1", "currency": "EUR", "amount": "1.00", "reference": "d2"}
    deposit = client.post("/admin/deposits", json=body, headers=OPERATOR_HEADERS)
    assert deposit.json()["error"] == "user.excluded"
    withdrawal = client.post(
        "/admin/withdrawals", json={**body, "reference": "w1"}, headers=OPERATOR_HEADERS
    )
    assert withdrawal.status_code == 200
    listed = client.get("/admin/users/u1/exclusions", headers=OPERATOR_HEADERS).json()
    [item] = listed["exclusions"]
    assert (item["active"], item["by"], item["reason"]) == (True, "user", "self-exclusion")


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ({"currency": "EUR", "kind": "spend", "period": "day", "amount": "1"}, "request.invalid"),
        ({"currency": "EUR", "kind": "stake", "period": "year", "amount": "1"}, "request.invalid"),
        ({"currency": "EUR", "kind": "stake", "period": "day", "amount": "-1"}, "amount.invalid"),
        ({"currency": "EUR", "kind": "stake", "period": "day"}, "request.invalid"),
        ({"kind": "stake", "period": "day", "amount": "1"}, "request.invalid"),
    ],
)
def test_a_bad_limit_is_refused_with_400_and_nothing_set(
    client: TestClient[Any], body: dict[str, Any], key: str
) -> None:
    answer = put_limit(client, "u1", **body)
    assert answer.status_code == 400
    assert answer.json()["error"] == key
    assert client.get("/admin/users/u1/limits", headers=OPERATOR_HEADERS).json()["limits"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"until": "not a time", "reason": "x"},
        {"until": "2000-01-01T00:00:00Z", "reason": "in the past"},
        {"until": None},
        {"reason": "no until"},
    ],
)
def test_a_bad_exclusion_is_refused_with_400(client: TestClient[Any], body: dict[str, Any]) -> None:
    answer = client.post("/admin/users/u1/exclusions", json=body, headers=OPERATOR_HEADERS)
    assert answer.status_code == 400
    assert answer.json()["error"] == "request.invalid"


def test_limit_routes_need_the_operator_token(client: TestClient[Any]) -> None:
    assert client.get("/admin/users/u1/limits").status_code == 401
    body = {"currency": "EUR", "kind": "stake", "period": "day", "amount": "1"}
    assert client.put("/admin/users/u1/limits", json=body).status_code == 401


def test_limit_changes_and_exclusions_are_audited_with_who_asked(client: TestClient[Any]) -> None:
    put_limit(client, "u1", currency="EUR", kind="stake", period="day", amount="5", by="user")
    client.post(
        "/admin/users/u1/exclusions",
        json={"until": None, "reason": "self-exclusion", "by": "user"},
        headers=OPERATOR_HEADERS,
    )
    entries = client.get("/admin/audit", headers=OPERATOR_HEADERS).json()["audit"]
    found = [(e["action"], e["target"], e["outcome"], e["detail"].get("by")) for e in entries]
    assert found[:2] == [("exclude", "u1", "ok", "user"), ("limit", "u1", "ok", "user")]
    assert entries[1]["detail"]["kind"] == "stake"
    assert Decimal(entries[1]["detail"]["amount"]) == 5


def test_a_refusal_decided_in_the_writer_process_answers_403_with_its_key(
    tmp_path: Path,
) -> None:
    with serve(tmp_path, writer_process=True) as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        put_limit(client, "u1", currency="EUR", kind="loss", period="week", amount="5.00")
        refused = wallet.place(P.place(P.entry(1)))
        assert refused.status_code == 403
        assert refused.json()["error"] == "user.loss_limit_reached"
        assert wallet.balance("u1") == ("100.00", "0.00")


def test_an_exclusion_is_lifted_only_through_its_own_route_with_a_reason(
    client: TestClient[Any],
) -> None:
    client.post(
        "/admin/users/u1/exclusions",
        json={"until": None, "reason": "self-exclusion"},
        headers=OPERATOR_HEADERS,
    )
    unreasoned = client.post(
        "/admin/users/u1/exclusions/lift", json={"by": "alice"}, headers=OPERATOR_HEADERS
    )
    assert unreasoned.status_code == 400
    lifted = client.post(
        "/admin/users/u1/exclusions/lift",
        json={"reason": "entered in error", "by": "alice"},
        headers=OPERATOR_HEADERS,
    )
    assert lifted.json() == {"user": "u1", "ended": 1}
    entries = client.get("/admin/audit", headers=OPERATOR_HEADERS).json()["audit"]
    assert (entries[0]["action"], entries[0]["detail"]["reason"]) == (
        "lift_exclusion",
        "entered in error",
    )


def test_the_console_user_page_shows_the_limits_and_exclusions(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            Operators(book.store).add("vic", "viewer", PASSWORD)
        Wallet(client).deposit("u1", "10.00")
        put_limit(client, "u1", currency="EUR", kind="stake", period="week", amount="12.50")
        client.post(
            "/admin/users/u1/exclusions",
            json={"until": None, "reason": "self-exclusion"},
            headers=OPERATOR_HEADERS,
        )
        assert sign_in(client, "vic").status_code == 303
        page = client.get("/console/users?uid=u1").text
        assert "stake per week" in page
        assert "12.50" in page
        assert "self-exclusion" in page
