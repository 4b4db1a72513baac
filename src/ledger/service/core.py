"""What every part of :class:`~ledger.service.Ledger` stands on: its store, its writer, its
currencies, and the one way it reads (:meth:`LedgerCore._read`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime, timedelta
from decimal import Decimal
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from ..currencies import CurrencyTable
from ..money import from_minor, to_minor
from ..settings import (
    DEFAULT_LIMIT_COOLING_OFF,
    DEFAULT_STALE_HOLD_DAYS,
    DEFAULT_STALE_HOLD_GRACE,
)
from ..stores import (
    CheckReport,
    Reads,
    Store,
)
from ..writer import Command, DirectWriter, GroupCommit, Writer
from ..writer.process import ChildSpec, ProcessWriter
from .payloads import submit_paused

if TYPE_CHECKING:
    pass

__all__ = ["LedgerCore"]

T = TypeVar("T")
R = TypeVar("R")


class LedgerCore:
    """The ledger's state and plumbing; its use cases are in :mod:`.writes`, :mod:`.books`,
    :mod:`.directory` and :mod:`.feed`."""

    def __init__(
        self,
        store: Store,
        *,
        currencies: CurrencyTable | None = None,
        max_attempts: int = 8,
        group_commit: bool | None = None,
        max_queue: int = 10_000,
        max_wait: float = 10.0,
        threads: int = 16,
        stale_hold_grace: timedelta = DEFAULT_STALE_HOLD_GRACE,
        stale_hold_days: float = DEFAULT_STALE_HOLD_DAYS,
        read_store: Store | None = None,
        writer_process: ChildSpec | None = None,
        limit_cooling_off: timedelta = DEFAULT_LIMIT_COOLING_OFF,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store = store
        # Responsible-gambling limits: an increase's or a removal's wait, and the clock of their
        # windows (injected by tests; it is the store's, read inside each unit of work).
        self.limit_cooling_off = limit_cooling_off
        if clock is not None:
            store.clock = clock
        self.stale_hold_grace = stale_hold_grace
        self.stale_hold_days = stale_hold_days
        # Reports may read from a replica; nothing that decides money does (see _read).
        self.read_store = read_store
        self.currencies = currencies or CurrencyTable()
        direct = DirectWriter(
            store, max_attempts=max_attempts, threads=threads, max_queue=max_queue
        )
        # Group commit (on by default): concurrent writes are applied by one writer thread in
        # shared transactions, one durable commit per batch (see ledger.writer).
        self.writer: Writer = (
            GroupCommit(store, direct, max_queue=max_queue, max_wait=max_wait)
            if group_commit in (None, True)
            else direct
        )
        if writer_process is not None:
            # Place Bets to a group commit in a child process (ledger.writer.process).
            self.writer = ProcessWriter(self.writer, writer_process)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Finish every write already submitted, then release the database."""
        self.writer.close()
        self.store.close()
        if self.read_store is not None:
            self.read_store.close()

    def _submit(self, payload: Any, command: Callable[[Any], Command[R]]) -> Future[R]:
        """Validate ``payload`` into a command and submit it (see :mod:`.payloads`)."""
        return submit_paused(self.writer, payload, command)

    def _read(self, work: Callable[[Reads], T], *, primary: bool = False) -> T:
        """Run a read in a read-only transaction: on the read replica when there is one.

        Only reports come here (statements, bets, pool reports, balances as shown): every read
        that decides money (a balance before a debit, a bet's state, an idempotency key) happens
        inside the command's own unit of work on the primary (ledger.writer), so a replica's lag
        can make a report stale but never a decision wrong. ``primary`` for what must see every
        acknowledged write (the audit, the readiness probe).
        """
        store = self.store if primary or self.read_store is None else self.read_store
        with store.reading() as reads:
            return work(reads)

    def replica_lag(self) -> float | None:
        """Seconds a replica read may be behind the primary; ``None`` without a read replica."""
        if self.read_store is None:
            return None
        lag = self.read_store.replica_lag()
        return 0.0 if lag is None else lag

    def _minor(self, amount: Decimal, currency: str, field: str) -> int:
        return to_minor(amount, self.currencies.scale(currency), field=field)

    def _decimal(self, minor: int, currency: str) -> Decimal:
        return from_minor(minor, self.currencies.scale(currency))

    def check(self) -> CheckReport:
        """Verify the journal's invariants (DESIGN section 4) over the whole database."""
        with self.store.auditing() as audit:
            return audit.check()

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""
        self._read(lambda reads: reads.ping(), primary=True)
