"""Exact money: decimal amounts in, integers of the minor unit stored, decimal strings out.

Nothing here ever rounds. An amount that does not fit its currency's scale exactly is an error,
because a silently rounded entry fee is a wrong charge. Conversion uses integer arithmetic on the
decimal's digits so that no context precision can round behind our back.

Standard library only.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from functools import lru_cache

from .errors import InvalidAmount

__all__ = ["MAX_MINOR", "from_minor", "parse_decimal", "render", "to_minor"]

# Largest single amount accepted, in minor units: 10^12 units of an 18-decimal currency. Every
# store holds 38 digits (ledger.stores.schema.CAPACITY), so a balance has room for 10^8 of them
# and no request a body can carry sums past it; beyond that, the store refuses with 422.
MAX_MINOR = 10**30


def parse_decimal(value: object, *, field: str = "amount") -> Decimal:
    """Turn a JSON-ish value into a Decimal without passing through binary floating point.

    Accepts ``Decimal``, ``int`` and decimal strings. A ``float`` can only reach here from a
    caller that parsed JSON lossily; it is converted through its shortest round-trip ``repr``,
    which reproduces the digits the JSON text held for any amount of up to 15 significant digits.
    Booleans are refused even though Python treats them as integers.
    """
    if isinstance(value, bool):
        raise InvalidAmount(f"{field}: a boolean is not an amount")
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, float):
        result = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 64:
            raise InvalidAmount(f"{field}: {value!r} is not a decimal amount")
        try:
            result = Decimal(text)
        except ArithmeticError:
            raise InvalidAmount(f"{field}: {value!r} is not a decimal amount") from None
    else:
        raise InvalidAmount(f"{field}: expected a decimal number or string")
    if not result.is_finite():
        raise InvalidAmount(f"{field}: {value!r} is not finite")
    return result


def to_minor(amount: Decimal, scale: int, *, field: str = "amount") -> int:
    """Exact conversion of a non-negative decimal to integer minor units of a currency.

    Raises :class:`InvalidAmount` when the amount is negative, not finite, too large, or has
    non-zero digits finer than ``scale`` (``10.001`` in a 2-decimal currency). ``10.0100`` is fine:
    trailing zeros are not precision.
    """
    if not amount.is_finite():  # before hashing: a signalling NaN cannot be hashed
        raise InvalidAmount(f"{field}: {amount} is not finite")
    # Entry fees repeat (every entry of a tournament costs the same): remember the answers.
    return _to_minor(amount, scale, field)


@lru_cache(maxsize=4096)
def _to_minor(amount: Decimal, scale: int, field: str) -> int:
    if not amount:
        return 0  # zero, including -0 and 0E+7
    if amount.is_signed():
        raise InvalidAmount(f"{field}: {amount} is negative")
    # Reject absurd exponents before building huge integers (1E+999999 would take a while):
    # beyond 30 the amount is over MAX_MINOR at any scale.
    if amount.adjusted() > 30:
        raise InvalidAmount(f"{field}: {amount} is too large")
    # A non-zero amount whose leading digit is finer than the minor unit cannot be whole minor
    # units. Refusing it here also keeps the arithmetic below small: ``1E-999999999`` (twelve
    # characters of JSON) would otherwise build a billion-digit denominator and hang the worker.
    if amount.adjusted() < -scale:
        raise InvalidAmount(
            f"{field}: {amount} has more than {scale} decimal places for its currency"
        )
    # An exact integer ratio: no decimal context, so no precision limit can round anything.
    numerator, denominator = amount.as_integer_ratio()
    minor, remainder = divmod(numerator * 10**scale, denominator)
    if remainder:
        raise InvalidAmount(
            f"{field}: {amount} has more than {scale} decimal places for its currency"
        )
    if minor > MAX_MINOR:
        raise InvalidAmount(f"{field}: {amount} is too large")
    return int(minor)


def from_minor(minor: int, scale: int) -> Decimal:
    """The exact decimal value of ``minor`` units at ``scale`` decimal places."""
    # scaleb rounds to the context's 28 digits; balances have up to 38: an exact context.
    return Decimal(minor).scaleb(-scale, _EXACT) if scale else Decimal(minor)


# Precision enough for any integer this ledger holds; nothing computed in it rounds.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def render(minor: int, scale: int) -> str:
    """A decimal string with exactly ``scale`` decimal places: ``render(8900, 2) == "89.00"``."""
    sign = "-" if minor < 0 else ""
    whole, fraction = divmod(abs(minor), 10**scale)
    if scale == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{fraction:0{scale}d}"
