"""The one port every store implements: an atomic unit of work over the ledger's state.

A unit of work is a database transaction. Nothing it writes is visible until :meth:`commit`;
leaving the ``with`` block without committing rolls everything back (commit is explicit, rollback
automatic). Stores translate their driver's exceptions into :mod:`ledger.errors` at this boundary:

- an idempotency race lost to a concurrent writer (unique key), a deadlock or a serialization
  failure raises :class:`Retry`, and the service runs the whole unit of work again;
- an unreachable or timed-out database raises :class:`~ledger.errors.StoreUnavailable` (503);
- an overdraft caught by the database raises :class:`~ledger.errors.InsufficientFunds`;
- a leg or balance beyond what the store holds (38 digits, ``schema.CAPACITY``) raises
  :class:`~ledger.errors.CapacityExceeded` (422), with nothing written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self

from ..domain import Bet, Transaction
from ..errors import StoreBusy

__all__ = [
    "AccountBalance",
    "CheckReport",
    "PoolTotals",
    "Retry",
    "StatementRow",
    "Store",
    "UnitOfWork",
]


class Retry(StoreBusy):
    """A concurrent writer got there first; running the unit of work again will see its result."""

    key = "store.retry"


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


class UnitOfWork(Protocol):
    """One atomic database transaction over the ledger."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def commit(self) -> None:
        """Make everything written durable, or raise; after a raise nothing was written."""

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested scope: an exception inside it undoes only what was written inside it."""

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        """The recorded bets among ``uids``."""

    def add_bets(self, bets: Sequence[Bet]) -> None:
        """Record new bets; a uid recorded meanwhile by another writer raises :class:`Retry`."""

    def close_bets(self, bets: Sequence[Bet]) -> None:
        """Move placed bets to their new state (refunded or settled, with payout)."""

    def get_transaction(self, key: str) -> Transaction | None:
        """The transaction with this idempotency key, with its postings."""

    def post(self, transactions: Sequence[Transaction]) -> None:
        """Append balanced transactions and apply them to account balances.

        Raises :class:`~ledger.errors.InsufficientFunds` when a user's available balance would go
        below zero, :class:`~ledger.errors.CapacityExceeded` when a leg or a balance would pass
        what the store holds. A key used meanwhile by another writer raises :class:`Retry`.
        """

    def account_balances(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The balances of the ``(name, currency)`` accounts that exist."""

    def bet_times(self, uid: int) -> tuple[datetime, datetime | None] | None:
        """When the bet was placed and closed (``None`` while open), or ``None`` if unknown."""

    def balances(self, user: str) -> list[AccountBalance]:
        """The user's balances, one per currency, sorted by currency."""

    def statement(
        self, user: str, currency: str | None, limit: int, before: int | None
    ) -> list[StatementRow]:
        """The postings on the user's accounts, newest first, older than posting id ``before``."""

    def pool_totals(self, pool_uid: int) -> list[PoolTotals]:
        """The tournament's entries grouped by currency and state."""

    def check(self) -> CheckReport:
        """Verify invariants 1 to 4 over the whole journal."""

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""


class Store(Protocol):
    """A database holding one ledger."""

    url: str
    # True when the database admits one writer at a time (SQLite): concurrent writes are then
    # best grouped into shared commits (see ledger.batching) rather than queued for the lock.
    single_writer: bool

    def unit_of_work(self, *, write: bool = True) -> UnitOfWork:
        """A new unit of work; ``write=False`` for reads that must not take the write lock."""

    def migrate(self) -> None:
        """Upgrade the schema to the newest migration."""

    def close(self) -> None:
        """Release every connection."""

    def replica_lag(self) -> float | None:
        """Seconds this database's data may be behind its primary; ``None`` on a primary."""
