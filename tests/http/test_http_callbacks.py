"""The four callbacks over HTTP (contract 4.1, 7; DESIGN sections 5 and 6), on a test client."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ledger.http import callbacks
from support.httpkit import (
    OPERATOR,
    PLACE,
    REFUND_BET,
    REFUND_TOURNAMENT,
    SETTLE,
    Wallet,
    dumps,
    headers,
    serve,
)
from support.payloads import entry, participant, place, pool_of, pools, refund, settle


@pytest.fixture
def wallet(tmp_path: Path) -> Iterator[Wallet]:
    with serve(tmp_path) as client:
        yield Wallet(client)


def error_of(response: Any) -> str:
    body = response.json()
    assert set(body) >= {"error", "message"}, body
    return str(body["error"])


# --- Place Bet --------------------------------------------------------------------------------


def test_paid_bet_holds_amount_plus_rake_and_returns_secrets(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    response = wallet.place(place(entry(1)))
    assert response.status_code == 200
    body = response.json()
    assert "error" not in body
    assert isinstance(body["secrets"], dict)
    assert body["secrets"]
    assert wallet.balance("u1") == ("89.00", "11.00")


def test_place_bet_secrets_are_stored_on_the_bet(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    secrets = wallet.place(place(entry(1))).json()["secrets"]
    view = wallet.client.get("/admin/bets/1", headers={"Authorization": "Bearer " + OPERATOR})
    assert view.json()["secrets"] == secrets


def test_resent_place_bet_debits_once_and_answers_the_same_secrets(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    first = wallet.place(place(entry(1)))
    again = wallet.place(place(entry(1)))
    assert again.status_code == 200
    assert again.json()["secrets"] == first.json()["secrets"]
    assert wallet.balance("u1") == ("89.00", "11.00")


def test_unfunded_user_gets_402_insufficient_funds(wallet: Wallet) -> None:
    response = wallet.place(place(entry(1, user="broke")))
    assert response.status_code == 402
    assert error_of(response) == "user.insufficient_funds"


def test_place_bet_with_many_entries_is_all_or_nothing(wallet: Wallet) -> None:
    wallet.deposit("u1", "15.00")
    response = wallet.place(place(entry(1), entry(2)))  # 11.00 + 11.00 > 15.00
    assert response.status_code == 402
    assert wallet.balance("u1") == ("15.00", "0.00")
    missing = wallet.client.get("/admin/bets/1", headers={"Authorization": "Bearer " + OPERATOR})
    assert missing.status_code == 404


def test_place_bet_with_many_entries_holds_each(wallet: Wallet) -> None:
    wallet.deposit("u1", "30.00")
    response = wallet.place(place(entry(1), entry(2, pool=8)))
    assert response.status_code == 200
    assert wallet.balance("u1") == ("8.00", "22.00")


def test_free_to_play_entry_succeeds_without_debit_for_an_unfunded_user(wallet: Wallet) -> None:
    body = place(entry(5, user="free", amount=Decimal("0.0"), rake=Decimal("0.0")))
    response = wallet.place(body)
    assert response.status_code == 200
    assert wallet.balance("free") == ("0.00", "0.00")


def test_ticket_entry_is_funded_by_the_house_not_the_user(wallet: Wallet) -> None:
    response = wallet.place(place(entry(6, user="t", ticket="eyJ.ticket.jwt")))
    assert response.status_code == 200
    assert wallet.balance("t") == ("0.00", "11.00")


def test_user_role_token_may_place_bets(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    assert wallet.place(place(entry(1)), role="user").status_code == 200


def test_resent_place_bet_with_other_amount_is_409_conflict(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1)))
    response = wallet.place(place(entry(1, amount=Decimal("12.00"))))
    assert response.status_code == 409
    assert error_of(response) == "bet.conflict"


def test_unknown_fields_are_ignored_at_every_level(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    item = entry(1)
    item["extra"] = {"nested": [1, 2]}
    item["user"]["vip"] = True
    item["pool"]["tags"] = [{"x": 1}]
    item["bet"]["odds"] = Decimal("1.5")
    body = {"bets": [item], "meta": {"v": 2}}
    assert wallet.place(body).status_code == 200


def test_decimal_strings_and_numbers_are_exact(wallet: Wallet) -> None:
    wallet.deposit("u1", "0.30")
    body = place(entry(1, amount="0.1", rake=Decimal("0.2")))  # 0.1 + 0.2 == 0.30 exactly
    assert wallet.place(body).status_code == 200
    assert wallet.balance("u1") == ("0.00", "0.30")


def test_amount_finer_than_the_currency_is_400_not_rounded(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    response = wallet.place(place(entry(1, amount=Decimal("10.001"))))
    assert response.status_code == 400
    assert error_of(response) == "amount.invalid"
    assert wallet.balance("u1") == ("100.00", "0.00")


def test_negative_amount_is_400(wallet: Wallet) -> None:
    response = wallet.place(place(entry(1, amount=Decimal("-1"))))
    assert response.status_code == 400


@pytest.mark.parametrize("number", [Decimal("-1.7976931348623157E+308"), Decimal("-5"), -5])
def test_a_refund_or_settle_echoing_a_negative_number_is_400_and_closes_nothing(
    wallet: Wallet, number: Decimal | int
) -> None:
    # A refund's and a settle's own amounts are echoes the ledger never uses (it reverses what
    # it recorded), but a negative one breaks the published schema like any other amount.
    wallet.deposit("u1", "100.00")
    assert wallet.place(place(entry(1, pool=7), entry(2, pool=7))).status_code == 200
    echoed = pool_of(7, [participant(1, amount=number, rake="0")], status="cancelled")
    paid = pool_of(7, [participant(2, payout=number, rank=1)], status="closed")
    for response in (wallet.refund(pools(echoed)), wallet.settle(pools(paid))):
        assert response.status_code == 400
        assert error_of(response) == "amount.invalid"
        assert "is negative" in response.json()["message"]
    assert wallet.balance("u1") == ("78.00", "22.00")


HUGE = "1." + "0" * 300_000

HUGE_CALLBACKS = {
    "place amount number": ("/bets", PLACE, place(entry(1, amount=Decimal(HUGE)))),
    "place rake string": ("/bets", PLACE, place(entry(1, rake=HUGE))),
    "settle payout string": ("/winners", SETTLE, settle(7, (1, HUGE))),
}


@pytest.mark.parametrize(
    ("path", "event", "body"), HUGE_CALLBACKS.values(), ids=HUGE_CALLBACKS.keys()
)
def test_an_amount_of_300000_digits_is_a_short_400_by_the_length_rule(
    wallet: Wallet, path: str, event: str, body: Any
) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1)))
    response = wallet.post(path, body, event)
    assert response.status_code == 400
    assert error_of(response) == "amount.invalid"
    assert "longer than 40 characters" in response.json()["message"]
    assert len(response.content) < 200  # the 300 KB are not echoed back


@pytest.mark.parametrize("amount", ["1_000", "\uff11\uff10", "\u0661\u0660", " 5 ", "5e0"])
def test_an_amount_string_that_is_not_a_plain_decimal_is_400(wallet: Wallet, amount: str) -> None:
    wallet.deposit("u1", "2000.00")
    response = wallet.place(place(entry(1, amount=amount)))
    assert response.status_code == 400
    assert error_of(response) == "amount.invalid"
    assert wallet.balance("u1") == ("2000.00", "0.00")


def test_a_json_number_with_an_exponent_is_still_an_amount(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    assert wallet.place(place(entry(1, amount=Decimal("1.5E+1")))).status_code == 200
    assert wallet.balance("u1") == ("84.00", "16.00")


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b"[]",
        b'{"bets": []}',
        b'{"bets": [{"user": {"uid": "u1"}}]}',
        b'{"bets": [{"user": {"uid": 5}, "pool": {"uid": 1}, '
        b'"bet": {"uid": 1, "amount": 1, "currency": "EUR"}}]}',
        b'{"bets": [{"user": {"uid": "u"}, "pool": {"uid": "x"}, '
        b'"bet": {"uid": 1, "amount": 1, "currency": "EUR"}}]}',
        b'{"bets": [{"user": {"uid": "u"}, "pool": {"uid": 1}, '
        b'"bet": {"uid": 1, "amount": NaN, "currency": "EUR"}}]}',
        b'{"bets": 1, "bets": 2}',
        b"\xff\xfe",
        b'{"bets": [{"user": {"uid": "u"}, "pool": {"uid": 1}, '
        b'"bet": {"uid": 99999999999999999999999, "amount": 1, "currency": "EUR"}}]}',
    ],
    ids=[
        "malformed",
        "empty",
        "array",
        "no-entries",
        "missing-fields",
        "uid-wrong-type",
        "pool-wrong-type",
        "nan",
        "duplicate-key",
        "not-utf8",
        "uid-out-of-range",
    ],
)
def test_bad_input_is_400_never_5xx(wallet: Wallet, raw: bytes) -> None:
    response = wallet.client.post("/bets", content=raw, headers=headers(PLACE))
    assert response.status_code == 400, response.text
    assert error_of(response).startswith(("request.", "amount."))


# --- X-Callback-Event ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "event"),
    [
        ("/bets", SETTLE),
        ("/bets", REFUND_BET),
        ("/bets/cancel", PLACE),
        ("/bets/cancel", SETTLE),
        ("/winners", REFUND_TOURNAMENT),
        ("/winners", "something:else"),
    ],
)
def test_event_header_that_does_not_match_the_path_is_400(
    wallet: Wallet, path: str, event: str
) -> None:
    response = wallet.client.post(path, content=b"{}", headers=headers(event))
    assert response.status_code == 400
    assert error_of(response) == "request.wrong_event"


def test_missing_event_header_is_accepted(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    assert wallet.post("/bets", place(entry(1)), event=None).status_code == 200


def test_refund_tournament_event_is_accepted_on_bets_cancel(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    assert wallet.refund(refund(7, 1), event=REFUND_TOURNAMENT).status_code == 200
    assert wallet.balance("u1") == ("20.00", "0.00")


def test_separate_refund_tournament_path_when_configured(tmp_path: Path) -> None:
    with serve(tmp_path, refund_tournament_path="/tournaments/cancel") as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "30.00")
        wallet.place(place(entry(1), entry(2)))
        wrong = wallet.post("/tournaments/cancel", refund(7, 1), REFUND_BET)
        assert wrong.status_code == 400
        assert error_of(wrong) == "request.wrong_event"
        done = wallet.post("/tournaments/cancel", refund(7, 1), REFUND_TOURNAMENT)
        assert done.status_code == 200
        # /bets/cancel stays the default and keeps working for both events.
        assert wallet.refund(refund(7, 2), event=REFUND_TOURNAMENT).status_code == 200
        assert wallet.balance("u1") == ("30.00", "0.00")


def test_refund_tournament_path_is_absent_unless_configured(wallet: Wallet) -> None:
    response = wallet.post("/tournaments/cancel", refund(7, 1), REFUND_TOURNAMENT)
    assert response.status_code in (404, 405)


# --- Refund -------------------------------------------------------------------------------------


def test_refund_credits_amount_plus_rake_once(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1)))
    first = wallet.refund(refund(7, 1))
    assert first.status_code == 200
    assert "error" not in first.json()
    assert wallet.balance("u1") == ("100.00", "0.00")
    again = wallet.refund(refund(7, 1))
    assert again.status_code == 200
    assert wallet.balance("u1") == ("100.00", "0.00")


def test_refund_of_unknown_bet_is_404_and_refunds_nothing(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1)))
    response = wallet.refund(refund(7, 1, 999))
    assert response.status_code == 404
    assert error_of(response) == "bet.not_found"
    assert wallet.balance("u1") == ("89.00", "11.00")


def test_refund_of_settled_bet_is_409(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1)))
    wallet.settle(settle(7, (1, "0.00")))
    response = wallet.refund(refund(7, 1))
    assert response.status_code == 409
    assert error_of(response) == "bet.already_settled"


def test_refund_over_several_pools_in_one_request(wallet: Wallet) -> None:
    wallet.deposit("u1", "100.00")
    wallet.place(place(entry(1), entry(2, pool=8)))
    body = pools(
        pool_of(7, [participant(1)], status="cancelled"),
        pool_of(8, [participant(2)], status="waiting"),
    )
    response = wallet.refund(body)
    assert response.status_code == 200
    assert response.json() == {"closed": 2, "unchanged": 0}
    assert wallet.balance("u1") == ("100.00", "0.00")


# --- Settle -------------------------------------------------------------------------------------


def test_settle_pays_the_winner_and_not_the_zero_payout(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.deposit("u2", "20.00")
    wallet.place(place(entry(1), entry(2, user="u2")))
    response = wallet.settle(settle(7, (1, "25.50"), (2, "0.00", "u2")))
    assert response.status_code == 200
    assert wallet.balance("u1") == ("34.50", "0.00")
    assert wallet.balance("u2") == ("9.00", "0.00")


def test_a_settle_too_large_to_decode_on_the_event_loop_is_answered_like_a_small_one(
    wallet: Wallet,
) -> None:
    uids = range(1, 1201)
    wallet.deposit("u1", "20000.00")
    assert wallet.place(place(*(entry(uid) for uid in uids))).status_code == 200
    body = settle(7, *((uid, "2.00") for uid in uids))
    assert len(json.dumps(body)) > callbacks.OFF_LOOP_BODY
    response = wallet.settle(body)
    assert response.status_code == 200
    assert response.json() == {"closed": 1200, "unchanged": 0}
    assert wallet.balance("u1") == ("9200.00", "0.00")


def test_resent_settle_pays_once(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    wallet.settle(settle(7, (1, "25.50")))
    again = wallet.settle(settle(7, (1, "25.50")))
    assert again.status_code == 200
    assert again.json() == {"closed": 0, "unchanged": 1}
    assert wallet.balance("u1") == ("34.50", "0.00")


def test_settle_with_other_payout_after_settle_is_409(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    wallet.settle(settle(7, (1, "25.50")))
    response = wallet.settle(settle(7, (1, "30.00")))
    assert response.status_code == 409
    assert error_of(response) == "bet.conflict"


def test_settle_of_refunded_bet_is_409(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    wallet.refund(refund(7, 1))
    response = wallet.settle(settle(7, (1, "5.00")))
    assert response.status_code == 409
    assert error_of(response) == "bet.already_refunded"


def test_settle_is_all_or_nothing_when_one_bet_is_unknown(wallet: Wallet) -> None:
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    response = wallet.settle(settle(7, (1, "25.50"), (404, "1.00")))
    assert response.status_code == 404
    assert wallet.balance("u1") == ("9.00", "11.00")


# --- limits and technical failures ------------------------------------------------------------


def test_body_over_the_limit_is_413(tmp_path: Path) -> None:
    with serve(tmp_path, max_body_bytes=2048) as client:
        body = dumps(place(*(entry(uid) for uid in range(1, 40))))
        assert len(body) > 2048
        response = client.post("/bets", content=body, headers=headers(PLACE))
        assert response.status_code == 413
        assert response.json()["error"] == "request.too_large"


def test_default_body_limit_fits_a_million_participant_settle(tmp_path: Path) -> None:
    # One participant of a realistic settle payload is about 300 bytes of JSON.
    one = dumps(settle(7, (123456789, "0.00")))
    with serve(tmp_path) as client:
        limit = client.app.state.runtime.settings.max_body_bytes
    assert limit >= 1_000_000 * len(one)


def test_database_locked_past_its_timeout_is_503_not_4xx(tmp_path: Path) -> None:
    with serve(tmp_path, db_timeout=0.2) as client:
        wallet = Wallet(client)
        wallet.deposit("u1", "20.00")
        blocker = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            response = wallet.place(place(entry(1)))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert response.status_code == 503
        assert error_of(response).startswith("store.")
        # Once the lock is gone, the platform's re-send succeeds.
        assert wallet.place(place(entry(1))).status_code == 200


def test_unreachable_database_is_503_on_every_callback(tmp_path: Path) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:9/nowhere"
    with serve(tmp_path, database_url=url, db_timeout=1.0) as client:
        wallet = Wallet(client)
        for response in (
            wallet.place(place(entry(1))),
            wallet.refund(refund(7, 1)),
            wallet.settle(settle(7, (1, "1.00"))),
        ):
            assert response.status_code == 503
            assert error_of(response) == "store.unavailable"
        # Bad input still gets its 400: validating it never needs the database.
        bad = client.post("/bets", content=b"{", headers=headers(PLACE))
        assert bad.status_code == 400
