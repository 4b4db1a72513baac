"""A bet with its postings and deliveries, and the bets list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .amounts import amount_text, timestamp_text

if TYPE_CHECKING:
    from ..deliveries import DeliveryRecord


@dataclass(frozen=True, slots=True)
class BetView:
    """A bet as the ledger recorded it, amounts as exact decimals, with when it was placed and
    closed (refunded or settled; ``None`` while it is open)."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: Decimal
    rake: Decimal
    funding: str
    state: str
    payout: Decimal | None
    payout_currency: str | None
    secrets: Mapping[str, Any]
    placed_at: datetime | None = None
    closed_at: datetime | None = None
    # The deliveries that named the bet (journal rows), newest first.
    deliveries: Sequence[DeliveryRecord] = ()
    # The names the platform gave the user and the tournament (ledger.directory), and the
    # bet's legs on the user's accounts: filled by the single-bet view, not by lists.
    user_name: str | None = None
    pool_name: str | None = None
    postings: Sequence[BetPosting] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "user": self.user,
            "pool_uid": self.pool_uid,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "rake": amount_text(self.rake),
            "funding": self.funding,
            "state": self.state,
            "payout": None if self.payout is None else amount_text(self.payout),
            "payout_currency": self.payout_currency,
            "secrets": dict(self.secrets),
            "placed_at": None if self.placed_at is None else timestamp_text(self.placed_at),
            "closed_at": None if self.closed_at is None else timestamp_text(self.closed_at),
            "deliveries": [
                {
                    "request_id": item.request_id,
                    "event": item.event,
                    "status": item.status,
                    "error": item.error,
                    "received_at": timestamp_text(item.received_at),
                }
                for item in self.deliveries
            ],
            "user_name": self.user_name,
            "pool_name": self.pool_name,
            **(
                {}
                if self.postings is None
                else {"postings": [posting.to_dict() for posting in self.postings]}
            ),
        }


@dataclass(frozen=True, slots=True)
class BetPosting:
    """One leg of a bet on its user's available or held balance."""

    id: int
    created_at: datetime
    account: str
    currency: str
    amount: Decimal
    kind: str
    reference: str | None
    transaction_id: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": timestamp_text(self.created_at),
            "account": self.account,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "kind": self.kind,
            "reference": self.reference,
            "transaction_id": self.transaction_id,
        }


def bet_text(bet: BetView) -> str:
    payout = (
        f", payout {amount_text(bet.payout)} {bet.payout_currency}"
        if bet.payout is not None
        else ""
    )
    placed = f", placed {timestamp_text(bet.placed_at)}" if bet.placed_at is not None else ""
    closed = f", closed {timestamp_text(bet.closed_at)}" if bet.closed_at is not None else ""
    user = f"{bet.user} ({bet.user_name})" if bet.user_name else bet.user
    pool = f"{bet.pool_uid} ({bet.pool_name})" if bet.pool_name else str(bet.pool_uid)
    text = (
        f"bet {bet.uid}: {bet.state}, user {user}, pool {pool}, "
        f"{amount_text(bet.amount)} + rake {amount_text(bet.rake)} {bet.currency} "
        f"({bet.funding}){payout}{placed}{closed}"
    )
    legs = [
        f"\n  {timestamp_text(leg.created_at)}  {leg.kind:<10} {leg.account:<9} "
        f"{amount_text(leg.amount):>14} {leg.currency}"
        for leg in bet.postings or []
    ]
    named = [
        f"\n  delivery {item.request_id or '-'} {item.event} {item.status}"
        f"{' ' + item.error if item.error else ''} at {timestamp_text(item.received_at)}"
        for item in bet.deliveries
    ]
    return text + "".join(legs) + "".join(named)


BET_COLUMNS = (
    "uid",
    "user",
    "user_name",
    "pool_uid",
    "pool_name",
    "currency",
    "amount",
    "rake",
    "funding",
    "state",
    "payout",
    "payout_currency",
    "placed_at",
    "closed_at",
)


def bet_row_text(bet: BetView) -> str:
    payout = "" if bet.payout is None else f"  payout {amount_text(bet.payout)}"
    return (
        f"{bet.uid}  {bet.state:<8}  user {bet.user}  pool {bet.pool_uid}  "
        f"{amount_text(bet.amount)} + {amount_text(bet.rake)} {bet.currency}{payout}"
    )
