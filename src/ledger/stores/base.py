"""The records the store's ports (:mod:`.port`) take and return, and :class:`Retry`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from ..domain import Bet
from ..errors import StoreBusy

__all__ = [
    "AccountBalance",
    "BetRecord",
    "CheckReport",
    "ClosingOutcome",
    "DeliveryCount",
    "HoldRow",
    "HourTotals",
    "HouseTotals",
    "PoolTotals",
    "PostingRecord",
    "Retry",
    "Staged",
    "StaleRule",
    "StatementRow",
    "TournamentRecord",
    "UserRecord",
]


class Retry(StoreBusy):
    """A concurrent writer got there first; running the unit of work again will see its result."""

    key = "store.retry"


class Staged(NamedTuple):
    """One item of a huge refund or settle, staged for the set-based close
    (:mod:`ledger.stores.closing`): its position in the request, the bet it names, the user and
    tournament it says the bet belongs to; a settle's payout in minor units of
    ``payout_currency``; a refund's claimed amount and rake (minor units of the bet's currency,
    ``None``: not sent); ``bad`` 1 when converting its payout failed (refused whatever the bet),
    2 when that counts only for a known bet (a payout in the bet's own currency); ``note`` 1
    when the domain may have something to note of it (an echo of secrets, an unreadable claim).
    """

    pos: int
    uid: int
    user_uid: str
    pool_uid: int
    payout: int | None
    payout_currency: str | None
    claimed_amount: int | None
    claimed_rake: int | None
    bad: int
    note: int
    # The item's user as the payload describes it, for the directory (ledger.directory.label).
    user_name: str | None = None
    user_client: str | None = None


class ClosingOutcome(NamedTuple):
    """What a set-based close wrote: positions answered "unchanged" and those to note."""

    unchanged: list[int]
    noted: list[int]


@dataclass(frozen=True, slots=True)
class AccountBalance:
    """One currency of one user, in minor units."""

    currency: str
    available: int
    held: int


@dataclass(frozen=True, slots=True)
class StatementRow:
    """One posting on a user's accounts, newest first, in minor units."""

    id: int
    created_at: datetime
    account: str  # "available" or "held"
    currency: str
    amount: int
    kind: str
    bet_uid: int | None
    reference: str | None
    transaction_id: int
    # The account's balance after this posting (NULL only in a database not yet backfilled).
    balance_after: int | None = None
    pool_uid: int | None = None


@dataclass(frozen=True, slots=True)
class PoolTotals:
    """The entries of one tournament in one currency and one state, in minor units.

    ``payouts`` maps each payout currency to its total: a bet may be paid out in another
    currency than its own, and amounts of two currencies never add up.
    """

    currency: str
    state: str
    entries: int
    stakes: int
    rake: int
    payouts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HoldRow:
    """An open hold: a placed bet not yet settled or refunded, in minor units."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: int
    rake: int
    funding: str
    placed_at: datetime
    stale: bool


@dataclass(frozen=True, slots=True)
class StaleRule:
    """When an open hold is stale, at ``now``: its tournament's estimated end plus ``grace`` has
    passed or, without an end time, it was placed more than ``max_age`` ago."""

    now: datetime
    grace: timedelta
    max_age: timedelta


@dataclass(frozen=True, slots=True)
class HouseTotals:
    """One currency of the house over a period, in minor units (counts are entries)."""

    currency: str
    balances: Mapping[str, int]  # house account name -> balance now
    deposits: int = 0
    withdrawals: int = 0
    stakes_captured: int = 0
    rake_earned: int = 0
    prizes_paid: int = 0
    ticket_funded: int = 0
    refunds: int = 0
    entries: int = 0
    ticket_entries: int = 0
    unique_players: int = 0


@dataclass(frozen=True, slots=True)
class HourTotals:
    """One hour of activity in one currency, in minor units: the entries placed in it and their
    stakes, and the payouts paid in this currency by the settles of that hour."""

    hour: datetime  # the hour's start, UTC
    currency: str
    entries: int = 0
    stakes: int = 0
    payouts: int = 0


@dataclass(frozen=True, slots=True)
class DeliveryCount:
    """How many journal rows of one event had one outcome (status and error key)."""

    event: str
    status: int
    error: str | None
    count: int


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The result of verifying the journal's invariants (DESIGN section 4, items 1 to 4)."""

    problems: list[str] = field(default_factory=list)
    transactions: int = 0
    postings: int = 0
    accounts: int = 0
    bets: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class TournamentRecord:
    """A tournament as payloads described it (``None``: never said), with its entries per state
    counted from the bets."""

    uid: int
    name: str | None
    currency: str | None
    category: str | None
    game_type: str | None
    status: str | None
    estimated_end_time: datetime | None
    first_seen: datetime
    last_seen: datetime
    entries: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UserRecord:
    """A user as payloads described it; a user known only by an account (a deposit) has
    nothing described and no times."""

    uid: str
    name: str | None
    client: str | None
    first_seen: datetime | None
    last_seen: datetime | None


@dataclass(frozen=True, slots=True)
class BetRecord:
    """A bet with when it was placed and closed, and the names of its user and tournament."""

    bet: Bet
    placed_at: datetime
    closed_at: datetime | None
    user_name: str | None
    pool_name: str | None


@dataclass(frozen=True, slots=True)
class PostingRecord:
    """One leg of a bet on its user's accounts, in minor units."""

    id: int
    created_at: datetime
    account: str  # "available" or "held"
    currency: str
    amount: int
    kind: str
    reference: str | None
    transaction_id: int
