"""Responsible-gambling limits and exclusions: the rules, over values (no database, no clock).

A limit caps, per user and currency, one kind of money over a rolling window ending now:

- ``deposit``: money deposited;
- ``stake``: what the user's own money puts into entries (``amount + rake`` of paid entries;
  ticket and free entries count 0);
- ``loss``: net loss, the stakes placed in the window minus the payouts credited and the stakes
  refunded in it. Winnings offset losses: a user up on the window has that much more room.

Windows (``day``, ``week``, ``month``) are 24 hours, 7 x 24 hours and 30 x 24 hours long and
hold what happened after ``now - length`` up to ``now``. Every limit set applies; the lowest
room decides.

Changes follow the regulators' rule (UKGC RTS 12; Germany's cross-operator deposit limit): a
first limit, or a lower one, applies at once; a higher one, or a removal, only after a cooling-off
period, during which the old limit applies and the pending change is visible and can be
cancelled. An exclusion (a time-out until an instant, or a self-exclusion, indefinite or until
an instant) stops entries and deposits, never withdrawals, refunds or payouts, and cannot be
shortened through the ordinary path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

__all__ = [
    "KINDS",
    "PERIODS",
    "Activity",
    "Exclusion",
    "Limit",
    "LimitKind",
    "LimitRefusal",
    "Period",
    "Use",
    "Window",
    "cancel_pending",
    "change",
    "first_refusal",
    "lengthen",
    "refusal",
    "used",
    "uses",
]

LimitKind = Literal["deposit", "stake", "loss"]
Period = Literal["day", "week", "month"]
KINDS: tuple[LimitKind, ...] = ("deposit", "stake", "loss")
PERIODS: dict[Period, timedelta] = {
    "day": timedelta(hours=24),
    "week": timedelta(days=7),
    "month": timedelta(days=30),
}


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit of one user in one currency: ``amount`` in force (minor units; ``None``: none
    in force), and a change that takes effect at ``pending_at`` (``pending`` the new amount,
    ``None`` the limit's removal)."""

    kind: LimitKind
    period: Period
    currency: str
    amount: int | None
    pending: int | None = None
    pending_at: datetime | None = None

    def in_force(self, now: datetime) -> int | None:
        """The amount that applies at ``now`` (``None``: no limit)."""
        if self.pending_at is not None and self.pending_at <= now:
            return self.pending
        return self.amount

    def settled(self, now: datetime) -> Limit:
        """The same limit with a pending change that took effect by ``now`` applied."""
        if self.pending_at is None or self.pending_at > now:
            return self
        return replace(self, amount=self.pending, pending=None, pending_at=None)


def change(
    limit: Limit | None,
    kind: LimitKind,
    period: Period,
    currency: str,
    amount: int | None,
    now: datetime,
    cooling_off: timedelta,
) -> Limit:
    """``limit`` (``None``: never set) after a request to make it ``amount`` (``None``: remove
    it) at ``now``. A first or lower limit applies at once and cancels what was pending; a
    higher one, or a removal, waits ``cooling_off`` with the old one in force meanwhile."""
    if amount is not None and amount < 0:
        raise ValueError("a limit is zero or more")
    current = None if limit is None else limit.settled(now).amount
    if current is not None and (amount is None or amount > current):
        return Limit(kind, period, currency, current, amount, now + cooling_off)
    return Limit(kind, period, currency, amount)


def cancel_pending(limit: Limit, now: datetime) -> Limit:
    """``limit`` without its pending change, if that has not taken effect yet."""
    return replace(limit.settled(now), pending=None, pending_at=None)


class Activity(NamedTuple):
    """What moved a user's money in one currency at one instant, in minor units: deposited,
    staked (own money into entries), and returned (payouts credited, stakes refunded)."""

    at: datetime
    deposit: int = 0
    stake: int = 0
    returned: int = 0


class Use(NamedTuple):
    """What one window holds, summed: deposited, staked, returned (minor units)."""

    deposit: int = 0
    stake: int = 0
    returned: int = 0

    def plus(self, other: Use | Activity) -> Use:
        return Use(
            self.deposit + other.deposit, self.stake + other.stake, self.returned + other.returned
        )

    def of(self, kind: LimitKind) -> int:
        """How much of a ``kind`` limit this use is."""
        return _weight(kind, self)


def _weight(kind: LimitKind, item: Activity | Use) -> int:
    if kind == "deposit":
        return item.deposit
    if kind == "stake":
        return item.stake
    return item.stake - item.returned


def used(kind: LimitKind, activity: Iterable[Activity], since: datetime) -> int:
    """How much of a ``kind`` limit the activity after ``since`` has used."""
    return sum(_weight(kind, item) for item in activity if item.at > since)


def uses(activity: Iterable[Activity], now: datetime) -> dict[Period, Use]:
    """What each period's window ending at ``now`` holds of ``activity``."""
    found = {period: Use() for period in PERIODS}
    for item in activity:
        for period, length in PERIODS.items():
            if item.at > now - length:
                found[period] = found[period].plus(item)
    return found


# The activity in a period's window ending now (read only to say when a refused request fits).
Window = Callable[[Period], Iterable[Activity]]


class LimitRefusal(NamedTuple):
    """Why a deposit or an entry is refused: the limit it would pass, what the window has used,
    what was asked, and when the window frees enough room (``None``: never, the request alone
    is beyond the limit)."""

    kind: LimitKind
    period: Period
    limit: int
    used: int
    asked: int
    frees_at: datetime | None

    def message(self, currency: str) -> str:
        when = (
            "the request alone is beyond it"
            if self.frees_at is None
            else f"enough room from {self.frees_at.isoformat()}"
        )
        return (
            f"{self.kind} limit per {self.period} of {self.limit} {currency} (minor units) "
            f"reached: {self.used} used, {self.asked} asked; {when}"
        )


def first_refusal(
    limits: Sequence[Limit],
    activity: Sequence[Activity],
    now: datetime,
    *,
    deposit: int = 0,
    stake: int = 0,
) -> LimitRefusal | None:
    """:func:`refusal` over the ``activity`` so far (at least the longest window's)."""

    def window(period: Period) -> list[Activity]:
        return [item for item in activity if item.at > now - PERIODS[period]]

    return refusal(limits, uses(activity, now), window, now, deposit=deposit, stake=stake)


def refusal(
    limits: Sequence[Limit],
    use: Mapping[Period, Use],
    window: Window,
    now: datetime,
    *,
    deposit: int = 0,
    stake: int = 0,
) -> LimitRefusal | None:
    """The first limit in force at ``now`` that a deposit of ``deposit`` or an entry staking
    ``stake`` would pass, given what each period's window holds (``use``); ``None`` when every
    limit leaves room. ``limits`` is checked in order, so callers list them in the order a
    refusal should name them; ``window`` is read only for a refusal, to say when it fits."""
    asked = Activity(now, deposit=deposit, stake=stake)
    for limit in limits:
        amount = limit.in_force(now)
        if amount is None:
            continue
        weight = _weight(limit.kind, asked)
        if weight <= 0:
            continue  # this request uses none of this limit
        so_far = use.get(limit.period, Use()).of(limit.kind)
        if so_far + weight <= amount:
            continue
        length = PERIODS[limit.period]
        held = sorted((item for item in window(limit.period) if item.at > now - length), key=_at)
        return LimitRefusal(
            limit.kind,
            limit.period,
            amount,
            so_far,
            weight,
            _frees_at(limit.kind, held, so_far, weight, amount, length),
        )
    return None


def _at(item: Activity) -> datetime:
    return item.at


def _frees_at(
    kind: LimitKind,
    window: Sequence[Activity],
    so_far: int,
    weight: int,
    amount: int,
    length: timedelta,
) -> datetime | None:
    """The first instant at which, with nothing new happening, what stays in the window leaves
    room for ``weight``: each item leaves the window ``length`` after it happened."""
    if weight > amount:
        return None
    remaining = so_far
    for index, item in enumerate(window):
        remaining -= _weight(kind, item)
        # Items of the same instant leave together.
        if index + 1 < len(window) and window[index + 1].at == item.at:
            continue
        if remaining + weight <= amount:
            return item.at + length
    return None  # unreachable: with the window empty, weight <= amount leaves room


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A time-out or self-exclusion from ``starts_at`` until ``until`` (``None``: indefinite)."""

    starts_at: datetime
    until: datetime | None
    reason: str

    def active(self, now: datetime) -> bool:
        return self.starts_at <= now and (self.until is None or now < self.until)


def lengthen(current: Exclusion | None, asked: Exclusion, now: datetime) -> Exclusion:
    """The exclusion in force after ``asked`` at ``now``: an active exclusion can only be made
    longer this way (lifting or shortening one is an administrator's act, recorded apart)."""
    if current is None or not current.active(now):
        return asked
    if current.until is None:
        return current
    if asked.until is None or asked.until > current.until:
        return Exclusion(current.starts_at, asked.until, asked.reason)
    return current
