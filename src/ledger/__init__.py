"""ledger: a double-entry wallet ledger for a fantasy-sports platform's wallet callbacks.

Embed it::

    import ledger

    with ledger.open_ledger("sqlite:///wallet.db") as book:
        book.deposit("u1", "EUR", "100.00", reference="topup-1")
        book.place_bets({"bets": [{"user": {"uid": "u1"}, "pool": {"uid": 7},
                                   "bet": {"uid": 1, "amount": 10, "rake": 1, "currency": "EUR"}}]})
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .contract import PlaceBetsRequest, RefundRequest, SettleRequest, parse_json
    from .currencies import CurrencyTable
    from .service import ClosedBets, Ledger, PlacedBets, open_ledger
    from .stores import CheckReport
    from .views import Balance, BetView, Movement, PoolReport, StatementLine

# The rest of the public API, each name imported from its module when first used: `import ledger`
# alone (as every `ledger` command does) then costs no SQLAlchemy, msgspec or iso4217 import.
_LAZY = {
    "PlaceBetsRequest": "contract",
    "RefundRequest": "contract",
    "SettleRequest": "contract",
    "parse_json": "contract",
    "CurrencyTable": "currencies",
    "ClosedBets": "service",
    "Ledger": "service",
    "PlacedBets": "service",
    "open_ledger": "service",
    "CheckReport": "stores",
    "Balance": "views",
    "BetView": "views",
    "Movement": "views",
    "PoolReport": "views",
    "StatementLine": "views",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
