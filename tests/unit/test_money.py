"""Exact money, no I/O: parse, convert to minor units, render; nothing is ever rounded."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.currencies import CurrencyTable, parse_scales
from ledger.errors import InvalidAmount, UnknownCurrency
from ledger.money import (
    MAX_AMOUNT_CHARS,
    MAX_MINOR,
    from_minor,
    parse_decimal,
    parse_number,
    render,
    to_minor,
)

D = Decimal


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("89.00", D("89.00")),
        ("0010.50", D("10.50")),
        (7, D(7)),
        (D("1.25"), D("1.25")),
        (D("1E+2"), D("100")),  # a Decimal (or a JSON number) may have an exponent
        (0.1, D("0.1")),  # a float, if one sneaks in, keeps the digits its JSON text had
    ],
)
def test_parse_decimal_keeps_the_exact_digits(value: object, expected: Decimal) -> None:
    assert parse_decimal(value) == expected


@pytest.mark.parametrize(
    "value", [True, False, None, "", "ten", "NaN", "Infinity", "-inf", D("NaN"), [1], "9" * 65]
)
def test_parse_decimal_refuses_what_is_not_a_finite_amount(value: object) -> None:
    with pytest.raises(InvalidAmount):
        parse_decimal(value)


NOT_PLAIN_DECIMALS = {
    "underscores": "1_000",
    "fullwidth digits": "\uff11\uff10",
    "Arabic-Indic digits": "\u0661\u0660",
    "Devanagari digits": "\u0967\u0966",
    "padded": " 5 ",
    "trailing space": "5 ",
    "newline": "5\n",
    "plus sign": "+5",
    "minus sign": "-5",
    "exponent": "1e2",
    "capital exponent": "1E2",
    "trailing point": "10.",
    "leading point": ".5",
    "two points": "1.2.3",
    "comma": "1,5",
    "hexadecimal": "0x10",
    "infinity": "inf",
}


@pytest.mark.parametrize("text", NOT_PLAIN_DECIMALS.values(), ids=NOT_PLAIN_DECIMALS.keys())
def test_amount_strings_are_plain_ascii_decimals(text: str) -> None:
    with pytest.raises(InvalidAmount, match="plain decimal"):
        parse_decimal(text)


def test_an_amount_string_of_300000_digits_is_refused_by_the_length_rule() -> None:
    huge = "1." + "2" * 300_000
    with pytest.raises(InvalidAmount) as info:
        parse_decimal(huge, field="bet.amount")
    # The length rule, checked before any conversion: the message says so and echoes nothing.
    assert info.value.message == f"bet.amount: longer than {MAX_AMOUNT_CHARS} characters"


def test_the_longest_amount_string_is_accepted() -> None:
    longest = "1" * 20 + "." + "0" * (MAX_AMOUNT_CHARS - 21)
    assert len(longest) == MAX_AMOUNT_CHARS
    assert parse_decimal(longest) == D("1" * 20)
    with pytest.raises(InvalidAmount, match="longer than"):
        parse_decimal(longest + "0")


@pytest.mark.parametrize(
    "value",
    [10**MAX_AMOUNT_CHARS, -(10**MAX_AMOUNT_CHARS), 10**4000, D("1." + "2" * 300_000)],
    ids=["int of 41 digits", "negative int of 41 digits", "int of 4001 digits", "long Decimal"],
)
def test_numbers_beyond_the_digit_bound_are_refused_with_a_short_message(value: object) -> None:
    with pytest.raises(InvalidAmount) as info:
        parse_decimal(value)
    assert len(info.value.message) <= 80


def test_json_number_text_is_bounded_before_conversion() -> None:
    assert parse_number("1.5e3") == D("1500")
    with pytest.raises(InvalidAmount, match="longer than"):
        parse_number("1." + "2" * 300_000)
    with pytest.raises(InvalidAmount):
        parse_number("1e99999999999999999999")  # beyond what Decimal can hold


def test_to_minor_refuses_a_decimal_of_too_many_digits_without_echoing_it() -> None:
    # A model built in code bypasses the decoders: to_minor guards itself too.
    huge = D("1." + "2" * 300_000)
    with pytest.raises(InvalidAmount) as info:
        to_minor(huge, 2)
    assert len(info.value.message) <= 80


@pytest.mark.parametrize(
    ("amount", "scale", "minor"),
    [
        ("89.00", 2, 8900),
        ("10.0100", 2, 1001),  # trailing zeros are not precision
        ("0", 2, 0),
        ("-0.00", 2, 0),
        ("1500", 0, 1500),
        ("1.5E+3", 0, 1500),
        ("0.001", 3, 1),
    ],
)
def test_to_minor_is_exact(amount: str, scale: int, minor: int) -> None:
    assert to_minor(D(amount), scale) == minor


@pytest.mark.parametrize(
    ("amount", "scale"),
    [
        ("10.001", 2),
        ("1.5", 0),
        ("0.005", 2),
        ("-0.01", 2),
        ("-1", 0),
        ("1E+29", 2),  # 10^31 minor units: over MAX_MINOR
        ("1E+31", 0),
        ("1E-999999999", 2),  # refused at once, without building a billion-digit divisor
        (str(MAX_MINOR + 1), 0),
    ],
)
def test_to_minor_refuses_negative_too_precise_or_too_large(amount: str, scale: int) -> None:
    with pytest.raises(InvalidAmount):
        to_minor(D(amount), scale)


def test_to_minor_accepts_the_largest_amount() -> None:
    assert to_minor(D(MAX_MINOR), 0) == MAX_MINOR


@pytest.mark.parametrize(
    ("minor", "scale", "text"),
    [
        (8900, 2, "89.00"),
        (5, 2, "0.05"),
        (0, 2, "0.00"),
        (-1100, 2, "-11.00"),
        (1500, 0, "1500"),
        (1, 3, "0.001"),
    ],
)
def test_render_writes_exactly_scale_decimals(minor: int, scale: int, text: str) -> None:
    assert render(minor, scale) == text
    assert from_minor(minor, scale) == D(text)


@given(
    scale=st.integers(min_value=0, max_value=8),
    minor=st.integers(min_value=0, max_value=MAX_MINOR),
)
def test_render_and_to_minor_round_trip(scale: int, minor: int) -> None:
    text = render(minor, scale)
    assert to_minor(parse_decimal(text), scale) == minor
    assert D(text) == from_minor(minor, scale)


@given(
    value=st.decimals(
        min_value=0, max_value=10**12, allow_nan=False, allow_infinity=False, places=2
    ),
)
def test_two_place_amounts_render_back_unchanged(value: Decimal) -> None:
    assert D(render(to_minor(value, 2), 2)) == value
    assert render(to_minor(value, 2), 2) == str(value.quantize(D("0.01")))


@given(
    value=st.decimals(min_value=0, max_value=10**6, allow_nan=False, allow_infinity=False),
    scale=st.integers(min_value=0, max_value=4),
)
def test_to_minor_never_rounds(value: Decimal, scale: int) -> None:
    exact = value == value.quantize(D(1).scaleb(-scale))
    try:
        minor = to_minor(value, scale)
    except InvalidAmount:
        assert not exact
    else:
        assert exact
        assert from_minor(minor, scale) == value


def test_currency_scales_come_from_iso_4217_with_overrides_and_a_default() -> None:
    table = CurrencyTable(overrides={"FUN": 0})
    assert (table.scale("EUR"), table.scale("jpy"), table.scale("BHD")) == (2, 0, 3)
    assert table.scale("FUN") == 0
    assert table.scale("COIN") == 2
    with pytest.raises(UnknownCurrency):
        CurrencyTable(default_scale=None).scale("COIN")


def test_currency_scales_from_the_environment() -> None:
    table = CurrencyTable.from_env(
        {"LEDGER_CURRENCY_SCALES": "fun=0, BTC=8", "LEDGER_DEFAULT_SCALE": "none"}
    )
    assert (table.scale("FUN"), table.scale("BTC")) == (0, 8)
    with pytest.raises(UnknownCurrency):
        table.scale("XYZQ")
    with pytest.raises(ValueError, match="CODE=DIGITS"):
        parse_scales("EUR")
