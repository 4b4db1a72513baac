"""Reads: the state the write path decides on (bets, transactions, balances) and the reports.

Plain functions over an open connection; the unit of work (:mod:`.sql`) calls them inside its
transaction and translates driver errors. Amounts come back as Python integers of the minor unit
whatever the column holds them as (see :class:`ledger.stores.schema.Amount`).
"""

from __future__ import annotations

from .accounts import balances, balances_at, statement
from .bets import (
    BET_SELECT,
    RECORD_BATCH,
    account_balances,
    bet_records,
    bets_and_balances,
    get_bets,
    get_transaction,
)
from .open_holds import count_stale_holds, holds
from .reports import hourly_totals, house_totals, pool_totals

__all__ = [
    "BET_SELECT",
    "RECORD_BATCH",
    "account_balances",
    "balances",
    "balances_at",
    "bet_records",
    "bets_and_balances",
    "count_stale_holds",
    "get_bets",
    "get_transaction",
    "holds",
    "hourly_totals",
    "house_totals",
    "pool_totals",
    "statement",
]
