"""Use cases: the embedded ledger API over one store.

Each write turns its input into a command (:mod:`ledger.writer`): the payload is validated and its
amounts converted to minor units here, then the writer applies it in one unit of work, where the
domain decides and the store writes. Every request is all-or-nothing. Reads open a read-only unit
of work of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal
from threading import Lock
from types import TracebackType
from typing import Any, Self, TypeVar

from . import domain
from ._process import new_reference
from .contract import (
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
    check_currency,
    check_id,
    check_text,
    check_user,
    validate,
)
from .currencies import CurrencyTable
from .domain import Bet, ClosedBets, Entry, PlacedBets, PlaceRequest, RefundItem, SettleClaim
from .errors import InvalidRequest, LedgerError
from .money import from_minor, parse_decimal, render, to_minor
from .stores import CheckReport, Store, UnitOfWork, open_store
from .views import Balance, BetView, Movement, PoolReport, StatementLine
from .writer import (
    Command,
    DirectWriter,
    GroupCommit,
    Move,
    PlaceBets,
    RefundBets,
    SettleBets,
    Writer,
)

__all__ = ["ClosedBets", "Ledger", "PlacedBets", "open_ledger"]

T = TypeVar("T")
R = TypeVar("R")

Payload = Mapping[str, Any] | bytes | str

# Bodies larger than this are decoded on a worker thread: a settle of a million participants is
# 300 MB of JSON and takes seconds, which must not stall the caller (an event loop, say).
INLINE_BODY = 64 * 1024


class Ledger:
    """A double-entry wallet ledger over one store. Build it with :func:`open_ledger`."""

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
        read_store: Store | None = None,
    ) -> None:
        self.store = store
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
        self._decoders: ThreadPoolExecutor | None = None
        self._decoders_lock = Lock()

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
        if self._decoders is not None:
            self._decoders.shutdown(wait=True)
        self.writer.close()
        self.store.close()
        if self.read_store is not None:
            self.read_store.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _submit(self, payload: Any, command: Callable[[Any], Command[R]]) -> Future[R]:
        """Validate ``payload`` into a command and submit it; a future of its result either way.

        A large raw body is decoded on a worker thread, so that the caller (an event loop) never
        waits seconds for a huge settle to parse; bad input fails the future with its 4xx.
        """
        if isinstance(payload, bytes | bytearray | str) and len(payload) > INLINE_BODY:
            with self._decoders_lock:
                if self._decoders is None:
                    self._decoders = ThreadPoolExecutor(2, thread_name_prefix="ledger-decode")
                decoders = self._decoders
            return decoders.submit(lambda: self.writer.run(command(payload)))
        try:
            built = command(payload)
        except LedgerError as error:
            failed: Future[R] = Future()
            failed.set_exception(error)
            return failed
        return self.writer.submit(built)

    def _read(self, work: Callable[[UnitOfWork], T], *, primary: bool = False) -> T:
        """Run a read in a read-only unit of work: on the read replica when there is one.

        Only reports come here (statements, bets, pool reports, balances as shown): every read
        that decides money (a balance before a debit, a bet's state, an idempotency key) happens
        inside the command's own unit of work on the primary (ledger.writer), so a replica's lag
        can make a report stale but never a decision wrong. ``primary`` for what must see every
        acknowledged write (the audit, the readiness probe).
        """
        store = self.store if primary or self.read_store is None else self.read_store
        with store.unit_of_work(write=False) as uow:
            return work(uow)

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

    # --- deposits and withdrawals ---------------------------------------------------------------

    def deposit(
        self, user: str, currency: str, amount: Decimal | int | str, reference: str | None = None
    ) -> Movement:
        """Credit ``user`` from outside; idempotent by ``reference`` (a fresh one if omitted)."""
        return self._move(domain.deposit, user, currency, amount, reference)

    def withdraw(
        self, user: str, currency: str, amount: Decimal | int | str, reference: str | None = None
    ) -> Movement:
        """Pay ``user`` out; refused with ``user.insufficient_funds`` when available is short."""
        return self._move(domain.withdrawal, user, currency, amount, reference)

    def _move(
        self,
        decide: Callable[[str, str, int, str], domain.Transaction],
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None,
    ) -> Movement:
        user, currency = check_user(user), check_currency(currency)
        reference = check_text(reference, "reference") if reference is not None else new_reference()
        minor = self._minor(parse_decimal(amount), currency, "amount")
        applied = self.writer.run(Move(decide(user, currency, minor, reference)))
        return Movement(reference, user, currency, self._decimal(minor, currency), applied)

    # --- the callbacks --------------------------------------------------------------------------

    def place_bets(self, payload: PlaceBetsRequest | Payload) -> PlacedBets:
        """Place Bet: hold ``amount + rake`` for every new entry, all or none.

        Re-sent entries are answered without a second debit; the user's shortfall on any entry
        fails the whole request with ``user.insufficient_funds``.
        """
        return self.writer.run(self._place_command(payload))

    def submit_place_bets(self, payload: PlaceBetsRequest | Payload) -> Future[PlacedBets]:
        """Place Bet without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, self._place_command)

    def _place_command(self, payload: PlaceBetsRequest | Payload) -> PlaceBets:
        request = validate(PlaceBetsRequest, payload)
        entries = []
        for item in request.bets:
            currency = item.bet.currency.upper()
            entries.append(
                Entry(
                    bet_uid=item.bet.uid,
                    user=item.user.uid,
                    pool_uid=item.pool.uid,
                    currency=currency,
                    amount=self._minor(item.bet.amount, currency, "bet.amount"),
                    rake=self._minor(item.bet.rake, currency, "bet.rake"),
                    ticket=item.bet.ticket or None,
                    request_uuid=item.bet.uuid,
                )
            )
        return PlaceBets(PlaceRequest(entries, new_reference()))

    def refund(self, payload: RefundRequest | Payload) -> ClosedBets:
        """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once."""
        return self.writer.run(self._refund_command(payload))

    def submit_refund(self, payload: RefundRequest | Payload) -> Future[ClosedBets]:
        """Refund without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, self._refund_command)

    def _refund_command(self, payload: RefundRequest | Payload) -> RefundBets:
        request = validate(RefundRequest, payload)
        items = [
            RefundItem(
                part.bet.uid,
                part.user.uid,
                pool.pool.uid,
                part.bet.amount,
                part.bet.rake,
                part.bet.secrets,
            )
            for pool in request.pools
            for part in pool.bets
        ]
        return RefundBets(items, new_reference(), self.currencies.scale)

    def settle(self, payload: SettleRequest | Payload) -> ClosedBets:
        """Settle Bet: capture each hold and credit positive payouts, each bet exactly once."""
        return self.writer.run(self._settle_command(payload))

    def submit_settle(self, payload: SettleRequest | Payload) -> Future[ClosedBets]:
        """Settle without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, self._settle_command)

    def _settle_command(self, payload: SettleRequest | Payload) -> SettleBets:
        request = validate(SettleRequest, payload)
        claims = [
            SettleClaim(
                part.bet.uid,
                part.user.uid,
                pool.pool.uid,
                part.bet.payout,
                part.bet.currency.upper() if part.bet.currency else None,
                part.bet.secrets,
            )
            for pool in request.pools
            for part in pool.bets
        ]
        return SettleBets(claims, new_reference(), self.currencies.scale)

    # --- reads ----------------------------------------------------------------------------------

    def balance(self, user: str, currency: str | None = None) -> list[Balance]:
        """The user's balances, one per currency (or only ``currency``)."""
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        rows = self._read(lambda uow: uow.balances(user))
        result = [
            Balance(
                row.currency,
                self._decimal(row.available, row.currency),
                self._decimal(row.held, row.currency),
            )
            for row in rows
            if wanted is None or row.currency == wanted
        ]
        if wanted is not None and not result:
            zero = self._decimal(0, wanted)
            result = [Balance(wanted, zero, zero)]
        return result

    def statement(
        self,
        user: str,
        currency: str | None = None,
        *,
        limit: int = 50,
        before: int | None = None,
    ) -> list[StatementLine]:
        """The user's movements, newest first; page with ``before`` = the last line's ``id``."""
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        if not 1 <= limit <= 10_000:
            raise InvalidRequest("limit must be between 1 and 10000")
        if before is not None:
            before = check_id(before, "before")
        rows = self._read(lambda uow: uow.statement(user, wanted, limit, before))
        return [
            StatementLine(
                id=row.id,
                created_at=row.created_at,
                account=row.account,
                currency=row.currency,
                amount=self._decimal(row.amount, row.currency),
                kind=row.kind,
                bet_uid=row.bet_uid,
                reference=row.reference,
                transaction_id=row.transaction_id,
            )
            for row in rows
        ]

    def bet(self, uid: int) -> BetView | None:
        """The recorded bet, or ``None``."""
        uid = check_id(uid, "bet uid")

        def read(uow: UnitOfWork) -> tuple[Bet | None, tuple[datetime, datetime | None] | None]:
            # The times are a read of their own: get_bets serves the write path and stays lean.
            return uow.get_bets([uid]).get(uid), uow.bet_times(uid)

        found, times = self._read(read)
        if found is None:
            return None
        placed_at, closed_at = times or (None, None)
        return BetView(
            uid=found.uid,
            user=found.user,
            pool_uid=found.pool_uid,
            currency=found.currency,
            amount=self._decimal(found.amount, found.currency),
            rake=self._decimal(found.rake, found.currency),
            funding=found.funding.value,
            state=found.state.value,
            payout=(
                None
                if found.payout is None or found.payout_currency is None
                else self._decimal(found.payout, found.payout_currency)
            ),
            payout_currency=found.payout_currency,
            secrets=dict(found.secrets),
            placed_at=placed_at,
            closed_at=closed_at,
        )

    def pool_report(self, pool_uid: int) -> PoolReport:
        """Entries, stakes, rake, payouts and open holds of one tournament, per currency.

        Payouts are listed per payout currency (``{"JPY": "500"}``): a bet may be paid out in
        another currency than its own, and two currencies never add up.
        """
        pool_uid = check_id(pool_uid, "pool uid")
        rows = self._read(lambda uow: uow.pool_totals(pool_uid))
        totals: dict[str, dict[str, Any]] = {}
        for row in rows:
            found = totals.setdefault(
                row.currency,
                {"entries": 0, "by_state": {}, "stakes": 0, "rake": 0, "payouts": {}, "open": 0},
            )
            found["entries"] += row.entries
            found["by_state"][row.state] = row.entries
            found["stakes"] += row.stakes
            found["rake"] += row.rake
            if row.state == domain.BetState.SETTLED:
                for currency, amount in row.payouts.items():
                    found["payouts"][currency] = found["payouts"].get(currency, 0) + amount
            if row.state == domain.BetState.PLACED:
                found["open"] += row.stakes + row.rake
        currencies = []
        for currency, found in totals.items():
            scale = self.currencies.scale(currency)
            currencies.append(
                {
                    "currency": currency,
                    "entries": found["entries"],
                    "by_state": found["by_state"],
                    "stakes": render(found["stakes"], scale),
                    "rake": render(found["rake"], scale),
                    "payouts": {
                        paid_in: render(amount, self.currencies.scale(paid_in))
                        for paid_in, amount in sorted(found["payouts"].items())
                    },
                    "open_holds": render(found["open"], scale),
                }
            )
        return PoolReport(pool_uid=pool_uid, currencies=currencies)

    def check(self) -> CheckReport:
        """Verify the journal's invariants (DESIGN section 4) over the whole database."""
        return self._read(lambda uow: uow.check(), primary=True)

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""
        self._read(lambda uow: uow.ping(), primary=True)


def open_ledger(
    url: str = "sqlite:///ledger.db",
    *,
    currencies: CurrencyTable | None = None,
    migrate: bool | None = None,
    group_commit: bool | None = None,
    max_queue: int = 10_000,
    max_wait: float = 10.0,
    threads: int = 16,
    read_url: str | None = None,
    **store_options: Any,
) -> Ledger:
    """Open the ledger in the database ``url`` names (the one composition root of the library).

    ``sqlite:///path.db`` creates and upgrades the file itself; Postgres URLs expect
    ``ledger db upgrade`` to have run (or pass ``migrate=True``). ``group_commit`` (default on)
    applies concurrent writes in shared transactions, one durable commit per batch; at most
    ``max_queue`` writes wait for the writer, and none is queued while it has been stuck on one
    batch for ``max_wait`` seconds (both refused with 503 ``store.busy``). ``threads`` writers
    apply the writes that do not go through group commit. ``read_url`` names a read replica
    (a streaming standby) that reports read from; see :meth:`Ledger._read`.
    """
    store = open_store(url, migrate=migrate, **store_options)
    try:
        read_store = (
            None
            if read_url is None
            else open_store(read_url, migrate=False, create=False, primary=False, **store_options)
        )
    except BaseException:
        store.close()
        raise
    return Ledger(
        store,
        currencies=currencies,
        group_commit=group_commit,
        max_queue=max_queue,
        max_wait=max_wait,
        threads=threads,
        read_store=read_store,
    )
