"""Open holds: their JSON, text and CSV shapes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .amounts import amount_text, timestamp_text

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class HoldView:
    """An open hold: a placed bet not yet settled or refunded, and whether it is stale."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: Decimal
    rake: Decimal
    funding: str
    placed_at: datetime
    stale: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "user": self.user,
            "pool_uid": self.pool_uid,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "rake": amount_text(self.rake),
            "funding": self.funding,
            "placed_at": timestamp_text(self.placed_at),
            "stale": self.stale,
        }


HOLD_COLUMNS = (
    "uid",
    "user",
    "pool_uid",
    "currency",
    "amount",
    "rake",
    "funding",
    "placed_at",
    "stale",
)


"""The columns of the holds' CSV export, in order."""


def holds_dict(holds: Sequence[HoldView], next_cursor: str | None) -> dict[str, Any]:
    """``{"holds": [...], "next"}``: pass ``next`` as ``before`` for the next page."""
    return {"holds": [hold.to_dict() for hold in holds], "next": next_cursor}


def hold_text(hold: HoldView) -> str:
    stale = "  STALE" if hold.stale else ""
    return (
        f"{timestamp_text(hold.placed_at)}  bet {hold.uid}  user {hold.user}  pool "
        f"{hold.pool_uid}  {amount_text(hold.amount)} + rake {amount_text(hold.rake)} "
        f"{hold.currency} ({hold.funding}){stale}"
    )
