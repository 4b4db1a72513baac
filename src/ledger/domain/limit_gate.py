"""The limits one unit of work enforces, over what it read of its limited users (pure).

A :class:`Gate` holds, for each user with a limit or an exclusion that a write names, the
limits, the exclusions and what each limited window holds (``UserState``), all read by the
store inside the writing transaction, under the lock on the user's limit state. It admits or
refuses each request in order (:meth:`Gate.admit_bets`, :meth:`Gate.admit_deposit`); what it
admits is added to the windows it holds, so that the next request of the same unit of work
sees it, and listed in :attr:`Gate.recorded` for the store to write. A user it holds no state
for is not limited: nothing is checked, nothing recorded. The activity of a window itself is
read (through ``window``) only to say when a refused request would fit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from ..errors import LedgerError, LimitReached, UserExcluded
from .accounts import HELD_SUFFIX
from .bets import Bet, Funding
from .journal import Transaction
from .limits import KINDS, PERIODS, Activity, Exclusion, Limit, Period, Use, refusal

__all__ = ["NO_LIMITS", "Gate", "UserState", "user_credits"]


class UserState(NamedTuple):
    """A limited user's limits (every currency), exclusions, and per currency what the window
    of each period it has a limit for holds."""

    limits: tuple[Limit, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    use: Mapping[str, Mapping[Period, Use]] = {}


# The activity of ``user`` in ``currency`` after an instant, as stored.
WindowReader = Callable[[str, str, datetime], Iterable[Activity]]


def _nothing(user: str, currency: str, since: datetime) -> tuple[Activity, ...]:
    return ()


def _order(limit: Limit) -> tuple[int, timedelta]:
    return KINDS.index(limit.kind), PERIODS[limit.period]


class Gate:
    """Admits deposits and entries of the limited users in ``states`` at ``now``."""

    def __init__(
        self, states: Mapping[str, UserState], now: datetime, window: WindowReader = _nothing
    ) -> None:
        self._states = states
        self.now = now
        self._window = window
        self._use: dict[tuple[str, str], dict[Period, Use]] = {
            (user, currency): dict(use)
            for user, state in states.items()
            for currency, use in state.use.items()
        }
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
        admitted = [item for who, where, item in self.recorded if (who, where) == (user, currency)]

        def window(period: Period) -> list[Activity]:
            since = self.now - PERIODS[period]
            return [*self._window(user, currency, since), *admitted]

        use = self._use.get((user, currency), {})
        refused = refusal(limits, use, window, self.now, deposit=deposit, stake=stake)
        if refused is None:
            return None
        return LimitReached(
            f"user {user}: {refused.message(currency)}", key=f"user.{refused.kind}_limit_reached"
        )

    def _record(self, user: str, currency: str, item: Activity) -> None:
        use = self._use.setdefault((user, currency), {})
        for period in PERIODS:
            use[period] = use.get(period, Use()).plus(item)
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
