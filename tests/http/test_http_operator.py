"""The operator API under /admin: deposits, withdrawals and read-only views of the books."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ledger
from support.httpkit import OPERATOR, OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place, settle


@pytest.fixture
def wallet(tmp_path: Path) -> Iterator[Wallet]:
    with serve(tmp_path) as client:
        yield Wallet(client)


def admin_get(wallet: Wallet, path: str, **params: Any) -> Any:
    return wallet.client.get(path, params=params, headers=OPERATOR_HEADERS)


def admin_post(wallet: Wallet, path: str, raw: bytes) -> Any:
    headers = {**OPERATOR_HEADERS, "Content-Type": "application/json"}
    return wallet.client.post(path, content=raw, headers=headers)


def test_deposit_credits_the_user_and_is_idempotent_by_reference(wallet: Wallet) -> None:
    raw = b'{"user": "u1", "currency": "EUR", "amount": "25.50", "reference": "top-1"}'
    first = admin_post(wallet, "/admin/deposits", raw)
    assert first.status_code == 200
    assert first.json() == {
        "reference": "top-1",
        "user": "u1",
        "currency": "EUR",
        "amount": "25.50",
        "applied": True,
    }
    again = admin_post(wallet, "/admin/deposits", raw)
    assert again.status_code == 200
    assert again.json()["applied"] is False
    assert wallet.balance("u1") == ("25.50", "0.00")


def test_deposit_amount_as_json_number_is_exact(wallet: Wallet) -> None:
    raw = b'{"user": "u1", "currency": "EUR", "amount": 0.1, "reference": "a"}'
    assert admin_post(wallet, "/admin/deposits", raw).status_code == 200
    raw = b'{"user": "u1", "currency": "EUR", "amount": 0.2, "reference": "b"}'
    assert admin_post(wallet, "/admin/deposits", raw).status_code == 200
    assert wallet.balance("u1") == ("0.30", "0.00")


def test_deposit_reference_reused_with_other_amount_is_409(wallet: Wallet) -> None:
    admin_post(
        wallet, "/admin/deposits", b'{"user":"u1","currency":"EUR","amount":1,"reference":"r"}'
    )
    response = admin_post(
        wallet, "/admin/deposits", b'{"user":"u1","currency":"EUR","amount":2,"reference":"r"}'
    )
    assert response.status_code == 409
    assert response.json()["error"] == "reference.conflict"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"user": "u1", "currency": "EUR", "amount": "5"}',
        b'{"user": "u1", "currency": "EUR", "amount": "1.001", "reference": "x"}',
        b'{"user": "u1", "currency": "EUR", "amount": "-5", "reference": "x"}',
        b'{"user": "u1", "currency": "EUR", "amount": true, "reference": "x"}',
        b'{"user": 5, "currency": "EUR", "amount": "5", "reference": "x"}',
        b"[1, 2]",
        b"{oops",
    ],
    ids=["no-reference", "too-fine", "negative", "boolean", "user-not-string", "array", "bad"],
)
def test_bad_deposit_is_400(wallet: Wallet, raw: bytes) -> None:
    response = admin_post(wallet, "/admin/deposits", raw)
    assert response.status_code == 400, response.text
    assert "error" in response.json()


@pytest.mark.parametrize(
    "amount",
    [
        b'"1_000"',
        '"\uff11\uff10"'.encode(),
        '"\u0661\u0660"'.encode(),
        b'" 5 "',
        b'"1e2"',
        b'"1.' + b"0" * 300_000 + b'"',
        b"1." + b"0" * 300_000,
        b"1" + b"0" * 4000,
    ],
    ids=[
        "underscores",
        "fullwidth",
        "arabic-indic",
        "padded",
        "exponent-string",
        "string-of-300000-digits",
        "number-of-300000-digits",
        "integer-of-4001-digits",
    ],
)
@pytest.mark.parametrize("path", ["/admin/deposits", "/admin/withdrawals"])
def test_a_movement_amount_that_is_not_a_bounded_plain_decimal_is_a_short_400(
    wallet: Wallet, path: str, amount: bytes
) -> None:
    wallet.deposit("u1", "10.00", ref="seed")
    raw = b'{"user": "u1", "currency": "EUR", "amount": ' + amount + b', "reference": "x"}'
    response = admin_post(wallet, path, raw)
    assert response.status_code == 400, response.text[:200]
    assert response.json()["error"] == "amount.invalid"
    assert len(response.content) < 300
    assert wallet.balance("u1") == ("10.00", "0.00")


def test_withdrawal_debits_and_refuses_an_overdraft_with_402(wallet: Wallet) -> None:
    wallet.deposit("u1", "10.00")
    ok = admin_post(
        wallet,
        "/admin/withdrawals",
        b'{"user": "u1", "currency": "EUR", "amount": "4.00", "reference": "w1"}',
    )
    assert ok.status_code == 200
    short = admin_post(
        wallet,
        "/admin/withdrawals",
        b'{"user": "u1", "currency": "EUR", "amount": "6.01", "reference": "w2"}',
    )
    assert short.status_code == 402
    assert short.json()["error"] == "user.insufficient_funds"
    assert wallet.balance("u1") == ("6.00", "0.00")


def test_balances_list_available_and_held_per_currency(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.deposit("u1", "5000", currency="JPY")
    wallet.place(place(entry(1)))
    body = admin_get(wallet, "/admin/users/u1/balances").json()
    assert body == {
        "user": "u1",
        "balances": [
            {"currency": "EUR", "available": "9.00", "held": "11.00"},
            {"currency": "JPY", "available": "5000", "held": "0"},
        ],
    }


def test_statement_pages_with_next_before(wallet: Wallet) -> None:
    for number in range(5):
        wallet.deposit("u1", f"{number + 1}.00", ref=f"d{number}")
    first = admin_get(wallet, "/admin/users/u1/statement", limit=2).json()
    assert [line["amount"] for line in first["lines"]] == ["5.00", "4.00"]
    assert first["next_before"] is not None
    second = admin_get(
        wallet, "/admin/users/u1/statement", limit=2, before=first["next_before"]
    ).json()
    assert [line["amount"] for line in second["lines"]] == ["3.00", "2.00"]
    last = admin_get(
        wallet, "/admin/users/u1/statement", limit=2, before=second["next_before"]
    ).json()
    assert [line["amount"] for line in last["lines"]] == ["1.00"]
    assert last["next_before"] is None


def test_statement_filters_by_currency(wallet: Wallet) -> None:
    wallet.deposit("u1", "1.00")
    wallet.deposit("u1", "7", currency="JPY")
    body = admin_get(wallet, "/admin/users/u1/statement", currency="JPY").json()
    assert [(line["currency"], line["amount"]) for line in body["lines"]] == [("JPY", "7")]


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"limit": 0}, "request.invalid"),
        ({"limit": "x"}, "request.invalid"),
        # Neither a line id nor a cursor this API gave.
        ({"before": "y"}, "request.invalid_cursor"),
    ],
)
def test_statement_with_bad_paging_is_400(wallet: Wallet, params: dict[str, Any], key: str) -> None:
    response = admin_get(wallet, "/admin/users/u1/statement", **params)
    assert response.status_code == 400
    assert response.json()["error"] == key


def test_bet_view_shows_state_and_amounts(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    wallet.settle(settle(7, (1, "3.25")))
    body = admin_get(wallet, "/admin/bets/1").json()
    assert body["state"] == "settled"
    assert (body["amount"], body["rake"], body["payout"]) == ("10.00", "1.00", "3.25")


def test_unknown_bet_is_404(wallet: Wallet) -> None:
    response = admin_get(wallet, "/admin/bets/404")
    assert response.status_code == 404
    assert response.json()["error"] == "bet.not_found"


@pytest.mark.parametrize("uid", ["abc", "99999999999999999999999"])
def test_bet_uid_that_is_not_a_64_bit_integer_is_400(wallet: Wallet, uid: str) -> None:
    assert admin_get(wallet, f"/admin/bets/{uid}").status_code == 400
    assert admin_get(wallet, f"/admin/tournaments/{uid}/report").status_code == 400


def test_tournament_report_sums_entries_stakes_rake_payouts_and_open_holds(
    wallet: Wallet,
) -> None:
    wallet.deposit("u1", "50.00")
    wallet.place(place(entry(1), entry(2), entry(3, pool=8)))
    wallet.settle(settle(7, (1, "15.00")))
    body = admin_get(wallet, "/admin/tournaments/7/report").json()
    assert body["pool_uid"] == 7
    (eur,) = body["currencies"]
    assert eur["entries"] == 2
    assert (eur["stakes"], eur["rake"], eur["payouts"], eur["open_holds"]) == (
        "20.00",
        "2.00",
        {"EUR": "15.00"},
        "11.00",
    )


def test_journal_check_is_200_and_ok_on_a_sound_ledger(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    response = admin_get(wallet, "/admin/check")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert body["problems"] == []
    assert body["transactions"] >= 2


def test_journal_check_is_500_with_the_problems_when_the_books_are_broken(
    tmp_path: Path,
) -> None:
    class Broken(ledger.CheckReport):
        pass

    with serve(tmp_path) as client:
        runtime = client.app.state.runtime
        book = runtime.ledger()
        book.check = lambda: Broken(problems=["postings of transaction 1 sum to 5"])
        response = client.get("/admin/check", headers=OPERATOR_HEADERS)
    assert response.status_code == 500
    body = response.json()
    assert body["ok"] is False
    assert body["error"] == "ledger.check_failed"
    assert body["problems"] == ["postings of transaction 1 sum to 5"]


def test_openapi_schema_is_served(wallet: Wallet) -> None:
    response = wallet.client.get("/schema/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in ("/bets", "/bets/cancel", "/winners", "/admin/deposits", "/admin/check"):
        assert path in paths


# --- the operator's log ---------------------------------------------------------------------------

OPERATOR_FINGERPRINT = hashlib.sha256(OPERATOR.encode()).hexdigest()[:8]
FINGERPRINT_OF_WRONG = hashlib.sha256(b"not-the-operator-token").hexdigest()[:8]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
MOVEMENT_KEYS = (
    "method",
    "path",
    "status",
    "error",
    "user",
    "currency",
    "amount",
    "reference",
    "applied",
)


def operator_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "ledger.operator"]


def test_every_operator_request_writes_one_json_line_with_who_what_and_outcome(
    wallet: Wallet, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ledger.operator"):
        deposit = b'{"user": "u1", "currency": "eur", "amount": 25.5, "reference": "top-1"}'
        admin_post(wallet, "/admin/deposits", deposit)
        admin_post(wallet, "/admin/deposits", deposit)
        withdrawal = b'{"user": "u1", "currency": "EUR", "amount": "99", "reference": "out-1"}'
        assert admin_post(wallet, "/admin/withdrawals", withdrawal).status_code == 402
        admin_get(wallet, "/admin/users/u1/statement", currency="EUR", limit=5)
    first, again, refused, read = operator_lines(caplog)
    for line in (first, again, refused, read):
        assert line["msg"] == "operator"
        assert ISO_UTC.match(line["ts"]), line
        assert line["who"] == OPERATOR_FINGERPRINT
        assert "ip" in line
        assert line["duration_ms"] >= 0
    assert {key: first[key] for key in MOVEMENT_KEYS} == {
        "method": "POST",
        "path": "/admin/deposits",
        "status": 200,
        "error": None,
        "user": "u1",
        "currency": "EUR",
        "amount": "25.50",
        "reference": "top-1",
        "applied": True,
    }
    assert (again["status"], again["applied"]) == (200, False)
    assert {key: refused.get(key) for key in MOVEMENT_KEYS} == {
        "method": "POST",
        "path": "/admin/withdrawals",
        "status": 402,
        "error": "user.insufficient_funds",
        "user": "u1",
        "currency": "EUR",
        "amount": "99",
        "reference": "out-1",
        "applied": None,
    }
    assert (read["method"], read["path"], read["status"]) == (
        "GET",
        "/admin/users/u1/statement",
        200,
    )
    assert read["query"] == "currency=EUR&limit=5"


@pytest.mark.parametrize(
    ("authorization", "who", "error"),
    [
        (None, None, "operator.invalid_token"),
        ("Bearer not-the-operator-token", FINGERPRINT_OF_WRONG, "operator.invalid_token"),
        ("Basic b3BlcmF0b3I6c2VjcmV0", None, "operator.invalid_token"),
    ],
)
def test_refused_operator_requests_are_logged_without_the_credential(
    wallet: Wallet,
    caplog: pytest.LogCaptureFixture,
    authorization: str | None,
    who: str | None,
    error: str,
) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    raw = b'{"user": "u1", "currency": "EUR", "amount": "5", "reference": "r"}'
    with caplog.at_level(logging.INFO, logger="ledger.operator"):
        response = wallet.client.post("/admin/deposits", content=raw, headers=headers)
    assert response.status_code == 401
    (line,) = operator_lines(caplog)
    assert (line["status"], line["error"], line["who"]) == (401, error, who)
    assert line["path"] == "/admin/deposits"
    if authorization:
        assert authorization.split()[1] not in caplog.text


def test_operator_api_disabled_is_logged_as_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        serve(tmp_path, operator_token=None) as client,
        caplog.at_level(logging.INFO, logger="ledger.operator"),
    ):
        client.get("/admin/check", headers=OPERATOR_HEADERS)
    (line,) = operator_lines(caplog)
    assert (line["status"], line["error"]) == (403, "operator.disabled")


def test_the_operator_token_never_appears_in_the_log(
    wallet: Wallet, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        wallet.deposit("u1", "10.00")
        admin_get(wallet, "/admin/check")
    assert operator_lines(caplog)
    assert OPERATOR not in caplog.text


def test_hostile_long_fields_are_cut_in_the_operator_log(
    wallet: Wallet, caplog: pytest.LogCaptureFixture
) -> None:
    long_user = "u" * 200_000
    raw = json.dumps(
        {"user": long_user, "currency": "EUR", "amount": "1" * 5000, "reference": "r" * 9000}
    ).encode()
    with caplog.at_level(logging.INFO, logger="ledger.operator"):
        assert admin_post(wallet, "/admin/deposits", raw).status_code == 400
        admin_get(wallet, f"/admin/users/{long_user[:60_000]}/balances")
    lines = operator_lines(caplog)
    assert len(lines) == 2
    assert all(len(record.getMessage()) < 2000 for record in caplog.records)
    assert lines[0]["user"] == "u" * 128 + "..."


LISTS = ["/admin/holds", "/admin/deliveries", "/admin/tournaments", "/admin/users"]
LISTS += ["/admin/bets", "/admin/audit"]


@pytest.mark.parametrize("path", LISTS)
def test_every_list_answers_its_items_under_the_name_of_its_path(wallet: Wallet, path: str) -> None:
    answer = admin_get(wallet, path)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert set(found) == {path.rsplit("/", 1)[1], "next"}
    assert isinstance(found[path.rsplit("/", 1)[1]], list)
