"""Exact money: decimal amounts in, integers of the minor unit stored, decimal strings out.

Nothing here ever rounds. An amount that does not fit its currency's scale exactly is an error,
because a silently rounded entry fee is a wrong charge. Conversion uses integer arithmetic on the
decimal's digits so that no context precision can round behind our back.

Standard library only.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache

from .errors import InvalidAmount

__all__ = [
    "MAX_AMOUNT_CHARS",
    "MAX_MINOR",
    "from_minor",
    "is_plain_decimal",
    "non_negative",
    "parse_decimal",
    "parse_number",
    "render",
    "to_minor",
]

# Largest single amount accepted, in minor units: 10^12 units of an 18-decimal currency. Every
# store holds 38 digits (ledger.stores.schema.CAPACITY), so a balance has room for 10^8 of them
# and no request a body can carry sums past it; beyond that, the store refuses with 422.
MAX_MINOR = 10**30

# The longest amount text read (a decimal string or a JSON number as written), and the most
# digits of an int or Decimal. It is checked before anything converts the amount: turning a
# decimal of 300,000 digits into an exact ratio took 2.6 s of one core. 40 covers every amount
# the stores can hold at any scale up to 18 with room for padding zeros ("0010.50").
MAX_AMOUNT_CHARS = 40
_INT_LIMIT = 10**MAX_AMOUNT_CHARS

# Plain ASCII decimals only: Python's Decimal() would also read "1_000", " 5 ", "1e2" and
# fullwidth or Arabic-Indic digits, none of which is an amount a platform means to send.
# (A str pattern's [0-9] is ASCII only, unlike \d.)
_PLAIN_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")

# How much of a refused input an error message may quote.
_QUOTE = 24


def parse_decimal(value: object, *, field: str = "amount") -> Decimal:
    """Turn a JSON-ish value into a Decimal without passing through binary floating point.

    Accepts ``Decimal``, ``int`` and plain decimal strings (ASCII digits with at most one point:
    no sign, exponent, whitespace or underscores). A ``float`` can only reach here from a caller
    that parsed JSON lossily; it is converted through its shortest round-trip ``repr``, which
    reproduces the digits the JSON text held for any amount of up to 15 significant digits.
    Booleans are refused even though Python treats them as integers. Texts longer than
    :data:`MAX_AMOUNT_CHARS` and numbers of more digits are refused before any conversion.
    """
    if isinstance(value, str):
        if len(value) > MAX_AMOUNT_CHARS:
            raise _too_long(field)
        if not _PLAIN_DECIMAL.fullmatch(value):
            raise InvalidAmount(
                f"{field}: {_quote(value)} is not a plain decimal (ASCII digits, at most one "
                "point; no sign, exponent, spaces or underscores)"
            )
        return Decimal(value)  # finite by its form
    if isinstance(value, bool):
        raise InvalidAmount(f"{field}: a boolean is not an amount")
    if isinstance(value, Decimal):
        result = value
        if result.is_finite() and len(result.as_tuple().digits) > MAX_AMOUNT_CHARS:
            raise _too_long(field)
    elif isinstance(value, int):
        if not -_INT_LIMIT < value < _INT_LIMIT:  # compares sizes first: no conversion
            raise _too_long(field)
        result = Decimal(value)
    elif isinstance(value, float):
        result = Decimal(repr(value))
    else:
        raise InvalidAmount(f"{field}: expected a decimal number or string")
    if not result.is_finite():
        raise InvalidAmount(f"{field}: {_quote(value)} is not finite")
    return result


def is_plain_decimal(text: str) -> bool:
    """Whether ``text`` is an amount string :func:`parse_decimal` accepts as it is."""
    return len(text) <= MAX_AMOUNT_CHARS and _PLAIN_DECIMAL.fullmatch(text) is not None


def parse_number(text: str, *, field: str = "amount") -> Decimal:
    """The exact value of a JSON number's text (``12.5``, ``1.5e3``), bounded before converting.

    The JSON parser has already checked the syntax; exponents are valid JSON and stay allowed
    (:func:`to_minor` refuses absurd ones).
    """
    if len(text) > MAX_AMOUNT_CHARS:
        raise _too_long(field)
    try:
        result = Decimal(text)
    except ArithmeticError:  # an exponent beyond what Decimal can hold
        raise InvalidAmount(f"{field}: {_quote(text)} is out of range") from None
    if not result.is_finite():
        raise InvalidAmount(f"{field}: {_quote(text)} is not finite")
    return result


def _too_long(field: str) -> InvalidAmount:
    return InvalidAmount(f"{field}: longer than {MAX_AMOUNT_CHARS} characters")


def _quote(value: object) -> str:
    """The value as a message shows it, cut short: an error never echoes a long input back."""
    text = str(value) if isinstance(value, Decimal) else repr(value)
    return text if len(text) <= _QUOTE else f"{text[: _QUOTE - 3]}..."


def to_minor(amount: Decimal, scale: int, *, field: str = "amount") -> int:
    """Exact conversion of a non-negative decimal to integer minor units of a currency.

    Raises :class:`InvalidAmount` when the amount is negative, not finite, too large, or has
    non-zero digits finer than ``scale`` (``10.001`` in a 2-decimal currency). ``10.0100`` is fine:
    trailing zeros are not precision.
    """
    if not amount.is_finite():  # before hashing: a signalling NaN cannot be hashed
        raise InvalidAmount(f"{field}: {_quote(amount)} is not finite")
    # Entry fees repeat (every entry of a tournament costs the same): remember the answers.
    return _to_minor(amount, scale, field)


def non_negative(amount: Decimal, *, field: str = "amount") -> Decimal:
    """``amount``, unless it is below zero (``-0`` is zero): :class:`InvalidAmount` then. No amount
    a payload carries may be negative, the refund's and settle's echoed ones included."""
    if amount and amount.is_signed():
        raise InvalidAmount(f"{field}: {_quote(amount)} is negative")
    return amount


@lru_cache(maxsize=4096)
def _to_minor(amount: Decimal, scale: int, field: str) -> int:
    if not non_negative(amount, field=field):
        return 0  # zero, including -0 and 0E+7
    # Reject absurd exponents before building huge integers (1E+999999 would take a while):
    # beyond 30 the amount is over MAX_MINOR at any scale.
    if amount.adjusted() > 30:
        raise InvalidAmount(f"{field}: {_quote(amount)} is too large")
    # A non-zero amount whose leading digit is finer than the minor unit cannot be whole minor
    # units. Refusing it here also keeps the arithmetic below small: ``1E-999999999`` (twelve
    # characters of JSON) would otherwise build a billion-digit denominator and hang the worker.
    if amount.adjusted() < -scale:
        raise InvalidAmount(
            f"{field}: {_quote(amount)} has more than {scale} decimal places for its currency"
        )
    # The decoders bound the digits; a model built in code skips them, so check here too: the
    # exact ratio below is quadratic in the number of digits.
    if len(amount.as_tuple().digits) > MAX_AMOUNT_CHARS:
        raise _too_long(field)
    # An exact integer ratio: no decimal context, so no precision limit can round anything.
    numerator, denominator = amount.as_integer_ratio()
    minor, remainder = divmod(numerator * 10**scale, denominator)
    if remainder:
        raise InvalidAmount(
            f"{field}: {_quote(amount)} has more than {scale} decimal places for its currency"
        )
    if minor > MAX_MINOR:
        raise InvalidAmount(f"{field}: {_quote(amount)} is too large")
    return int(minor)


def from_minor(minor: int, scale: int) -> Decimal:
    """The exact decimal value of ``minor`` units at ``scale`` decimal places.

    Its exponent is ``-scale``, so it renders with exactly ``scale`` decimals (see
    :func:`ledger.views.amount_text`). Built from text, which no context can round:
    ``Decimal.scaleb`` rounds to the context's 28 digits, and an 18-decimal house total has more.
    """
    return Decimal(f"{minor}E-{scale}") if scale else Decimal(minor)


def render(minor: int, scale: int) -> str:
    """A decimal string with exactly ``scale`` decimal places: ``render(8900, 2) == "89.00"``."""
    sign = "-" if minor < 0 else ""
    whole, fraction = divmod(abs(minor), 10**scale)
    if scale == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{fraction:0{scale}d}"
