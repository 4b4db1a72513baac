"""The pure core: accounts, postings, balanced transactions and the bet lifecycle.

Functions here take values and return values (postings, transactions, bet records); they never do
I/O. The service layer loads the current state through a unit of work, asks these functions what
to do, and writes what they return. Every outcome of the idempotency table (DESIGN section 5) is
decided here, in one place.

Amounts are integers of the currency's minor unit. Standard library only.
"""

from __future__ import annotations

from .accounts import (
    HELD_SUFFIX,
    HOUSE_CASH,
    HOUSE_ENTRIES,
    HOUSE_PREFIX,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
    account_kind,
    held_account,
    is_house,
    user_account,
)
from .bets import Bet, BetState, Entry, Funding
from .closing import (
    ClosedBets,
    CloseDecision,
    RefundItem,
    SettleClaim,
    SettleItem,
    echo_notes,
    refund,
    refund_many,
    refund_notes,
    settle,
    settle_many,
)
from .journal import Posting, Replay, Transaction, TxnKind, residual, transfer
from .limit_gate import Gate, user_credits
from .movements import deposit, movement, movement_keys, withdrawal
from .placing import (
    PlacedBets,
    PlaceDecision,
    PlaceRequest,
    debited_accounts,
    held_accounts,
    merge_placements,
    place,
    place_many,
)

__all__ = [
    "HELD_SUFFIX",
    "HOUSE_CASH",
    "HOUSE_ENTRIES",
    "HOUSE_PREFIX",
    "HOUSE_PRIZES",
    "HOUSE_RAKE",
    "HOUSE_TICKETS",
    "Bet",
    "BetState",
    "CloseDecision",
    "ClosedBets",
    "Entry",
    "Funding",
    "Gate",
    "PlaceDecision",
    "PlaceRequest",
    "PlacedBets",
    "Posting",
    "RefundItem",
    "Replay",
    "SettleClaim",
    "SettleItem",
    "Transaction",
    "TxnKind",
    "account_kind",
    "debited_accounts",
    "deposit",
    "echo_notes",
    "held_account",
    "held_accounts",
    "is_house",
    "merge_placements",
    "movement",
    "movement_keys",
    "place",
    "place_many",
    "refund",
    "refund_many",
    "refund_notes",
    "residual",
    "settle",
    "settle_many",
    "transfer",
    "user_account",
    "user_credits",
    "withdrawal",
]
