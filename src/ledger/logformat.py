"""How the ledger's plain (non-JSON) log lines tell time: ISO-8601 UTC with milliseconds.

``2025-06-01T12:00:00.123Z`` on every line: an operator comparing the log with the platform's
records, a database's or another replica's must not have to guess the server's time zone. The
server's processes (its workers and its writer process) all print lines this way.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def iso_utc(seconds: float) -> str:
    """``seconds`` since the epoch as ISO-8601 UTC with milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UtcFormatter(logging.Formatter):
    """A formatter whose ``%(asctime)s`` is :func:`iso_utc` of the record's time."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_utc(record.created)


def plain_handler() -> logging.Handler:
    """A handler to standard error printing :data:`PLAIN_FORMAT` with UTC timestamps."""
    handler = logging.StreamHandler()
    handler.setFormatter(UtcFormatter(PLAIN_FORMAT))
    return handler
