"""How the server's log lines tell time and name the operator.

Every line carries an ISO-8601 UTC timestamp with milliseconds (``2025-06-01T12:00:00.123Z``):
an operator comparing the log with the platform's records, a database's or another replica's
must not have to guess the server's time zone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any

import msgspec

from ..logformat import UtcFormatter, iso_utc, plain_handler

__all__ = [
    "JSON_LOGGERS",
    "JsonLinesHandler",
    "UtcFormatter",
    "configure_logging",
    "fingerprint",
    "iso_utc",
    "log_json",
]

JSON_LOGGERS = ("ledger.http", "ledger.operator")
"""Loggers whose messages are whole JSON objects, printed bare (one JSON document per line)."""


def fingerprint(secret: str) -> str:
    """A short, stable name for a credential that reveals nothing of it: 8 hex of its SHA-256.

    The operator token is one identity; logging this tells which token acted (and, after a
    rotation, whether an old one is still in use) without writing the token into the log.
    """
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]


class JsonLinesHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``ledger serve`` gives the JSON loggers: each message printed bare, one a line.

    :func:`log_json` hands it whole lines directly, skipping logging's per-record machinery (the
    caller's stack walk, the record, the formatter, a flush per line): it buffers them and writes
    what one turn of the event loop produced in one write. A line waits at most that turn; a
    process killed in it loses the lines of that turn from the log, never anything the delivery
    journal holds.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self._pending: list[bytes] = []

    def write_soon(self, line: bytes) -> None:
        """Write ``line`` (one JSON document, no newline) by the end of this loop turn."""
        with self.lock:  # type: ignore[union-attr]
            self._pending.append(line)
            first = len(self._pending) == 1
        if not first:
            return  # the turn's write is scheduled already
        try:
            asyncio.get_running_loop().call_soon(self.write_pending)
        except RuntimeError:  # no event loop in this thread: write at once
            self.write_pending()

    def write_pending(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            lines, self._pending = self._pending, []
            if lines:
                lines.append(b"")
                self.stream.write(b"\n".join(lines).decode())
                self.stream.flush()

    def emit(self, record: logging.LogRecord) -> None:
        self.write_pending()  # keep the lines in the order they were logged
        super().emit(record)

    def flush(self) -> None:
        self.write_pending()
        super().flush()


def log_json(logger: logging.Logger, level: int, document: dict[str, Any]) -> None:
    """Log ``document`` as one compact JSON line on ``logger`` (one of :data:`JSON_LOGGERS`).

    Where ``ledger serve`` configured the logger (its one handler a :class:`JsonLinesHandler`,
    no filters, not propagating) the line goes to that handler directly; anywhere else (an
    embedding process's own logging, a test's capture) it is an ordinary record.
    """
    if not logger.isEnabledFor(level):
        return
    try:
        line = msgspec.json.encode(document)
    except UnicodeEncodeError:
        # A lone surrogate (from a hostile body, quoted in a message) has no UTF-8: escape it.
        line = json.dumps(document, separators=(",", ":")).encode()
    handlers = logger.handlers
    if (
        len(handlers) == 1
        and type(handler := handlers[0]) is JsonLinesHandler
        and not logger.propagate
        and not logger.filters
        and not handler.filters
        and level >= handler.level
    ):
        handler.write_soon(line)
    else:
        logger.log(level, line.decode())


def configure_logging(level: str) -> None:
    """Logging as ``ledger serve`` does it, on the root logger and the JSON loggers."""
    # Delivery lines on "ledger.http" and operator lines on "ledger.operator" are already JSON
    # (with their own "ts"): print them bare, one per line, so that a log shipper can parse them;
    # everything else gets an ISO-8601 UTC timestamp and a level.
    root = logging.getLogger()
    root.handlers[:] = [plain_handler()]
    root.setLevel(level)
    bare = JsonLinesHandler()
    for name in JSON_LOGGERS:
        json_log = logging.getLogger(name)
        json_log.handlers[:] = [bare]
        json_log.propagate = False
    # Alembic narrates every start-up migration check at INFO; only its warnings matter here.
    logging.getLogger("alembic").setLevel(logging.WARNING)
