"""The contract module is the one home of the id, text, user uid and currency code rules, and of
the callbacks' names and the platform's timeouts: the payload types and the ``check_*`` functions
must say the same thing, for every value."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import contract
from ledger.contract import (
    INT64_MAX,
    PlaceBetsRequest,
    check_currency,
    check_id,
    check_text,
    check_user,
    validate,
)
from ledger.errors import InvalidRequest


def place_bet(user: Any = "u1", currency: Any = "EUR", bet_uid: Any = 1) -> dict[str, Any]:
    return {
        "bets": [
            {
                "user": {"uid": user},
                "pool": {"uid": 7},
                "bet": {"uid": bet_uid, "amount": "10.00", "currency": currency},
            }
        ]
    }


def payload_accepts(**fields: Any) -> bool:
    try:
        validate(PlaceBetsRequest, place_bet(**fields))
    except InvalidRequest:
        return False
    return True


def check_accepts(check: Any, value: Any) -> bool:
    try:
        check(value)
    except InvalidRequest:
        return False
    return True


USER_UIDS = [
    "u1",
    "ü-ünïcode",
    "x" * 255,
    "x" * 256,
    "",
    "nul\x00inside",
    "u1:held",
    ":held",
    "u1:held:x",
    "u1:heldx",
    # Python's "$" also matches before a final newline and "." stops at one: the payload type
    # accepted "a\nb:held", whose available account is user "a\nb"'s held account.
    "a\nb:held",
    "u1:held\n",
    "u1\n",
]


@pytest.mark.parametrize("uid", USER_UIDS)
def test_a_user_uid_is_judged_alike_by_the_payload_type_and_check_user(uid: str) -> None:
    assert payload_accepts(user=uid) == check_accepts(check_user, uid)


@pytest.mark.parametrize("uid", ["u1:held", ":held", "a\nb:held", "line\nother\nu:held"])
def test_a_user_uid_ending_in_held_is_refused_on_every_road(uid: str) -> None:
    assert not payload_accepts(user=uid)
    with pytest.raises(InvalidRequest, match="must not end in ':held'"):
        check_user(uid)


FULLWIDTH_EUR = "\uff25\uff35\uff32"
CURRENCIES = ["EUR", "eur", "FUN_COIN", "A" * 16, "A" * 17, "", "E U", "EUR\n", "€", FULLWIDTH_EUR]


@pytest.mark.parametrize("code", CURRENCIES)
def test_a_currency_code_is_judged_alike_by_the_payload_type_and_check_currency(code: str) -> None:
    assert payload_accepts(currency=code) == check_accepts(check_currency, code)


def test_a_currency_code_with_a_trailing_newline_is_refused_on_every_road() -> None:
    assert not payload_accepts(currency="EUR\n")
    with pytest.raises(InvalidRequest):
        check_currency("EUR\n")


def test_check_currency_answers_the_code_upper_case() -> None:
    assert check_currency("eur") == "EUR"
    with pytest.raises(InvalidRequest):
        check_currency(978)


IDS: list[Any] = [0, 1, -1, INT64_MAX, -INT64_MAX, INT64_MAX + 1, -INT64_MAX - 1, 2**64]


@pytest.mark.parametrize("value", IDS)
def test_an_id_is_judged_alike_by_the_payload_type_and_check_id(value: int) -> None:
    assert payload_accepts(bet_uid=value) == check_accepts(lambda v: check_id(v, "uid"), value)


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None, [1]])
def test_an_id_must_be_an_integer_not_a_boolean_float_or_string(value: Any) -> None:
    assert not payload_accepts(bet_uid=value)
    with pytest.raises(InvalidRequest, match="bet_uid: expected a 64-bit integer"):
        check_id(value, "bet_uid")


def test_check_text_takes_non_empty_nul_free_texts_of_at_most_255_characters() -> None:
    assert check_text("x" * 255, "reference") == "x" * 255
    for bad in ["", "x" * 256, "a\x00b", 7, None, b"bytes"]:
        with pytest.raises(InvalidRequest, match="reference: expected a non-empty string"):
            check_text(bad, "reference")


def test_the_callbacks_are_named_by_their_x_callback_event_values() -> None:
    assert contract.EVENTS == (
        "create:fantasy_team",
        "destroy:fantasy_team",
        "cancel:tournament",
        "winners:tournament",
    )
    assert (
        contract.PLACE_BET,
        contract.REFUND_BET,
        contract.REFUND_TOURNAMENT,
        contract.SETTLE_BET,
    ) == contract.EVENTS


def test_the_platform_waits_two_minutes_for_bets_and_five_for_tournaments() -> None:
    # Contract section 8.
    assert dict(contract.PLATFORM_TIMEOUTS) == {
        "create:fantasy_team": 120.0,
        "destroy:fantasy_team": 120.0,
        "cancel:tournament": 300.0,
        "winners:tournament": 300.0,
    }


def test_an_amount_string_read_again_is_the_same_value_and_the_memo_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from decimal import Decimal

    from ledger.contract import SettleRequest

    monkeypatch.setattr(contract, "_READ", {})
    monkeypatch.setattr(contract, "_READ_MAX", 3)

    def payouts(*texts: str) -> list[Decimal]:
        bets = [
            {"user": {"uid": "u1"}, "bet": {"uid": n + 1, "payout": text}}
            for n, text in enumerate(texts)
        ]
        request = validate(SettleRequest, {"pools": [{"pool": {"uid": 7}, "bets": bets}]})
        return [part.bet.payout for part in request.pools[0].bets]

    first = payouts("0.00", "25.00", "0.00", "1.5", "2", "3")
    again = payouts("0.00", "25.00", "0.00", "1.5", "2", "3")
    assert first == again == [Decimal(t) for t in ("0.00", "25.00", "0.00", "1.5", "2", "3")]
    assert [str(value) for value in again] == ["0.00", "25.00", "0.00", "1.5", "2", "3"]
    assert first[0] is first[2] is again[0]  # one object for every copy
    assert len(contract._READ) == 3  # bounded: later strings are read, not remembered
    with pytest.raises(InvalidRequest):
        payouts("1_000")  # still refused, memo or not
