"""Responsible-gambling limits and exclusions as shown: their JSON and text shapes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from .amounts import amount_text, timestamp_text

__all__ = ["ExclusionView", "LimitView", "exclusion_text", "limit_text"]


def _amount(value: Decimal | None) -> str | None:
    return None if value is None else amount_text(value)


def _moment(value: datetime | None) -> str | None:
    return None if value is None else timestamp_text(value)


@dataclass(frozen=True, slots=True)
class LimitView:
    """One limit: the amount in force (``None``: none, a removal took effect), what its window
    has used and the room left, and a pending change (``pending`` ``None`` with ``pending_at``
    set: the limit's removal) that takes effect at ``pending_at``."""

    currency: str
    kind: str
    period: str
    amount: Decimal | None
    used: Decimal
    room: Decimal | None
    pending: Decimal | None
    pending_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "kind": self.kind,
            "period": self.period,
            "amount": _amount(self.amount),
            "used": amount_text(self.used),
            "room": _amount(self.room),
            "pending": None
            if self.pending_at is None
            else {"amount": _amount(self.pending), "effective_at": _moment(self.pending_at)},
        }


@dataclass(frozen=True, slots=True)
class ExclusionView:
    """A time-out or self-exclusion: from, until (``None``: indefinite), why, who asked, and
    whether it is in force now."""

    starts_at: datetime
    until: datetime | None
    reason: str
    by: str
    active: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "starts_at": timestamp_text(self.starts_at),
            "until": _moment(self.until),
            "reason": self.reason,
            "by": self.by,
            "active": self.active,
        }


def limit_text(view: LimitView) -> str:
    amount = "none" if view.amount is None else amount_text(view.amount)
    room = "-" if view.room is None else amount_text(view.room)
    line = (
        f"{view.currency} {view.kind}/{view.period}: {amount} "
        f"(used {amount_text(view.used)}, room {room})"
    )
    if view.pending_at is not None:
        pending = "removal" if view.pending is None else amount_text(view.pending)
        line += f"; pending {pending} from {timestamp_text(view.pending_at)}"
    return line


def exclusion_text(view: ExclusionView) -> str:
    until = "indefinitely" if view.until is None else f"until {timestamp_text(view.until)}"
    state = "in force" if view.active else "ended"
    return f"excluded from {timestamp_text(view.starts_at)} {until} ({state}): {view.reason}"
