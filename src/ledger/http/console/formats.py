"""How the console writes and reads times and durations: ISO 8601 in UTC, both ways.

Every time a page shows is ``YYYY-MM-DD HH:MM:SS`` in UTC; every time field takes the same text
(a date alone means its midnight, a time without a zone means UTC), so that no browser's locale
turns it into ``mm/dd/yyyy`` and a 12-hour clock. Durations read as words (``6 hours``), never as
a ``timedelta``'s ``6:00:00``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jinja2 import Environment

from ...errors import InvalidRequest

__all__ = ["TIME_PATTERN", "TIME_PLACEHOLDER", "add_filters", "duration", "utc_field", "when"]

# The HTML ``pattern`` of a time field: the date, then optionally the time to the minute or
# second, then optionally Z.
TIME_PATTERN = r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?Z?"
TIME_PLACEHOLDER = "YYYY-MM-DD HH:MM"

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def duration(span: timedelta | None) -> str:
    """``span`` in words, largest units first: ``6 hours``, ``1 day 2 hours``, ``90 seconds``
    stays ``1 minute 30 seconds``."""
    if span is None:
        return "-"
    left = int(span.total_seconds())
    if left <= 0:
        return "0 seconds"
    parts = []
    for name, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts)


def when(value: datetime | str | None, minutes: bool = False) -> str:
    """A moment as the console shows it: ``2026-11-22 09:00:05`` in UTC (``-`` for none)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        moment = value
    moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M" if minutes else "%Y-%m-%d %H:%M:%S")


def utc_field(text: str | None, name: str) -> str | None:
    """A time field's text as ISO 8601 with its zone (UTC unless it names one), or ``None``
    when empty; anything else is a 400 naming the field."""
    if text is None or not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRequest(
            f"{name}: expected a UTC time such as 2026-11-22 09:00, got {text[:64]!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def add_filters(environment: Environment) -> None:
    """The console's template filters and constants."""
    filters: dict[str, Any] = {"when": when, "duration": duration}
    environment.filters.update(filters)
    environment.globals.update(time_pattern=TIME_PATTERN, time_placeholder=TIME_PLACEHOLDER)
