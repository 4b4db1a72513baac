"""The limits one unit of work enforces, over what it read of its limited users (pure).

A :class:`Gate` holds, for each user with a limit or an exclusion that a write names, the
limits, the exclusions and the activity of the longest window (``UserState``), all read by the
store inside the writing transaction, under the lock on the user's limit state. It admits or
refuses each request in order (:meth:`Gate.admit_bets`, :meth:`Gate.admit_deposit`); what it
admits is added to the activity it holds, so that the next request of the same unit of work
sees it, and listed in :attr:`Gate.recorded` for the store to write. A user it holds no state
for is not limited: nothing is checked, nothing recorded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from ..errors import LedgerError, LimitReached, UserExcluded
from .accounts import HELD_SUFFIX
from .bets import Bet, Funding
from .journal import Transaction
from .limits import KINDS, PERIODS, Activity, Exclusion, Limit, first_refusal

__all__ = ["NO_LIMITS", "Gate", "UserState", "user_credits"]


class UserState(NamedTuple):
    """A limited user's limits (every currency), exclusions, and activity per currency since
    the start of the longest window."""

    limits: tuple[Limit, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    activity: Mapping[str, tuple[Activity, ...]] = {}


def _order(limit: Limit) -> tuple[int, timedelta]:
    return KINDS.index(limit.kind), PERIODS[limit.period]


class Gate:
    """Admits deposits and entries of the limited users in ``states`` at ``now``."""

    def __init__(self, states: Mapping[str, UserState], now: datetime) -> None:
        self._states = states
        self.now = now
        self._activity: dict[tuple[str, str], list[Activity]] = defaultdict(list)
        for user, state in states.items():
            for currency, items in state.activity.items():
                self._activity[(user, currency)].extend(items)
        # What was admitted, for the store to write: (user, currency, activity).
        self.recorded: list[tuple[str, str, Activity]] = []

    def __bool__(self) -> bool:
        return bool(self._states)

    def limited(self, user: str) -> bool:
        """Whether ``user`` has a limit or an exclusion (its activity is then recorded)."""
        return user in self._states

    def admit_bets(self, bets: Iterable[Bet]) -> LedgerError | None:
        """Admit the new bets of one Place Bet request, all or none: the first exclusion or
        limit they pass, or ``None`` (their stakes then recorded)."""
        if not self._states:
            return None
        stakes: dict[tuple[str, str], int] = defaultdict(int)
        for bet in bets:
            if bet.user in self._states:
                stakes[(bet.user, bet.currency)] += (
                    bet.amount + bet.rake if bet.funding == Funding.CASH else 0
                )
        for user in sorted({user for user, _ in stakes}):
            excluded = self._exclusion(user)
            if excluded is not None:
                return excluded
        for (user, currency), stake in sorted(stakes.items()):
            refused = self._refusal(user, currency, stake=stake)
            if refused is not None:
                return refused
        for (user, currency), stake in stakes.items():
            if stake:
                self._record(user, currency, Activity(self.now, stake=stake))
        return None

    def admit_deposit(self, user: str, currency: str, amount: int) -> LedgerError | None:
        """Admit a deposit: the exclusion or limit it passes, or ``None`` (then recorded)."""
        if user not in self._states:
            return None
        refused = self._exclusion(user) or self._refusal(user, currency, deposit=amount)
        if refused is None:
            self._record(user, currency, Activity(self.now, deposit=amount))
        return refused

    def _exclusion(self, user: str) -> LedgerError | None:
        active = [item for item in self._states[user].exclusions if item.active(self.now)]
        if not active:
            return None
        ends = [item.until for item in active]
        until = (
            "indefinitely"
            if any(end is None for end in ends)
            else f"until {max(end for end in ends if end is not None).isoformat()}"
        )
        return UserExcluded(f"user {user} is excluded {until}")

    def _refusal(
        self, user: str, currency: str, *, deposit: int = 0, stake: int = 0
    ) -> LedgerError | None:
        limits = sorted(
            (item for item in self._states[user].limits if item.currency == currency), key=_order
        )
        refused = first_refusal(
            limits, self._activity.get((user, currency), []), self.now, deposit=deposit, stake=stake
        )
        if refused is None:
            return None
        return LimitReached(
            f"user {user}: {refused.message(currency)}", key=f"user.{refused.kind}_limit_reached"
        )

    def _record(self, user: str, currency: str, item: Activity) -> None:
        self._activity[(user, currency)].append(item)
        self.recorded.append((user, currency, item))


NO_LIMITS: Mapping[str, UserState] = {}


def user_credits(transaction: Transaction) -> dict[tuple[str, str], int]:
    """What a refund or settle credits to users' available accounts, per ``(user, currency)``:
    the payouts and refunded stakes a loss limit's window counts back."""
    credits: dict[tuple[str, str], int] = defaultdict(int)
    for leg in transaction.postings:
        name = leg.account
        if leg.amount > 0 and name.startswith("user:") and not name.endswith(HELD_SUFFIX):
            credits[(name[5:], leg.currency)] += leg.amount
    return dict(credits)
