"""Balances, movements and statement lines: their JSON, text and CSV shapes."""

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
class Balance:
    """A user's money in one currency: ``available`` to spend, ``held`` for open entries."""

    currency: str
    available: Decimal
    held: Decimal

    def to_dict(self) -> dict[str, str]:
        return {
            "currency": self.currency,
            "available": amount_text(self.available),
            "held": amount_text(self.held),
        }


@dataclass(frozen=True, slots=True)
class StatementLine:
    """One movement on a user's available or held balance."""

    id: int
    created_at: datetime
    account: str
    currency: str
    amount: Decimal
    kind: str
    bet_uid: int | None
    reference: str | None
    transaction_id: int
    # The account's (available or held) balance after this line; pool of the line's bet.
    balance_after: Decimal | None = None
    pool_uid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": timestamp_text(self.created_at),
            "account": self.account,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "kind": self.kind,
            "bet_uid": self.bet_uid,
            "reference": self.reference,
            "transaction_id": self.transaction_id,
            "balance_after": None
            if self.balance_after is None
            else amount_text(self.balance_after),
            "pool_uid": self.pool_uid,
        }


STATEMENT_COLUMNS = (
    "id",
    "created_at",
    "account",
    "currency",
    "amount",
    "balance_after",
    "kind",
    "bet_uid",
    "pool_uid",
    "reference",
    "transaction_id",
)


"""The columns of a statement's CSV export, in order."""


@dataclass(frozen=True, slots=True)
class Movement:
    """A deposit or withdrawal; ``applied`` is false for an idempotent re-send."""

    reference: str
    user: str
    currency: str
    amount: Decimal
    applied: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "user": self.user,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "applied": self.applied,
        }


def balances_dict(user: str, balances: Sequence[Balance]) -> dict[str, Any]:
    """``{"user", "balances": [{"currency", "available", "held"}]}``."""
    return {"user": user, "balances": [balance.to_dict() for balance in balances]}


def statement_dict(
    user: str, lines: Sequence[StatementLine], next_cursor: str | None
) -> dict[str, Any]:
    """``{"user", "lines": [...], "next", "next_before"}``: pass ``next`` (the opaque cursor) or
    ``next_before`` (the last line's id, the older form) as ``before`` for the next page; both
    are ``null`` on the last page."""
    return {
        "user": user,
        "lines": [line.to_dict() for line in lines],
        "next": next_cursor,
        "next_before": lines[-1].id if next_cursor is not None and lines else None,
    }


def balances_at_dict(user: str, at: datetime, balances: Sequence[Balance]) -> dict[str, Any]:
    """``{"user", "at", "balances": [...]}``: the balances at that moment."""
    return {
        "user": user,
        "at": timestamp_text(at),
        "balances": [balance.to_dict() for balance in balances],
    }


def movement_text(kind: str, movement: Movement) -> str:
    state = "applied" if movement.applied else "already applied (nothing done)"
    return (
        f"{kind} {movement.reference}: {amount_text(movement.amount)} {movement.currency} "
        f"for {movement.user} {state}"
    )


def balance_lines(user: str, balances: Sequence[Balance]) -> list[str]:
    if not balances:
        return [f"{user} has no balances"]
    return [
        f"{item.currency}  available {amount_text(item.available)}  held {amount_text(item.held)}"
        for item in balances
    ]


def statement_line_text(line: StatementLine) -> str:
    subject = f"bet {line.bet_uid}" if line.bet_uid is not None else line.reference or ""
    if line.pool_uid is not None:
        subject += f" pool {line.pool_uid}"
    after = "" if line.balance_after is None else f" -> {amount_text(line.balance_after):>14}"
    return (
        f"{line.created_at:%Y-%m-%d %H:%M:%S}  {line.kind:<10} {line.account:<9} "
        f"{amount_text(line.amount):>14}{after} {line.currency}  {subject}"
    )
