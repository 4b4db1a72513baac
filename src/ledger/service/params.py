"""The use cases' parameters as text: moments, durations, cursors and filters, each refused with
a clear 400 when it cannot be read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..contract import (
    check_id,
    check_text,
)
from ..errors import InvalidRequest
from ..paging import position
from ..settings import (
    SettingsError,
    parse_duration,
)

__all__ = ["parse_instant", "timestamp_key"]


def parse_instant(value: datetime | str, name: str) -> datetime:
    """A moment given as ISO 8601 text (or a ``datetime``), which must name its zone.

    A time without a zone is refused (400) rather than guessed: "midnight" in the operator's
    zone and in UTC are hours apart, and the balances between them differ.
    """
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidRequest(
                f"{name}: expected an ISO 8601 time such as 2026-11-20T00:00:00Z, got {value!r}"
            ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise InvalidRequest(f"{name}: expected an ISO 8601 time")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidRequest(f"{name}: {value!s} has no zone; add Z (UTC) or an offset (+02:00)")
    return moment.astimezone(UTC)


def timestamp_key(moment: datetime) -> str:
    """A stored timestamp as a cursor part: ISO 8601 in UTC (SQLite hands back naive UTC)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def cursor_time(text: int | str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        raise InvalidRequest("not a cursor this API gave", key="request.invalid_cursor") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def filter_text(value: str | None, name: str) -> str | None:
    return None if value is None or value == "" else check_text(value, name)


def statement_position(before: int | str | None) -> int | None:
    """The posting id a statement page continues below: from a cursor, or a bare id."""
    if before is None or before == "":
        return None
    # ASCII only: str.isdigit() also admits "²", which int() then refuses (a 500).
    if isinstance(before, str) and before.isascii() and before.strip().lstrip("-").isdigit():
        before = int(before)
    if isinstance(before, int):
        return check_id(before, "before")
    found = position(before, int)
    return None if found is None else check_id(found[0], "before")


def duration(value: timedelta | str, name: str) -> timedelta:
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise InvalidRequest(f"{name}: must not be negative")
        return value
    try:
        return parse_duration(value, name)
    except SettingsError as error:
        raise InvalidRequest(str(error)) from None
