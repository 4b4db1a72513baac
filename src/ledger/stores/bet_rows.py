"""Bets as rows: a new bet's row and its open hold, a closed bet's new state.

Invariant: rows are written in bet uid order, so concurrent writers meet unique-index entries in
the same order; a close that changes fewer rows than it names lost a race to another writer and
is a :class:`~ledger.stores.base.Retry`, never a partial close. A bet's secrets are stored as the
text ``json.dumps`` writes (``tests/stores/test_sqlite_text_forms.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from json.encoder import encode_basestring_ascii
from typing import Any

from sqlalchemy import Connection

from ..domain import Bet, BetState
from .base import Retry
from .chain_tables import bet_closes
from .dialect import Dialect
from .schema import bets, open_bets

__all__ = ["BET_COLUMNS", "add_bets", "close_bets", "json_object"]

BET_COLUMNS = (
    "uid",
    "user_uid",
    "pool_uid",
    "currency",
    "amount",
    "rake",
    "funding",
    "state",
    "payout",
    "payout_currency",
    "ticket",
    "request_uuid",
    "secrets",
    "placed_at",
    "placed_grp",
)


def add_bets(
    connection: Connection, dialect: Dialect, new_bets: Sequence[Bet], at: datetime, grp: int
) -> None:
    """Write ``new_bets``, placed ``at`` by commit ``grp`` (:mod:`ledger.stores.chain`); those
    still placed are open holds until closed."""
    now = dialect.timestamp(at)
    # Bets of one request share their secrets: serialise them once, not once per bet.
    dumped: dict[int, str] = {}
    rows = []
    # Sorted, so concurrent writers meet unique-index entries in the same order.
    for bet in sorted(new_bets, key=lambda bet: bet.uid):
        secrets = dumped.get(id(bet.secrets))
        if secrets is None:
            secrets = dumped[id(bet.secrets)] = json_object(bet.secrets)
        rows.append(
            (
                bet.uid,
                bet.user,
                bet.pool_uid,
                bet.currency,
                bet.amount,
                bet.rake,
                bet.funding._value_,  # what .value reads, without the enum's descriptor
                bet.state._value_,
                bet.payout,
                bet.payout_currency,
                bet.ticket,
                bet.request_uuid,
                secrets,
                now,
                grp,
            )
        )
    # A new bet is open until its close removes its row from open_bets (the open holds).
    open_rows = [(bet.uid, now) for bet in new_bets if bet.state is BetState.PLACED]
    dialect.insert_rows(connection, bets, BET_COLUMNS, rows)
    dialect.insert_rows(connection, open_bets, ("uid", "placed_at"), open_rows)


def close_bets(
    connection: Connection, dialect: Dialect, closed: Sequence[Bet], at: datetime, grp: int
) -> None:
    """Write the new state of each of ``closed``, closed ``at`` by commit ``grp``."""
    now = dialect.timestamp(at)
    rows = [
        (bet.state.value, bet.payout, bet.payout_currency, now, grp, bet.uid)
        for bet in sorted(closed, key=lambda bet: bet.uid)
    ]
    changed = dialect.close_bet_rows(connection, rows)
    if changed != len(rows):
        # Another writer closed one of these bets after we read it (Postgres, READ
        # COMMITTED): run the request again so that it sees that bet's new state.
        raise Retry(f"{len(rows) - changed} bet(s) were closed by a concurrent request")
    dialect.insert_rows(connection, bet_closes, ("grp", "uid"), [(grp, row[-1]) for row in rows])


def json_object(secrets: Mapping[str, Any]) -> str:
    """``json.dumps(dict(secrets))``, the same text: a bet's secrets are almost always a few
    strings (a Place Bet's own, its reference), which this quotes with json's own function,
    without the encoder object json.dumps builds on each call (0.4 against 1.6 us a bet)."""
    if all(key.__class__ is str and value.__class__ is str for key, value in secrets.items()):
        quote = encode_basestring_ascii
        return (
            "{"
            + ", ".join([f"{quote(key)}: {quote(value)}" for key, value in secrets.items()])
            + "}"
        )
    return json.dumps(dict(secrets))
