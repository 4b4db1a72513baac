"""What reaches the audit log from the console and /admin: refusals (a bad CSRF token) and every
call with the operator token that changes something or exports a list; all bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.http.logs import fingerprint
from ledger.operators import Operators
from support.console import PASSWORD, ROLES, csrf_of, sign_in
from support.httpkit import OPERATOR, OPERATOR_HEADERS, serve


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as found:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            staff = Operators(book.store)
            for name, role in ROLES.items():
                staff.add(name, role, PASSWORD)
        yield found


def audit(client: TestClient[Any]) -> list[dict[str, Any]]:
    answer = client.get("/admin/audit", params={"limit": 100}, headers=OPERATOR_HEADERS)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["audit"])


def test_a_post_refused_for_its_csrf_token_is_audited(client: TestClient[Any]) -> None:
    assert sign_in(client, "vic").status_code == 303
    answer = client.post("/console/check", data={"csrf": "forged"})
    assert answer.status_code == 403
    entry = audit(client)[0]
    assert (entry["operator"], entry["action"], entry["target"], entry["outcome"]) == (
        "vic",
        "csrf_refused",
        "/console/check",
        "csrf.invalid",
    )


def test_a_viewers_refused_deposit_is_audited_with_its_fields_cut(
    client: TestClient[Any],
) -> None:
    assert sign_in(client, "vic").status_code == 303
    csrf = csrf_of(client.get("/console/overview").text)
    form = {"csrf": csrf, "kind": "deposit", "uid": "u1", "currency": "EUR", "amount": "5"}
    answer = client.post("/console/users/movements", data={**form, "reference": "r" * 7000})
    assert answer.status_code == 403
    entry = audit(client)[0]
    assert entry["outcome"] == "operator.forbidden"
    assert entry["detail"]["reference"] == "r" * ledger.operators.AUDIT_TEXT


def test_every_operator_token_call_that_changes_or_exports_is_audited(
    client: TestClient[Any],
) -> None:
    deposit = {"user": "u1", "currency": "EUR", "amount": "5.00", "reference": "d1"}
    assert client.post("/admin/deposits", json=deposit, headers=OPERATOR_HEADERS).status_code == 200
    over = {**deposit, "amount": "50.00", "reference": "w1"}
    refused = client.post("/admin/withdrawals", json=over, headers=OPERATOR_HEADERS)
    assert refused.status_code == 402
    assert client.get("/admin/users?format=csv", headers=OPERATOR_HEADERS).status_code == 200
    assert client.get("/admin/users/u1/balances", headers=OPERATOR_HEADERS).status_code == 200
    # Without the token: logged, not audited (anyone could write it).
    assert client.post("/admin/deposits", json=deposit).status_code == 401
    entries = audit(client)
    who = f"token:{fingerprint(OPERATOR)}"
    assert [(e["operator"], e["action"], e["target"], e["outcome"]) for e in entries] == [
        (who, "export", "/admin/users", "ok"),
        (who, "withdrawal", "u1", "user.insufficient_funds"),
        (who, "deposit", "u1", "ok"),
    ]
    assert entries[2]["detail"]["amount"] == "5.00"
    assert entries[2]["detail"]["reference"] == "d1"
