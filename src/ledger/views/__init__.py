"""How the ledger shows its books: the JSON (dict) and text shapes of balances, statements, bets,
movements and reports, shared by the ``ledger`` command and the operator API.

Every amount is rendered here, by :func:`amount_text`: a plain decimal string carrying exactly the
digits of its currency's scale (``"0.00000001"`` and ``"0.00000000"`` for an 8-decimal coin,
never ``"1E-8"`` or ``"0E-8"``). Every timestamp is ISO 8601 in UTC.

Standard library only.
"""

from __future__ import annotations

from .amounts import amount_text, timestamp_text
from .balances import (
    STATEMENT_COLUMNS,
    Balance,
    Movement,
    StatementLine,
    balance_lines,
    balances_at_dict,
    balances_dict,
    movement_text,
    statement_dict,
    statement_line_text,
)
from .bets import BET_COLUMNS, BetPosting, BetView, bet_row_text, bet_text
from .deliveries import DELIVERY_COLUMNS, deliveries_dict, delivery_dict, delivery_text
from .directory import (
    TOURNAMENT_COLUMNS,
    USER_COLUMNS,
    TournamentView,
    UserView,
    tournament_lines,
    tournament_row_text,
    user_lines,
    user_row_text,
)
from .holds import HOLD_COLUMNS, HoldView, hold_text, holds_dict
from .reports import (
    HOUSE_FIELDS,
    HourActivity,
    HouseReport,
    PoolReport,
    check_dict,
    check_lines,
    house_lines,
)

__all__ = [
    "BET_COLUMNS",
    "DELIVERY_COLUMNS",
    "HOLD_COLUMNS",
    "HOUSE_FIELDS",
    "STATEMENT_COLUMNS",
    "TOURNAMENT_COLUMNS",
    "USER_COLUMNS",
    "Balance",
    "BetPosting",
    "BetView",
    "HoldView",
    "HourActivity",
    "HouseReport",
    "Movement",
    "PoolReport",
    "StatementLine",
    "TournamentView",
    "UserView",
    "amount_text",
    "balance_lines",
    "balances_at_dict",
    "balances_dict",
    "bet_row_text",
    "bet_text",
    "check_dict",
    "check_lines",
    "deliveries_dict",
    "delivery_dict",
    "delivery_text",
    "hold_text",
    "holds_dict",
    "house_lines",
    "movement_text",
    "statement_dict",
    "statement_line_text",
    "timestamp_text",
    "tournament_lines",
    "tournament_row_text",
    "user_lines",
    "user_row_text",
]
