"""Tournaments and users as the platform described them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .amounts import _stamp, or_dash, timestamp_text
from .balances import Balance, balance_lines
from .reports import PoolReport

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class TournamentView:
    """A tournament as the platform described it, with its entries per state; the single view
    adds the report per currency (:class:`PoolReport`)."""

    uid: int
    name: str | None
    currency: str | None
    category: str | None
    game_type: str | None
    status: str | None
    estimated_end_time: datetime | None
    first_seen: datetime
    last_seen: datetime
    entries: Mapping[str, int]
    report: PoolReport | None = None

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "uid": self.uid,
            "name": self.name,
            "currency": self.currency,
            "category": self.category,
            "game_type": self.game_type,
            "status": self.status,
            "estimated_end_time": _stamp(self.estimated_end_time),
            "first_seen": timestamp_text(self.first_seen),
            "last_seen": timestamp_text(self.last_seen),
            "entries": dict(self.entries),
        }
        if self.report is not None:
            answer["currencies"] = self.report.currencies
        return answer


@dataclass(frozen=True, slots=True)
class UserView:
    """A user as the platform described it (nothing, for one known by a deposit only); the
    single view adds the balances."""

    uid: str
    name: str | None
    client: str | None
    first_seen: datetime | None
    last_seen: datetime | None
    balances: Sequence[Balance] | None = None

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "uid": self.uid,
            "name": self.name,
            "client": self.client,
            "first_seen": _stamp(self.first_seen),
            "last_seen": _stamp(self.last_seen),
        }
        if self.balances is not None:
            answer["balances"] = [balance.to_dict() for balance in self.balances]
        return answer


# CSV columns of each export: the list item's JSON keys, nested values as JSON text.
TOURNAMENT_COLUMNS = (
    "uid",
    "name",
    "currency",
    "category",
    "game_type",
    "status",
    "estimated_end_time",
    "first_seen",
    "last_seen",
    "entries",
)


USER_COLUMNS = ("uid", "name", "client", "first_seen", "last_seen")


def tournament_row_text(item: TournamentView) -> str:
    entries = ", ".join(f"{state} {count}" for state, count in item.entries.items()) or "none"
    return (
        f"{item.uid}  {or_dash(item.name)}  {or_dash(item.currency)}  "
        f"status {or_dash(item.status)}  entries: {entries}"
    )


def tournament_lines(item: TournamentView) -> list[str]:
    lines = [
        f"tournament {item.uid}: {or_dash(item.name)}",
        f"  currency {or_dash(item.currency)}, category {or_dash(item.category)}, "
        f"game type {or_dash(item.game_type)}, status {or_dash(item.status)}",
        f"  estimated end {or_dash(_stamp(item.estimated_end_time))}",
        f"  first seen {timestamp_text(item.first_seen)}, "
        f"last seen {timestamp_text(item.last_seen)}",
    ]
    for found in item.report.currencies if item.report is not None else []:
        states = ", ".join(f"{state} {count}" for state, count in found["by_state"].items())
        payouts = ", ".join(f"{amount} {cur}" for cur, amount in found["payouts"].items())
        lines.append(
            f"  {found['currency']}: {found['entries']} entries ({states}), stakes "
            f"{found['stakes']}, rake {found['rake']}, payouts {payouts or 'none'}, "
            f"open holds {found['open_holds']}"
        )
    return lines


def user_row_text(item: UserView) -> str:
    return (
        f"{item.uid}  {or_dash(item.name)}  client {or_dash(item.client)}  "
        f"last seen {or_dash(_stamp(item.last_seen))}"
    )


def user_lines(item: UserView) -> list[str]:
    lines = [
        f"user {item.uid}: {or_dash(item.name)}, client {or_dash(item.client)}",
        f"  first seen {or_dash(_stamp(item.first_seen))}, "
        f"last seen {or_dash(_stamp(item.last_seen))}",
    ]
    lines += [f"  {line}" for line in balance_lines(item.uid, item.balances or [])]
    return lines
