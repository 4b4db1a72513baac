"""Amounts and moments as text: exactly the currency's digits, ISO 8601 in UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


def amount_text(amount: Decimal) -> str:
    """A plain decimal string of exactly the digits ``amount`` holds: never an exponent.

    The ``f`` format without a precision neither rounds nor pads: it writes the coefficient at the
    decimal's own exponent, and every amount the ledger answers is built by
    :func:`ledger.money.from_minor` with its currency's scale as that exponent (``str()`` would
    switch to scientific notation from 7 decimals on).
    """
    return format(amount, "f")


def timestamp_text(stamp: datetime) -> str:
    """ISO 8601 with the zone; SQLite hands timestamps back without one, written in UTC."""
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).isoformat()


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else timestamp_text(moment)


def or_dash(value: Any) -> str:
    return "-" if value is None else str(value)
