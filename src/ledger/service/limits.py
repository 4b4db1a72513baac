"""Responsible-gambling limits and exclusions of the embedded API: set, remove, cancel a
pending change, show them with their use; exclude. Every change is a command
(:mod:`ledger.commands.limit_changes`) applied by the writer, like every other write; they are
enforced inside the writes that debit (:mod:`ledger.domain.limit_gate`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

from ..commands import CancelPendingLimit, Exclude, LiftExclusion, PruneLimitActivity, SetLimit
from ..contract import check_currency, check_text, check_user
from ..domain.limits import KINDS, PERIODS, Limit, LimitKind, Period, Use
from ..errors import InvalidRequest
from ..money import parse_decimal
from ..views.limits import ExclusionView, LimitView
from .core import LedgerCore

__all__ = ["PlayerLimits"]


def check_kind(value: object) -> LimitKind:
    if value not in KINDS:
        raise InvalidRequest(f"kind: expected one of {', '.join(KINDS)}")
    return value


def check_period(value: object) -> Period:
    if value not in PERIODS:
        raise InvalidRequest(f"period: expected one of {', '.join(PERIODS)}")
    return value


class PlayerLimits(LedgerCore):
    """Deposit, stake and loss limits per user and currency; time-outs and self-exclusions."""

    def set_limit(
        self,
        user: str,
        currency: str,
        kind: str,
        period: str,
        amount: Decimal | int | str,
        *,
        by: str,
        reason: str | None = None,
    ) -> LimitView:
        """Set ``user``'s ``kind`` limit per ``period`` in ``currency`` to ``amount``: a first
        or lower limit at once, a higher one after the cooling-off (``pending`` until then).
        ``by`` says who asked (the user through the operator's systems, or an operator)."""
        user, currency = check_user(user), check_currency(currency)
        minor = self._minor(parse_decimal(amount), currency, "amount")
        return self._change(
            user, currency, check_kind(kind), check_period(period), minor, by, reason
        )

    def remove_limit(
        self, user: str, currency: str, kind: str, period: str, *, by: str
    ) -> LimitView:
        """Remove a limit: it stays in force through the cooling-off, its removal pending."""
        user, currency = check_user(user), check_currency(currency)
        return self._change(user, currency, check_kind(kind), check_period(period), None, by, None)

    def cancel_pending(
        self, user: str, currency: str, kind: str, period: str, *, by: str
    ) -> LimitView | None:
        """Cancel a pending increase or removal; ``None`` when there is no such limit."""
        user, currency = check_user(user), check_currency(currency)
        command = CancelPendingLimit(
            user, currency, check_kind(kind), check_period(period), check_text(by, "by")
        )
        kept = self.writer.run(command)
        return None if kept is None else self._view(user, kept)

    def limits(self, user: str) -> list[LimitView]:
        """``user``'s limits, each with what its window has used, the room left, and a
        pending change; sorted by currency, kind and period. Read on the primary."""
        user = check_user(user)
        with self.store.unit_of_work(write=False) as uow:
            found = uow.limits.user_limits(user)
            use = uow.limits.use(user, {item.currency for item in found})
            now = uow.limits.clock()
        order = {name: index for index, name in enumerate(KINDS)}
        found.sort(key=lambda item: (item.currency, order[item.kind], PERIODS[item.period]))
        return [self._view(user, item, use.get(item.currency, {}), now) for item in found]

    def exclude(
        self, user: str, until: datetime | None = None, *, reason: str, by: str
    ) -> ExclusionView:
        """Exclude ``user`` until ``until`` (a time-out), or indefinitely (``None``): no entry
        and no deposit meanwhile; withdrawals, refunds and settles still pay. An exclusion in
        force is only ever lengthened here."""
        user = check_user(user)
        if until is not None and until.tzinfo is None:
            raise InvalidRequest("until: expected an instant with its time zone")
        command = Exclude(user, until, check_text(reason, "reason"), check_text(by, "by"))
        kept = self.writer.run(command)
        now = self.store.clock()
        return ExclusionView(kept.starts_at, kept.until, kept.reason, by, kept.active(now))

    def lift_exclusion(self, user: str, *, reason: str, by: str) -> int:
        """End ``user``'s exclusions in force before their end: an administrator's act, with
        its reason, recorded (an exclusion row ``lifted: <reason>``, event
        ``user.exclusion_ended``). Answers how many ended (0: none was in force)."""
        user = check_user(user)
        command = LiftExclusion(user, check_text(reason, "reason"), check_text(by, "by"))
        return self.writer.run(command)

    def exclusions(self, user: str) -> list[ExclusionView]:
        """``user``'s exclusions, oldest first, each saying whether it is in force."""
        user = check_user(user)
        with self.store.unit_of_work(write=False) as uow:
            found = uow.limits.user_exclusions(user)
            now = uow.limits.clock()
        return [
            ExclusionView(item.starts_at, item.until, item.reason, by, item.active(now))
            for item, by in found
        ]

    def prune_limit_activity(self, *, batch: int = 1000) -> int:
        """Delete the limit activity older than the longest window (30 days), which no check
        reads again, ``batch`` rows per unit of work; how many rows went."""
        total = 0
        while gone := self.writer.run(PruneLimitActivity(batch)):
            total += gone
        return total

    def _change(
        self,
        user: str,
        currency: str,
        kind: LimitKind,
        period: Period,
        minor: int | None,
        by: str,
        reason: str | None,
    ) -> LimitView:
        command = SetLimit(
            user,
            currency,
            kind,
            period,
            minor,
            check_text(by, "by"),
            self.limit_cooling_off,
            None if reason is None else check_text(reason, "reason"),
        )
        new = self.writer.run(command)
        return self._view(user, new)

    def _view(
        self,
        user: str,
        limit: Limit,
        use: Mapping[Period, Use] | None = None,
        now: datetime | None = None,
    ) -> LimitView:
        if use is None or now is None:
            with self.store.unit_of_work(write=False) as uow:
                use = uow.limits.use(user, [limit.currency]).get(limit.currency, {})
                now = uow.limits.clock()
        in_force = limit.settled(now)
        spent = use.get(limit.period, Use()).of(limit.kind)
        amount = in_force.amount
        scale = limit.currency
        return LimitView(
            limit.currency,
            limit.kind,
            limit.period,
            None if amount is None else self._decimal(amount, scale),
            self._decimal(spent, scale),
            None if amount is None else self._decimal(max(amount - spent, 0), scale),
            None if in_force.pending is None else self._decimal(in_force.pending, scale),
            in_force.pending_at,
        )
