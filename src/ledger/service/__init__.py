"""Use cases: the embedded ledger API over one store (:class:`Ledger`, :func:`open_ledger`)."""

from __future__ import annotations

from ..domain import ClosedBets, PlacedBets
from .feed import EVENT_POLL, EVENT_TICK
from .ledger import Ledger, open_ledger
from .params import parse_instant, timestamp_key

__all__ = [
    "EVENT_POLL",
    "EVENT_TICK",
    "ClosedBets",
    "Ledger",
    "PlacedBets",
    "open_ledger",
    "parse_instant",
    "timestamp_key",
]
