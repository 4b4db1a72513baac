"""How the server's log lines tell time and name the operator.

Every line carries an ISO-8601 UTC timestamp with milliseconds (``2025-06-01T12:00:00.123Z``):
an operator comparing the log with the platform's records, a database's or another replica's
must not have to guess the server's time zone.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime

__all__ = ["JSON_LOGGERS", "UtcFormatter", "fingerprint", "iso_utc"]

JSON_LOGGERS = ("ledger.http", "ledger.operator")
"""Loggers whose messages are whole JSON objects, printed bare (one JSON document per line)."""


def iso_utc(seconds: float) -> str:
    """``seconds`` since the epoch as ISO-8601 UTC with milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UtcFormatter(logging.Formatter):
    """A formatter whose ``%(asctime)s`` is :func:`iso_utc` of the record's time."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return iso_utc(record.created)


def fingerprint(secret: str) -> str:
    """A short, stable name for a credential that reveals nothing of it: 8 hex of its SHA-256.

    The operator token is one identity; logging this tells which token acted (and, after a
    rotation, whether an old one is still in use) without writing the token into the log.
    """
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]
