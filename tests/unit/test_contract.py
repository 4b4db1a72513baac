"""The contract module is the one home of the id, text, user uid and currency code rules, and of
the callbacks' names and the platform's timeouts: the payload types and the ``check_*`` functions
must say the same thing, for every value."""

from __future__ import annotations

import json
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import contract
from ledger.contract import (
    INT64_MAX,
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
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


# --- the same rules over a whole request (validate's _check_texts) -------------------------------


def pools(user: Any = "u1", currency: Any = "EUR", *, before: int = 0) -> dict[str, Any]:
    """A settle's (or refund's) body: ``before`` good participants in a first pool, then the one
    under test alone in a second."""

    def part(uid: Any, n: int, code: Any) -> dict[str, Any]:
        return {"user": {"uid": uid}, "bet": {"uid": n, "payout": "1.00", "currency": code}}

    return {
        "pools": [
            {"pool": {"uid": 1}, "bets": [part(f"ok{n}", n, "EUR") for n in range(before)]},
            {"pool": {"uid": 2}, "bets": [part(user, 999, currency)]},
        ]
    }


def accepts(model: type[msgspec.Struct], body: dict[str, Any]) -> bool:
    """Whether ``validate`` accepts ``body`` given as a dict, as JSON bytes, and as text."""
    verdicts = set()
    for form in (body, json.dumps(body).encode(), json.dumps(body)):
        try:
            validate(model, form)
            verdicts.add(True)
        except InvalidRequest:
            verdicts.add(False)
    assert len(verdicts) == 1, f"{model.__name__} judged {body!r} differently by its form"
    return verdicts.pop()


@pytest.mark.parametrize("uid", USER_UIDS)
def test_a_user_uid_is_judged_alike_in_a_settle_a_refund_and_check_user(uid: str) -> None:
    expected = check_accepts(check_user, uid)
    assert accepts(SettleRequest, pools(user=uid, before=3)) == expected
    assert accepts(RefundRequest, pools(user=uid, before=3)) == expected
    assert accepts(PlaceBetsRequest, place_bet(user=uid)) == expected


@pytest.mark.parametrize("code", CURRENCIES)
def test_a_settle_currency_code_is_judged_alike_by_the_payload_type_and_check_currency(
    code: str,
) -> None:
    assert accepts(SettleRequest, pools(currency=code, before=3)) == check_accepts(
        check_currency, code
    )


def test_a_refusal_names_the_participant_across_pools_as_msgspec_would() -> None:
    with pytest.raises(InvalidRequest, match=r"at `\$\.pools\[1\]\.bets\[0\]\.user\.uid`"):
        validate(SettleRequest, json.dumps(pools(user="u:held", before=5)).encode())
    with pytest.raises(InvalidRequest, match=r"at `\$\.pools\[1\]\.bets\[0\]\.bet\.currency`"):
        validate(SettleRequest, json.dumps(pools(currency="E U", before=5)).encode())
    with pytest.raises(InvalidRequest, match=r"matching regex .* at `\$\.bets\[0\]\.user\.uid`"):
        validate(PlaceBetsRequest, place_bet(user="a\nb:held"))


def test_a_model_built_in_code_is_held_to_the_user_uid_and_currency_rules() -> None:
    good = validate(SettleRequest, pools())
    assert validate(SettleRequest, good) is good
    held = msgspec.structs.replace(
        good.pools[1],
        bets=[msgspec.structs.replace(good.pools[1].bets[0], user=contract.User("u:held"))],
    )
    with pytest.raises(InvalidRequest, match=r"user\.uid"):
        validate(SettleRequest, SettleRequest([good.pools[0], held]))
    numbered = msgspec.structs.replace(
        good.pools[1],
        bets=[msgspec.structs.replace(good.pools[1].bets[0], user=contract.User(cast(Any, 7)))],
    )
    with pytest.raises(InvalidRequest, match="not a string"):
        validate(SettleRequest, SettleRequest([good.pools[0], numbered]))


# Strings made of what the user uid rule is about: NULs, newlines, and the pieces of ":held".
UID_TEXT = st.text(alphabet=["\x00", "\n", ":", "h", "e", "l", "d", "x"], min_size=1, max_size=12)


@given(st.lists(UID_TEXT, max_size=8))
def test_the_joined_check_of_many_uids_finds_what_the_pattern_finds_one_by_one(
    uids: list[str],
) -> None:
    expected = next((n for n, uid in enumerate(uids) if not contract._USER_UID.search(uid)), None)
    assert contract._first_bad_uid(uids) == expected
