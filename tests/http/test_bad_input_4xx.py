"""Bad input on the console and /admin is a clean 4xx (or a safe answer), never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.http.filenames import attachment
from ledger.operators import Operators
from support.console import PASSWORD, csrf_of, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, serve


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as found:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            Operators(book.store).add("ada", "admin", PASSWORD)
        assert sign_in(found, "ada").status_code == 303
        yield found


def test_the_tournaments_page_filters_by_any_status_text(client: TestClient[Any]) -> None:
    for status in ("x", "500", "finished"):
        answer = client.get("/console/tournaments", params={"status": status})
        assert answer.status_code == 200
        assert f'value="{status}"' in answer.text


def test_a_static_path_with_a_nul_is_not_found(client: TestClient[Any]) -> None:
    answer = client.get("/console/static/%00")
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


@pytest.mark.parametrize("uid", ["ü€x", 'a"b', "a;b\\c"])
def test_a_statement_of_any_uid_downloads_under_a_safe_and_exact_filename(
    client: TestClient[Any], uid: str
) -> None:
    Wallet(client).deposit(uid, "1.00")
    answer = client.get(
        f"/admin/users/{quote(uid, safe='')}/statement",
        params={"format": "csv"},
        headers=OPERATOR_HEADERS,
    )
    assert answer.status_code == 200
    disposition = answer.headers["content-disposition"]
    assert disposition == attachment(f"statement-{uid}.csv")
    fallback = disposition.split('filename="', 1)[1].split('"', 1)[0]
    assert set(fallback) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    assert disposition.endswith("filename*=UTF-8''" + quote(f"statement-{uid}.csv", safe=""))


def test_nul_in_a_movements_user_or_a_request_id_is_no_503_on_any_store(
    tmp_path: Path, store_url: str
) -> None:
    with serve(tmp_path, database_url=store_url) as client:
        with ledger.open_ledger(store_url) as book:
            Operators(book.store).add("cal", "cashier", PASSWORD)
        body = {"user": "u\x00", "currency": "EUR", "amount": "1", "reference": "n1"}
        refused = client.post("/admin/deposits", json=body, headers=OPERATOR_HEADERS)
        assert refused.status_code == 400
        body = {**body, "user": "u1"}
        marked = client.post(
            "/admin/deposits", json=body, headers={**OPERATOR_HEADERS, "x-request-id": "r\x00"}
        )
        assert marked.status_code == 200, marked.text
        events = client.get("/admin/events", headers=OPERATOR_HEADERS).json()["events"]
        assert events[-1]["request_id"] == "r\ufffd"
        # The console: the movement is refused (400) and its audit entry written.
        assert sign_in(client, "cal").status_code == 303
        csrf = csrf_of(client.get("/console/overview").text)
        form = {"csrf": csrf, "kind": "deposit", "currency": "EUR", "amount": "1"}
        answer = client.post(
            "/console/users/movements", data={**form, "uid": "v\x00", "reference": "n2"}
        )
        assert answer.status_code == 400
        entry = client.get("/admin/audit", headers=OPERATOR_HEADERS).json()["audit"][0]
        assert (entry["operator"], entry["target"]) == ("cal", "v\ufffd")


@pytest.mark.parametrize("uid", ["a/b", "/lead", "x%2Fy", "50%", "ü/€"])
def test_a_user_uid_of_any_characters_is_reachable_percent_encoded(
    client: TestClient[Any], uid: str
) -> None:
    Wallet(client).deposit(uid, "1.00")
    path = f"/admin/users/{quote(uid, safe='')}"
    balances = client.get(f"{path}/balances", headers=OPERATOR_HEADERS)
    assert balances.status_code == 200, balances.text
    assert balances.json()["user"] == uid
    statement = client.get(f"{path}/statement", headers=OPERATOR_HEADERS)
    assert statement.status_code == 200
    assert statement.json()["lines"][0]["amount"] == "1.00"
