"""Bad input is a LedgerError with a stable key (a 4xx, never a 5xx), and writes nothing.

Each case runs on both stores against a ledger that already holds one deposit and one bet, and
checks afterwards that the journal counts and the balances did not move.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import msgspec
import pytest

import ledger
from support import payloads as P
from support.books import balance, raises_key
from support.httpkit import dumps

D = Decimal
REQUEST = "request.invalid"
JSON = "request.malformed_json"
AMOUNT = "amount.invalid"


@pytest.fixture
def seeded(book: ledger.Ledger) -> Iterator[ledger.Ledger]:
    """A ledger with u1 funded and bet 1 placed; after the test, nothing may have changed."""
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1)))
    before = book.check()
    yield book
    after = book.check()
    assert after.ok, after.problems
    assert (after.transactions, after.postings, after.accounts, after.bets) == (
        before.transactions,
        before.postings,
        before.accounts,
        before.bets,
    )
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


def place_with(**changes: Any) -> dict[str, Any]:
    """A Place Bet body for bet 2 with ``section.field`` replaced (``None`` deletes it)."""
    body = P.place(P.entry(2))
    for path, value in changes.items():
        section, name = path.split("__")
        target = body["bets"][0][section]
        if value is _DELETE:
            del target[name]
        else:
            target[name] = value
    return body


_DELETE = object()


PLACE_CASES: list[tuple[str, dict[str, Any], str]] = [
    # wrong types and missing fields
    ("bet uid as string", {"bet__uid": "2"}, REQUEST),
    ("bet uid as boolean", {"bet__uid": True}, REQUEST),
    ("bet uid as float", {"bet__uid": D("2.0")}, REQUEST),
    ("bet uid null", {"bet__uid": None}, REQUEST),
    ("bet uid beyond int64", {"bet__uid": 2**63}, REQUEST),
    ("pool uid as string", {"pool__uid": "7"}, REQUEST),
    ("pool uid as boolean", {"pool__uid": False}, REQUEST),
    ("user uid as number", {"user__uid": 1}, REQUEST),
    ("user uid empty", {"user__uid": ""}, REQUEST),
    ("user uid with NUL", {"user__uid": "u\x001"}, REQUEST),
    ("user uid too long", {"user__uid": "u" * 256}, REQUEST),
    ("user uid naming a held account", {"user__uid": "u1:held"}, REQUEST),
    ("user uid naming a held account after a newline", {"user__uid": "x\nu1:held"}, REQUEST),
    ("bet uuid with NUL", {"bet__uuid": "7|\x00"}, REQUEST),
    ("bet uuid too long", {"bet__uuid": "x" * 256}, REQUEST),
    ("ticket with NUL", {"bet__ticket": "a\x00b"}, REQUEST),
    ("currency as number", {"bet__currency": 978}, REQUEST),
    ("currency with symbols", {"bet__currency": "E-R"}, REQUEST),
    ("currency with a trailing newline", {"bet__currency": "EUR\n"}, REQUEST),
    ("missing bet uid", {"bet__uid": _DELETE}, REQUEST),
    ("missing amount", {"bet__amount": _DELETE}, REQUEST),
    ("missing currency", {"bet__currency": _DELETE}, REQUEST),
    ("missing user uid", {"user__uid": _DELETE}, REQUEST),
    ("missing pool uid", {"pool__uid": _DELETE}, REQUEST),
    # amounts
    ("amount as boolean", {"bet__amount": True}, AMOUNT),
    ("amount negative", {"bet__amount": D("-1.00")}, AMOUNT),
    ("rake negative", {"bet__rake": D("-0.01")}, AMOUNT),
    ("amount NaN string", {"bet__amount": "NaN"}, AMOUNT),
    ("amount Infinity string", {"bet__amount": "Infinity"}, AMOUNT),
    ("amount NaN decimal", {"bet__amount": D("NaN")}, AMOUNT),
    ("amount not a number", {"bet__amount": "ten"}, AMOUNT),
    ("amount empty string", {"bet__amount": ""}, AMOUNT),
    ("amount as list", {"bet__amount": [10]}, AMOUNT),
    ("amount too precise for EUR", {"bet__amount": D("10.001")}, AMOUNT),
    ("rake too precise for EUR", {"bet__rake": "0.005"}, AMOUNT),
    ("amount huge", {"bet__amount": D("1e30")}, AMOUNT),
    ("amount just over the limit", {"bet__amount": "10000000000000000000000000000.01"}, AMOUNT),
    ("amount with absurd exponent", {"bet__amount": "1E-999999999"}, AMOUNT),
    # amount strings are plain ASCII decimals
    ("amount with underscores", {"bet__amount": "1_000"}, AMOUNT),
    ("amount in fullwidth digits", {"bet__amount": "\uff11\uff10"}, AMOUNT),
    ("amount in Arabic-Indic digits", {"bet__amount": "\u0661\u0660"}, AMOUNT),
    ("amount padded with spaces", {"bet__amount": " 5 "}, AMOUNT),
    ("amount string with an exponent", {"bet__amount": "1e1"}, AMOUNT),
    ("rake with underscores", {"bet__rake": "0_1"}, AMOUNT),
    ("amount string of 300,000 digits", {"bet__amount": "1." + "0" * 300_000}, AMOUNT),
    ("amount of 41 digits", {"bet__amount": 10**40}, AMOUNT),
]


@pytest.mark.parametrize(
    ("changes", "key"),
    [pytest.param(changes, key, id=name) for name, changes, key in PLACE_CASES],
)
def test_bad_place_bet_field_is_refused_with_a_stable_key(
    seeded: ledger.Ledger, changes: dict[str, Any], key: str
) -> None:
    with raises_key(key) as info:
        seeded.place_bets(place_with(**changes))
    assert 400 <= info.value.status < 500
    assert seeded.bet(2) is None


def test_a_user_uid_across_a_newline_cannot_spend_another_users_held_money(
    book: ledger.Ledger,
) -> None:
    # "a\nb:held" names the held account of user "a\nb": accepted, it held 10.00 + 1.00 of
    # a\nb's held money for itself, and `check` failed from then on.
    book.deposit("a\nb", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1, user="a\nb")))
    with raises_key(REQUEST):
        book.place_bets(P.place(P.entry(2, user="a\nb:held")))
    assert balance(book, "a\nb") == (D("89.00"), D("11.00"))
    assert book.check().ok


def test_yen_amount_with_a_fraction_is_refused(book: ledger.Ledger) -> None:
    book.deposit("u1", "JPY", "1000", reference="jpy")
    before = book.check()
    with raises_key(AMOUNT):
        book.place_bets(P.place(P.entry(2, currency="JPY", amount=D("1.5"), rake=0)))
    assert book.check().postings == before.postings
    assert balance(book, "u1", "JPY") == (D(1000), D(0))


RAW_BODIES: list[tuple[str, bytes | str, str]] = [
    ("malformed JSON", b'{"bets": [', JSON),
    ("not UTF-8", b'{"bets": "\xff"}', REQUEST),
    ("not UTF-8 in a read field", b'{"bets": [{"user": {"uid": "\xff"}}]}', JSON),
    ("NaN literal", b'{"bets": [{"bet": {"amount": NaN}}]}', JSON),
    ("Infinity literal", b'{"bets": [{"bet": {"amount": Infinity}}]}', JSON),
    ("empty body", b"", JSON),
    ("JSON array", b"[]", REQUEST),
    ("JSON string", b'"bets"', REQUEST),
    ("JSON number", b"42", REQUEST),
    ("JSON null", b"null", REQUEST),
    ("empty bets list", b'{"bets": []}', REQUEST),
    ("bets is an object", b'{"bets": {}}', REQUEST),
    ("no bets key", b'{"pools": []}', REQUEST),
    ("entry is a string", b'{"bets": ["x"]}', REQUEST),
]


@pytest.mark.parametrize(
    ("body", "key"), [pytest.param(body, key, id=name) for name, body, key in RAW_BODIES]
)
def test_bad_place_bet_body_is_refused_with_a_stable_key(
    seeded: ledger.Ledger, body: bytes | str, key: str
) -> None:
    with raises_key(key):
        seeded.place_bets(body)


def test_a_duplicated_key_counts_once_with_its_last_value(book: ledger.Ledger) -> None:
    # RFC 8259 leaves duplicate names to the parser; like JSON.parse and Python's json, the
    # last one wins. Decided, not accidental: the platform's serialiser never repeats a name.
    text = json.dumps(P.place(P.entry(2)), default=str)
    duplicated = text.replace('"amount": "10.00"', '"amount": "1.00", "amount": "10.00"')
    assert duplicated != text
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.place_bets(duplicated)
    bet = book.bet(2)
    assert bet is not None
    assert bet.amount == D("10.00")


def test_json_amounts_are_parsed_exactly(seeded: ledger.Ledger) -> None:
    # 10.000000000000000000001 rounds to 10.0 through float; exactly, it is too precise.
    text = json.dumps(P.place(P.entry(2)), default=str).replace(
        '"amount": "10.00"', '"amount": 10.000000000000000000001'
    )
    with raises_key(AMOUNT):
        seeded.place_bets(text.encode())


@pytest.mark.parametrize("body", [b'{"pools": []}', b"[]", b'{"pools": [{"bets": []}]}'])
@pytest.mark.parametrize("callback", ["refund", "settle"])
def test_bad_refund_or_settle_body_is_refused(
    seeded: ledger.Ledger, body: bytes, callback: str
) -> None:
    call: Callable[[bytes], object] = getattr(seeded, callback)
    with raises_key(REQUEST):
        call(body)


SETTLE_CASES: list[tuple[str, Any, str]] = [
    ("payout negative", "-1.00", AMOUNT),
    ("payout NaN", "NaN", AMOUNT),
    ("payout Infinity", "Infinity", AMOUNT),
    ("payout too precise", "1.001", AMOUNT),
    ("payout boolean", True, AMOUNT),
    ("payout with underscores", "1_0.00", AMOUNT),
    ("payout padded", " 1.00", AMOUNT),
    ("payout of 300,000 digits", "1." + "0" * 300_000, AMOUNT),
    ("payout missing", _DELETE, REQUEST),
]


@pytest.mark.parametrize(
    ("payout", "key"), [pytest.param(p, k, id=name) for name, p, k in SETTLE_CASES]
)
def test_bad_settle_payout_is_refused(seeded: ledger.Ledger, payout: Any, key: str) -> None:
    body = P.settle(7, (1, "1.00"))
    if payout is _DELETE:
        del body["pools"][0]["bets"][0]["bet"]["payout"]
    else:
        body["pools"][0]["bets"][0]["bet"]["payout"] = payout
    with raises_key(key):
        seeded.settle(body)
    view = seeded.bet(1)
    assert view is not None
    assert view.state == "placed"


@pytest.mark.parametrize(
    ("field", "value"),
    [("uid", "1"), ("uid", True), ("uid", None)],
)
def test_bad_refund_bet_uid_is_refused(seeded: ledger.Ledger, field: str, value: Any) -> None:
    body = P.refund(7, 1)
    body["pools"][0]["bets"][0]["bet"][field] = value
    with raises_key(REQUEST):
        seeded.refund(body)


@pytest.mark.parametrize(
    "amount",
    ["1_000", "\uff11\uff10", " 11.00", "1." + "0" * 300_000],
    ids=["underscores", "fullwidth", "padded", "300,000 digits"],
)
def test_a_refund_amount_that_is_not_a_plain_decimal_is_refused(
    seeded: ledger.Ledger, amount: str
) -> None:
    body = P.refund(7, 1)
    body["pools"][0]["bets"][0]["bet"]["amount"] = amount
    with raises_key(AMOUNT):
        seeded.refund(body)


HUGE = "1." + "2" * 300_000


def _refund_claiming(amount: Any) -> dict[str, Any]:
    body = P.refund(7, 1)
    body["pools"][0]["bets"][0]["bet"]["amount"] = amount
    return body


def _settle_paying(payout: Any) -> dict[str, Any]:
    body = P.settle(7, (1, "1.00"))
    body["pools"][0]["bets"][0]["bet"]["payout"] = payout
    return body


HUGE_BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "place amount number": ("place_bets", P.place(P.entry(2, amount=D(HUGE)))),
    "place amount string": ("place_bets", P.place(P.entry(2, amount=HUGE))),
    "place rake number": ("place_bets", P.place(P.entry(2, rake=D(HUGE)))),
    "place amount integer of 4,001 digits": ("place_bets", P.place(P.entry(2, amount=10**4000))),
    "settle payout number": ("settle", _settle_paying(D(HUGE))),
    "settle payout string": ("settle", P.settle(7, (1, HUGE))),
    "refund amount number": ("refund", _refund_claiming(D(HUGE))),
}


@pytest.mark.parametrize(("method", "body"), HUGE_BODIES.values(), ids=HUGE_BODIES.keys())
def test_an_amount_of_300000_digits_is_refused_by_the_length_rule_on_every_callback(
    seeded: ledger.Ledger, method: str, body: dict[str, Any]
) -> None:
    call: Callable[[object], object] = getattr(seeded, method)
    for payload in (dumps(body), body):  # raw JSON (numbers stay numbers) and the parsed dict
        with raises_key(AMOUNT) as info:
            call(payload)
        assert "longer than 40 characters" in info.value.message
        assert len(info.value.message) < 120


def test_one_bad_entry_among_good_ones_places_nothing(seeded: ledger.Ledger) -> None:
    body = P.place(P.entry(2), P.entry(3))
    bad = copy.deepcopy(body)
    bad["bets"][1]["bet"]["amount"] = D("-5")
    with raises_key(AMOUNT):
        seeded.place_bets(bad)
    assert seeded.bet(2) is None


def test_unknown_fields_are_ignored_at_every_level(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    body = P.place(P.entry(2))
    body["extra"] = {"anything": [1, 2]}
    for section in ("user", "pool", "bet"):
        body["bets"][0][section]["unexpected_field"] = {"nested": True}
    assert book.place_bets(body).placed == [2]
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda b: b.deposit("u1", "EUR", True, reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", float("nan"), reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "Infinity", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "-5", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "10.001", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "JPY", "1.5", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "1e30", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", None, reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "1_000", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "\uff11\uff10", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "\u0661\u0660", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", " 5 ", reference="x"), AMOUNT),
        (lambda b: b.deposit("u1", "EUR", "1." + "0" * 300_000, reference="x"), AMOUNT),
        (lambda b: b.withdraw("u1", "EUR", "1_0", reference="x"), AMOUNT),
        (lambda b: b.deposit("", "EUR", "1", reference="x"), REQUEST),
        (lambda b: b.deposit(1, "EUR", "1", reference="x"), REQUEST),
        (lambda b: b.deposit("u\x00", "EUR", "1", reference="x"), REQUEST),
        (lambda b: b.deposit("u1", "", "1", reference="x"), REQUEST),
        (lambda b: b.deposit("u1", "EUR", "1", reference=""), REQUEST),
        (lambda b: b.deposit("u1", "EUR", "1", reference="r\x00"), REQUEST),
        (lambda b: b.withdraw("u1", "EUR", "-1", reference="x"), AMOUNT),
        (lambda b: b.withdraw("u1", "EUR", "0", reference="x"), AMOUNT),
        (lambda b: b.balance("u1:held"), REQUEST),
        (lambda b: b.statement("u1", limit=0), REQUEST),
    ],
)
def test_bad_embedded_api_arguments_are_refused(
    seeded: ledger.Ledger, call: Callable[[ledger.Ledger], object], key: str
) -> None:
    with raises_key(key):
        call(seeded)


@pytest.mark.parametrize("uid", [2**63, -(2**63), True])
def test_looking_up_a_bet_uid_beyond_64_bits_is_bad_input(book: ledger.Ledger, uid: int) -> None:
    with raises_key(REQUEST):
        book.bet(uid)


def test_a_statement_page_or_pool_beyond_64_bits_is_bad_input(book: ledger.Ledger) -> None:
    with raises_key(REQUEST):
        book.statement("u1", before=2**64)
    with raises_key(REQUEST):
        book.pool_report(2**64)


def test_a_statement_cursor_of_non_ascii_digits_is_bad_input_not_a_crash(
    book: ledger.Ledger,
) -> None:
    """ "²" is a digit to str.isdigit() and not to int(): a 400, never an internal error."""
    book.deposit("u1", "EUR", "1.00", reference="a")
    with raises_key("request.invalid_cursor"):
        book.statement("u1", before="²")


def test_payload_schemas_describe_amounts_as_bounded_strings_or_numbers() -> None:
    schema = msgspec.json.schema(ledger.SettleRequest)
    payout = schema["$defs"]["SettleBet"]["properties"]["payout"]
    assert {"type": "number", "minimum": 0} in payout["anyOf"]
    assert {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$", "maxLength": 40} in payout["anyOf"]
