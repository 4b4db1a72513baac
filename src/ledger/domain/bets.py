"""A bet and its states: placed, then refunded or settled, once."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple


class BetState(StrEnum):
    PLACED = "placed"
    REFUNDED = "refunded"
    SETTLED = "settled"


class Funding(StrEnum):
    """Where a bet's hold came from, so that a refund returns it there."""

    CASH = "cash"  # the user's available balance
    TICKET = "ticket"  # the house, on behalf of a ticket
    FREE = "free"  # free-to-play: nothing held


class Entry(NamedTuple):
    """One entry of a Place Bet request, amounts already in minor units."""

    bet_uid: int
    user: str
    pool_uid: int
    currency: str
    amount: int
    rake: int
    ticket: str | None = None
    request_uuid: str | None = None

    @property
    def total(self) -> int:
        """What the entry costs: the contract charges the rake on top of the buy-in."""
        return self.amount + self.rake


class Bet(NamedTuple):
    """The ledger's record of one fantasy team entry."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: int
    rake: int
    funding: Funding
    state: BetState = BetState.PLACED
    payout: int | None = None
    payout_currency: str | None = None
    ticket: str | None = None
    request_uuid: str | None = None
    secrets: Mapping[str, Any] = MappingProxyType({})

    @property
    def total(self) -> int:
        return self.amount + self.rake
