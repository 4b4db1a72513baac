"""A player's limits and exclusions changed from the console's user page: a cashier sets,
removes and cancels limits and excludes; only an admin ends an exclusion early; every form
answers with the page as it is after the change, or the refusal beside the form; audited."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.operators import Operators
from support.console import PASSWORD, ROLES, csrf_of, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, serve

HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path, store_url: str) -> Iterator[TestClient[Any]]:
    with serve(tmp_path, database_url=store_url) as found:
        with ledger.open_ledger(store_url) as book:
            staff = Operators(book.store)
            for name, role in ROLES.items():
                staff.add(name, role, PASSWORD)
        Wallet(found).deposit("u1", "100.00")
        yield found


def signed_in(client: TestClient[Any], name: str) -> str:
    assert sign_in(client, name).status_code == 303
    return csrf_of(client.get("/console/users", params={"uid": "u1"}).text)


def limit(client: TestClient[Any], csrf: str, **fields: str) -> Any:
    form = {"csrf": csrf, "uid": "u1", "currency": "EUR", "kind": "stake", "period": "day"}
    return client.post("/console/users/limits", data={**form, **fields}, headers=HTMX)


def exclusion(client: TestClient[Any], csrf: str, **fields: str) -> Any:
    return client.post(
        "/console/users/exclusions", data={"csrf": csrf, "uid": "u1", **fields}, headers=HTMX
    )


def limits_of(client: TestClient[Any]) -> list[dict[str, Any]]:
    answer = client.get("/admin/users/u1/limits", headers=OPERATOR_HEADERS)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["limits"]
    return found


def audited(client: TestClient[Any], action: str) -> list[dict[str, Any]]:
    answer = client.get("/admin/audit", params={"limit": 100}, headers=OPERATOR_HEADERS)
    entries = answer.json()["audit"]
    return [entry for entry in entries if entry["action"] == action]


def test_a_cashier_sets_a_first_limit_and_the_page_shows_it_in_force(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    answer = limit(client, csrf, action="set", amount="20.00")
    assert answer.status_code == 200, answer.text
    assert "The stake limit per day in EUR is in force now." in answer.text
    assert re.search(r"stake per day</td><td class=\"num\">20.00</td>", answer.text)
    assert [(item["kind"], item["amount"]) for item in limits_of(client)] == [("stake", "20.00")]
    entry = audited(client, "limit")[0]
    assert (entry["operator"], entry["target"], entry["outcome"]) == ("cal", "u1", "ok")


def test_a_raise_from_the_console_waits_the_cooling_off_and_shows_as_pending(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    limit(client, csrf, action="set", amount="20.00")
    answer = limit(client, csrf, action="set", amount="50.00")
    assert answer.status_code == 200
    assert "(cooling-off)" in answer.text
    (found,) = limits_of(client)
    assert (found["amount"], found["pending"]["amount"]) == ("20.00", "50.00")
    cancelled = limit(client, csrf, action="cancel")
    assert "Pending change of the stake limit per day in EUR cancelled." in cancelled.text
    assert limits_of(client)[0]["pending"] is None


def test_bad_limit_input_is_refused_beside_the_form_and_changes_nothing(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    answer = limit(client, csrf, action="set", amount="")
    assert answer.status_code == 400
    assert answer.headers["hx-retarget"] == "#limits-result"
    wrong = limit(client, csrf, action="set", amount="5", kind="fun")
    assert wrong.status_code == 400
    assert limits_of(client) == []
    assert sorted(entry["outcome"] for entry in audited(client, "limit")) == [
        "amount.invalid",
        "request.invalid",
    ]


def test_a_cashier_excludes_a_player_but_only_an_admin_ends_it_early_with_a_reason(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    answer = exclusion(client, csrf, action="exclude", until="2099-01-01 00:00", reason="asked")
    assert answer.status_code == 200, answer.text
    assert "Exclusion recorded" in answer.text
    refused = exclusion(client, csrf, action="lift", reason="mistake")
    assert refused.status_code == 403
    assert "operator.forbidden" in refused.text
    client.post("/console/sign-out", data={"csrf": csrf})
    admin = signed_in(client, "ada")
    assert 'value="lift"' in client.get("/console/users", params={"uid": "u1"}).text
    without = exclusion(client, admin, action="lift", reason="")
    assert without.status_code == 400
    lifted = exclusion(client, admin, action="lift", reason="entered by mistake")
    assert lifted.status_code == 200
    assert "Exclusions ended early: 1." in lifted.text
    outcomes = [
        (entry["operator"], entry["outcome"]) for entry in audited(client, "lift_exclusion")
    ]
    assert sorted(outcomes) == [
        ("ada", "ok"),
        ("ada", "request.invalid"),
        ("cal", "operator.forbidden"),
    ]


def test_a_viewer_sees_the_limits_without_the_forms_and_cannot_post_them(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "vic")
    page = client.get("/console/users", params={"uid": "u1"}).text
    assert 'id="limits"' in page
    assert 'id="limit-form"' not in page
    assert 'id="exclusion-form"' not in page
    assert limit(client, csrf, action="set", amount="20.00").status_code == 403
    assert exclusion(client, csrf, action="exclude", reason="x").status_code == 403
    assert limits_of(client) == []
