"""The ports every store implements: a unit of work that writes, and reads and the audit behind
objects of their own.

A unit of work is a database transaction. Nothing it writes is visible until :meth:`commit`;
leaving the ``with`` block without committing rolls everything back (commit is explicit, rollback
automatic). It holds what the commands (:mod:`ledger.commands`) need to decide and write, and no
report. Reports read through :class:`Reads`, the invariants are proved through :class:`Audit`,
each in a read-only transaction of its own (:meth:`Store.reading`, :meth:`Store.auditing`).

Stores translate their driver's exceptions into :mod:`ledger.errors` at this boundary:

- an idempotency race lost to a concurrent writer (unique key), a deadlock or a serialization
  failure raises :class:`Retry`, and the writer runs the whole unit of work again;
- an unreachable or timed-out database raises :class:`~ledger.errors.StoreUnavailable` (503);
- an overdraft caught by the database raises :class:`~ledger.errors.InsufficientFunds`;
- a leg or balance beyond what the store holds (38 digits, ``schema.CAPACITY``) raises
  :class:`~ledger.errors.CapacityExceeded` (422), with nothing written.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Protocol, Self

from ..deliveries import DeliveryFilter, DeliveryRecord
from ..directory import Seen
from ..domain import Bet, Transaction
from ..domain.limit_gate import Gate
from ..domain.limits import Exclusion, Limit, Period, Use
from ..events import EventRow
from .base import (
    AccountBalance,
    BetRecord,
    CheckReport,
    ClosingOutcome,
    DeliveryCount,
    HoldRow,
    HourTotals,
    HouseTotals,
    PoolTotals,
    PostingRecord,
    Staged,
    StaleRule,
    StatementRow,
    TournamentRecord,
    UserRecord,
)

__all__ = ["Audit", "Limits", "Reads", "Retention", "Store", "UnitOfWork"]


class Limits(Protocol):
    """The responsible-gambling limits inside a unit of work (``uow.limits``)."""

    clock: Callable[[], datetime]

    def gate(self, users: Collection[str]) -> Gate:
        """What decides the deposits and entries of ``users`` now: empty (one indexed probe,
        nothing locked) unless some are limited; their limit state is then locked and read."""

    def record(self, gate: Gate) -> None:
        """Write the activity ``gate`` admitted."""

    def record_returns(self, credits: Mapping[tuple[str, str], int]) -> None:
        """Record ``(user, currency)`` credits of refunds and payouts, for limited users."""

    def record_set_returns(self, key: str, after_posting: int) -> None:
        """Record a set-based close's credits (transactions ``key:<n>``, postings after
        ``after_posting``) to limited users, in one statement."""

    def last_posting(self) -> int:
        """The highest posting id so far."""

    def mark_limited(self, user: str) -> None:
        """Make ``user`` limited and lock its limit state."""

    def user_limits(self, user: str) -> list[Limit]:
        """``user``'s limits."""

    def save_limit(
        self, user: str, change: tuple[Limit, Limit | None, str, str | None], effective_at: datetime
    ) -> None:
        """Write a limit (``new, old, by, reason``) and its history row."""

    def user_exclusions(self, user: str) -> list[tuple[Exclusion, str]]:
        """``user``'s exclusions, oldest first, with who asked."""

    def add_exclusion(self, user: str, exclusion: Exclusion, by: str) -> None:
        """Record an exclusion."""

    def lift_exclusions(self, user: str) -> int:
        """End ``user``'s exclusions in force now (an administrator's act); how many."""

    def use(self, user: str, currencies: Collection[str]) -> dict[str, dict[Period, Use]]:
        """What each window of ``user`` holds now in each of ``currencies``."""

    def prune(self, batch: int) -> int:
        """Delete up to ``batch`` activity rows (and hourly sums) older than the longest
        window."""


class UnitOfWork(Protocol):
    """One atomic database transaction that writes: what a command reads to decide, and what
    it writes."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    @property
    def limits(self) -> Limits:
        """The responsible-gambling limits, in this transaction."""

    def commit(self) -> None:
        """Make everything written durable, or raise; after a raise nothing was written."""

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested scope: an exception inside it undoes only what was written inside it."""

    def flush(self) -> None:
        """Send now whatever the store holds back to send with a later statement, so that a
        failure among it is raised here (outside a savepoint, where :meth:`savepoint` would)."""

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        """The recorded bets among ``uids``."""

    def bets_and_balances(
        self,
        uids: Sequence[int],
        debited: Collection[tuple[str, str]],
        credited: Collection[tuple[str, str]],
        users: Collection[str] = (),
    ) -> tuple[dict[int, Bet], dict[tuple[str, str], int]]:
        """What a decision to post reads (and, where it saves a round trip, the limits' probe
        of ``users`` for :meth:`Limits.gate`): the recorded bets among ``uids`` and the balances of
        the ``(name, currency)`` accounts among ``debited`` and ``credited`` that exist, before
        this unit of work posts to them. The accounts are held for its writes (locked on
        Postgres, SQLite's writer holding the database), which then read none of them again:
        on Postgres all of it is one round trip, and so are the writes that follow."""

    def add_bets(self, bets: Sequence[Bet]) -> None:
        """Record new bets; a uid recorded meanwhile by another writer raises :class:`Retry`."""

    def close_bets(self, bets: Sequence[Bet]) -> None:
        """Move placed bets to their new state (refunded or settled, with payout)."""

    def get_transaction(self, key: str) -> Transaction | None:
        """The transaction with this idempotency key, with its postings."""

    def bet_currencies(self, uids: Sequence[int]) -> set[str]:
        """The currencies of the recorded bets among ``uids``."""

    def set_based_up_to(self) -> int | None:
        """The most items this store closes set-based (None: no bound); a larger refund or
        settle is decided by the domain, bet by bet."""

    def close_staged(
        self,
        kind: Literal["refund", "settle"],
        rows: Sequence[Staged],
        key: str,
        chunk: int,
        request_id: str | None,
        seen: Seen,
        describe_users: bool,
    ) -> int | ClosingOutcome | None:
        """Close a huge refund or settle set-based (:mod:`ledger.stores.closing`), its events
        (``request_id`` theirs) included: the position
        of the first item the domain refuses (nothing written), or what was written, or
        ``None`` (nothing written) when an amount or balance it would add is too wide to add
        in the database exactly, for the domain to decide. What was written includes the
        directory: ``seen``, then (``describe_users``) each staged item's user, the last
        description of a user winning (:func:`ledger.directory.described`)."""

    def post(self, transactions: Sequence[Transaction]) -> None:
        """Append balanced transactions and apply them to account balances.

        Raises :class:`~ledger.errors.InsufficientFunds` when a user's available balance would go
        below zero, :class:`~ledger.errors.CapacityExceeded` when a leg or a balance would pass
        what the store holds. A key used meanwhile by another writer raises :class:`Retry`.
        """

    def append_events(self, rows: Sequence[EventRow]) -> None:
        """Append events to this transaction's (one bulk insert); they get their ids at
        commit, in commit order. A savepoint rolled back takes its events with it."""

    def record_deliveries(self, records: Sequence[DeliveryRecord]) -> None:
        """Write delivery journal rows (and the links to the bets each names)."""

    def record_seen(self, seen: Seen) -> None:
        """Upsert what a payload said of its tournaments and users (one uid each, sorted)."""

    def retention(self) -> Retention:
        """What retention deletes, in this unit of work."""


class Retention(Protocol):
    """Retention's deletes: the event feed's and the delivery journal's oldest rows."""

    def prune_events(self, cutoff: datetime, batch: int, through: int | None = None) -> int:
        """Delete the events of up to ``batch`` of the oldest transactions committed before
        ``cutoff`` (and, with ``through``, only transactions whose events all have ids up to
        it); how many events went."""

    def prune_deliveries(self, cutoff: datetime, batch: int) -> int:
        """Delete up to ``batch`` of the oldest rows received before ``cutoff``; how many."""

    def slowest_webhook(self) -> tuple[str, int] | None:
        """The webhook endpoint whose cursor stands lowest and its cursor (None: none)."""


class Reads(Protocol):
    """Reports over one read-only transaction (one snapshot): balances, statements, holds, the
    house's totals, the directory, the event feed and the delivery journal."""

    def balances(self, user: str) -> list[AccountBalance]:
        """The user's balances, one per currency, sorted by currency."""

    def balances_at(self, user: str, at: datetime) -> list[AccountBalance]:
        """The user's balances at ``at``: per account, the running balance of its last posting
        at or before that moment; currencies without any are left out."""

    def statement(
        self, user: str, currency: str | None, limit: int, before: int | None
    ) -> list[StatementRow]:
        """The postings on the user's accounts, newest first, older than posting id ``before``."""

    def holds(
        self,
        *,
        limit: int,
        after: tuple[datetime, int] | None,
        user: str | None,
        pool_uid: int | None,
        placed_by: datetime | None,
        rule: StaleRule,
        only_stale: bool,
    ) -> list[HoldRow]:
        """Open holds, oldest first, after the ``(placed_at, uid)`` keyset position, each saying
        whether it is stale by ``rule``; only those placed at or before ``placed_by`` when
        given, only stale ones when ``only_stale``."""

    def count_stale_holds(self, stale: StaleRule) -> int:
        """How many open holds are stale by ``stale``."""

    def house_totals(
        self, since: datetime | None, until: datetime | None, currency: str | None
    ) -> list[HouseTotals]:
        """Per currency: the house accounts' balances now and the period's totals."""

    def hourly_totals(self, since: datetime, until: datetime) -> list[HourTotals]:
        """Per hour of ``[since, until)`` and currency, the entries placed, their stakes and the
        payouts settled; hours and currencies without any are left out. Sorted."""

    def pool_totals(self, pool_uid: int) -> list[PoolTotals]:
        """The tournament's entries grouped by currency and state."""

    def bet_records(
        self, pools: Collection[int] | None = None, uids: Collection[int] | None = None
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Every bet, or those of ``pools`` and those ``uids`` names, streamed in batches of
        ``(uid, user_uid, pool_uid, currency, amount, rake, state, payout, payout_currency)``
        (amounts in minor units); for reconciliation, which never holds all of them at once."""

    def bet(self, uid: int) -> BetRecord | None:
        """One bet with its times and names, or ``None``."""

    def bet_postings(self, found: BetRecord) -> list[PostingRecord]:
        """The bet's legs on its user's accounts, oldest first."""

    def bets(
        self,
        user: str | None,
        pool: int | None,
        state: str | None,
        limit: int,
        before: int | None,
    ) -> list[BetRecord]:
        """Bets by uid descending, below ``before``."""

    def bets_by_time(
        self,
        user: str | None,
        pool: int | None,
        state: str | None,
        limit: int,
        before: tuple[datetime, int] | None,
    ) -> list[BetRecord]:
        """Bets the last placed first (``placed_at, uid`` descending), after the keyset
        ``before``."""

    def tournament_names(self, uids: Sequence[int]) -> dict[int, str]:
        """The name of each of ``uids`` the platform named (the others are left out)."""

    def tournament_statuses(self) -> list[str]:
        """Every tournament status seen, sorted."""

    def tournaments(
        self,
        status: str | None,
        search: str | None,
        limit: int,
        before: tuple[datetime, int] | None,
    ) -> list[TournamentRecord]:
        """Tournaments newest first (``first_seen, uid``), after the keyset ``before``."""

    def tournament(self, uid: int) -> TournamentRecord | None:
        """One tournament, or ``None``."""

    def users(
        self, search: str | None, limit: int, before: tuple[datetime, str] | None
    ) -> list[UserRecord]:
        """Users newest first (``first_seen, uid``), after the keyset ``before``."""

    def user(self, uid: str) -> UserRecord | None:
        """One user (described, or known by an account only), or ``None``."""

    def events(
        self, after: int, limit: int, types: Sequence[str] | None
    ) -> list[tuple[int, datetime, EventRow]]:
        """Up to ``limit`` committed events above id ``after``, in id order, as
        ``(id, committed_at, row)``; only those of ``types`` when given."""

    def last_event_id(self) -> int:
        """The newest event id (0 before the first)."""

    def deliveries(
        self, wanted: DeliveryFilter, limit: int, after: tuple[datetime, int] | None
    ) -> list[DeliveryRecord]:
        """Up to ``limit`` journal rows matching ``wanted``, newest first, older than
        ``after`` (a row's ``(received_at, id)``)."""

    def count_deliveries(self, since: datetime) -> list[DeliveryCount]:
        """The journal rows received at or after ``since``, counted by event, status and
        error key; sorted."""

    def bet_times(self, uid: int) -> tuple[datetime, datetime | None] | None:
        """When the bet was placed and closed (``None`` while open), or ``None`` if unknown."""

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""

    def slowest_webhook(self) -> tuple[str, int] | None:
        """The webhook endpoint whose cursor stands lowest and its cursor (None: none)."""


class Audit(Protocol):
    """The invariants, re-proved from the journal over one read-only transaction."""

    def check(self) -> CheckReport:
        """Verify invariants 1 to 4 over the whole journal."""


class Store(Protocol):
    """A database holding one ledger."""

    url: str
    # True when the database admits one writer at a time (SQLite): concurrent writes are then
    # best grouped into shared commits (see ledger.batching) rather than queued for the lock.
    single_writer: bool
    # Events committed through this object so far (ledger.events): a metric, and a signal to
    # readers waiting in this process.
    events_appended: int
    # The clock of the responsible-gambling limits (their windows and cooling-off).
    clock: Callable[[], datetime]

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> UnitOfWork:
        """A new unit of work; ``write=False`` for one that must not take the write lock;
        ``bulk`` for one that may close a huge request set-based (its staging tables and large
        sorts then stay on disk where a store would otherwise keep temporary data in memory)."""

    def reading(self) -> AbstractContextManager[Reads]:
        """Reads in one read-only transaction; the driver's errors come out translated."""

    def auditing(self) -> AbstractContextManager[Audit]:
        """The audit in one read-only transaction; the driver's errors come out translated."""

    def migrate(self) -> None:
        """Upgrade the schema to the newest migration."""

    def close(self) -> None:
        """Release every connection."""

    def replica_lag(self) -> float | None:
        """Seconds this database's data may be behind its primary; ``None`` on a primary."""
