"""Logging as ``ledger serve`` configures it, into a stream of the test's, put back afterwards."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from ledger.http.logs import JSON_LOGGERS, configure_logging

S = TypeVar("S", bound=io.StringIO)


@contextmanager
def served_logging(stream: S) -> Iterator[S]:
    loggers = [logging.getLogger(name) for name in ("", *JSON_LOGGERS)]
    saved = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    configure_logging("INFO")
    for logger in loggers:
        for handler in logger.handlers:
            assert isinstance(handler, logging.StreamHandler)
            handler.setStream(stream)
    try:
        yield stream
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
