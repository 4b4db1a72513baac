"""Responsible-gambling limits changed and exclusions taken: each a command, applied by the
writer in one unit of work like every other write, after locking the user's limit state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .. import events
from ..domain.limits import Exclusion, Limit, LimitKind, Period, cancel_pending, change, lengthen
from ..errors import InvalidRequest
from ..stores import UnitOfWork
from ..writer.port import Single

__all__ = ["CancelPendingLimit", "Exclude", "LiftExclusion", "PruneLimitActivity", "SetLimit"]


def _current(uow: UnitOfWork, user: str, currency: str, kind: str, period: str) -> Limit | None:
    for found in uow.limits.user_limits(user):
        if (found.currency, found.kind, found.period) == (currency, kind, period):
            return found
    return None


@dataclass(frozen=True, slots=True)
class SetLimit(Single):
    """Set (``amount``) or remove (``None``) one limit: a first or lower one at once, a higher
    one or a removal after ``cooling_off``. Answers the limit as it now stands."""

    user: str
    currency: str
    kind: LimitKind
    period: Period
    amount: int | None
    by: str
    cooling_off: timedelta
    reason: str | None = None
    size: int = 1

    def apply(self, uow: UnitOfWork) -> Limit:
        limits = uow.limits
        limits.mark_limited(self.user)
        now = limits.clock()
        current = _current(uow, self.user, self.currency, self.kind, self.period)
        if current is None and self.amount is None:
            # Nothing to remove.
            return Limit(self.kind, self.period, self.currency, None)
        new = change(
            current, self.kind, self.period, self.currency, self.amount, now, self.cooling_off
        )
        limits.save_limit(self.user, (new, current, self.by, self.reason), new.pending_at or now)
        effective = None if new.pending_at is None else new.pending_at.isoformat()
        uow.append_events(
            [
                events.limit_row(
                    self.user, self.currency, self.kind, self.period, self.amount, effective
                )
            ]
        )
        return new


@dataclass(frozen=True, slots=True)
class CancelPendingLimit(Single):
    """Cancel a limit's pending increase or removal (the user's right during cooling-off)."""

    user: str
    currency: str
    kind: LimitKind
    period: Period
    by: str
    size: int = 1

    def apply(self, uow: UnitOfWork) -> Limit | None:
        limits = uow.limits
        limits.mark_limited(self.user)
        now = limits.clock()
        current = _current(uow, self.user, self.currency, self.kind, self.period)
        if current is None:
            return None
        if current.pending_at is None or current.pending_at <= now:
            return current.settled(now)
        kept = cancel_pending(current, now)
        limits.save_limit(self.user, (kept, current, self.by, "pending change cancelled"), now)
        uow.append_events(
            [events.limit_row(self.user, self.currency, self.kind, self.period, kept.amount, None)]
        )
        return kept


@dataclass(frozen=True, slots=True)
class Exclude(Single):
    """A time-out until ``until``, or a self-exclusion (``until`` ``None``: indefinite). An
    active exclusion is only ever lengthened: a shorter one asked leaves it as it is. Answers
    the exclusion in force."""

    user: str
    until: datetime | None
    reason: str
    by: str
    size: int = 1

    def apply(self, uow: UnitOfWork) -> Exclusion:
        limits = uow.limits
        limits.mark_limited(self.user)
        now = limits.clock()
        if self.until is not None and self.until <= now:
            raise InvalidRequest("until: must be in the future")
        found = [item for item, _ in limits.user_exclusions(self.user) if item.active(now)]
        current = max(found, key=_ends, default=None)
        asked = Exclusion(now, self.until, self.reason)
        kept = lengthen(current, asked, now)
        if kept is current and current is not None:
            return current
        limits.add_exclusion(self.user, kept, self.by)
        until = None if kept.until is None else kept.until.isoformat()
        uow.append_events([events.excluded_row(self.user, until)])
        return kept


@dataclass(frozen=True, slots=True)
class LiftExclusion(Single):
    """An administrator ends a user's exclusions in force before their end, with a reason,
    recorded as an exclusion row of no length (``lifted: <reason>``). Answers how many ended."""

    user: str
    reason: str
    by: str
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        limits = uow.limits
        limits.mark_limited(self.user)
        now = limits.clock()
        ended = limits.lift_exclusions(self.user)
        if ended:
            limits.add_exclusion(self.user, Exclusion(now, now, f"lifted: {self.reason}"), self.by)
            uow.append_events([events.exclusion_ended_row(self.user, self.reason)])
        return ended


def _ends(item: Exclusion) -> datetime:
    return datetime.max.replace(tzinfo=item.starts_at.tzinfo) if item.until is None else item.until


@dataclass(frozen=True, slots=True)
class PruneLimitActivity(Single):
    """Delete up to ``batch`` rows of limit activity older than the longest window."""

    batch: int
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        return uow.limits.prune(self.batch)
