"""Every CSV export writes text a spreadsheet would run as a formula as text (OWASP's rule),
and every amount, negative ones included, exactly as the ledger rendered it."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.csv_safe import neutralise
from ledger.operators import Operators
from ledger.paging import csv_lines
from support.console import PASSWORD, sign_in
from support.httpkit import OPERATOR_HEADERS, Wallet, serve

HOSTILE = '=HYPERLINK("x","y")'


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as found:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            Operators(book.store).add("ada", "admin", PASSWORD)
        wallet = Wallet(found)
        wallet.deposit(HOSTILE, "10.00", ref="@SUM(A1:A9)")
        answer = found.post(
            "/admin/withdrawals",
            json={"user": HOSTILE, "currency": "EUR", "amount": "5.00", "reference": "+cmd"},
            headers=OPERATOR_HEADERS,
        )
        assert answer.status_code == 200, answer.text
        yield found


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_text_cells_that_a_spreadsheet_would_run_are_written_as_text_and_numbers_stay() -> None:
    assert neutralise("=1+2") == "'=1+2"
    assert neutralise("@SUM(A1)") == "'@SUM(A1)"
    assert neutralise("+cmd") == "'+cmd"
    assert neutralise("-2+3") == "'-2+3"
    assert neutralise("\tx") == "'\tx"
    assert neutralise("\rx") == "'\rx"
    assert [neutralise(v) for v in ("-5.00", "+3", "-0.5", 12, "plain")] == [
        "-5.00",
        "+3",
        "-0.5",
        12,
        "plain",
    ]
    lines = "".join(csv_lines([{"a": "=x", "b": "-5.00"}], ["a", "b"]))
    assert lines.splitlines() == ["a,b", "'=x,-5.00"]


def test_every_csv_export_neutralises_formulas_and_keeps_negative_amounts(
    client: TestClient[Any],
) -> None:
    assert sign_in(client, "ada").status_code == 303
    uid = quote(HOSTILE, safe="")
    # A failed sign-in under a hostile name, for the audit log's export.
    client.cookies.clear()
    sign_in(client, "=2+5")
    assert sign_in(client, "ada").status_code == 303
    exports = [
        f"/console/statement.csv?uid={uid}",
        "/console/users.csv",
        "/console/audit.csv",
        f"/admin/users/{uid}/statement?format=csv",
        "/admin/users?format=csv",
        "/admin/audit?format=csv",
    ]
    seen: set[str] = set()
    for path in exports:
        answer = client.get(path, headers=OPERATOR_HEADERS)
        assert answer.status_code == 200, (path, answer.text)
        found = cells(answer.text)
        seen.update(found)
        risky = [
            cell
            for cell in found
            if cell.startswith(("=", "+", "-", "@", "\t", "\r")) and neutralise(cell) != cell
        ]
        assert risky == [], path
    assert "'=2+5" in seen  # the name tried at the failed sign-in
    assert "'@SUM(A1:A9)" in seen
    assert "-5.00" in seen  # the withdrawal's amount, a number still


def test_every_csv_export_names_its_charset_once(client: TestClient[Any]) -> None:
    assert sign_in(client, "ada").status_code == 303
    uid = quote(HOSTILE, safe="")
    console = ["users", "bets", "tournaments", "holds", "deliveries", "audit"]
    admin = ["holds", "deliveries", "tournaments", "users", "bets", "audit"]
    exports = [f"/console/{name}.csv" for name in console]
    exports += [f"/console/statement.csv?uid={uid}", f"/admin/users/{uid}/statement?format=csv"]
    exports += [f"/admin/{name}?format=csv" for name in admin]
    found = {}
    for path in exports:
        answer = client.get(path, headers=OPERATOR_HEADERS)
        assert answer.status_code == 200, (path, answer.text)
        found[path] = answer.headers["content-type"]
    assert found == dict.fromkeys(exports, "text/csv; charset=utf-8")
