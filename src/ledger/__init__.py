"""ledger: a double-entry wallet ledger for a fantasy-sports platform's wallet callbacks.

Embed it::

    import ledger

    with ledger.open_ledger("sqlite:///wallet.db") as book:
        book.deposit("u1", "EUR", "100.00", reference="topup-1")
        book.place_bets({"bets": [{"user": {"uid": "u1"}, "pool": {"uid": 7},
                                   "bet": {"uid": 1, "amount": 10, "rake": 1, "currency": "EUR"}}]})
"""

from __future__ import annotations

from .contract import PlaceBetsRequest, RefundRequest, SettleRequest, parse_json
from .currencies import CurrencyTable
from .errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    CapacityExceeded,
    Forbidden,
    InsufficientFunds,
    InvalidAmount,
    InvalidRequest,
    LedgerError,
    PayloadTooLarge,
    ReferenceConflict,
    SchemaNotReady,
    StoreBusy,
    StoreUnavailable,
    Unauthorized,
    UnknownCurrency,
)
from .service import ClosedBets, Ledger, PlacedBets, open_ledger
from .stores import CheckReport
from .views import Balance, BetView, Movement, PoolReport, StatementLine

__all__ = [
    "Balance",
    "BetAlreadyRefunded",
    "BetAlreadySettled",
    "BetConflict",
    "BetNotFound",
    "BetView",
    "CapacityExceeded",
    "CheckReport",
    "ClosedBets",
    "CurrencyTable",
    "Forbidden",
    "InsufficientFunds",
    "InvalidAmount",
    "InvalidRequest",
    "Ledger",
    "LedgerError",
    "Movement",
    "PayloadTooLarge",
    "PlaceBetsRequest",
    "PlacedBets",
    "PoolReport",
    "ReferenceConflict",
    "RefundRequest",
    "SchemaNotReady",
    "SettleRequest",
    "StatementLine",
    "StoreBusy",
    "StoreUnavailable",
    "Unauthorized",
    "UnknownCurrency",
    "open_ledger",
    "parse_json",
]
