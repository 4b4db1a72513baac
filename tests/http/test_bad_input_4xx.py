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
from support.console import PASSWORD, sign_in
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
