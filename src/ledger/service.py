"""Use cases: the embedded ledger API over one store.

Each write turns its input into a command (:mod:`ledger.writer`): the payload is validated and its
amounts converted to minor units here, then the writer applies it in one unit of work, where the
domain decides and the store writes. Every request is all-or-nothing. Reads open a read-only unit
of work of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from threading import Lock
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from . import directory, domain, events
from ._process import new_reference, paused_gc
from .commands import (
    Move,
    PlaceBets,
    PruneDeliveries,
    PruneEvents,
    RecordDelivery,
    RefundBets,
    SettleBets,
)
from .contract import (
    PlaceBetsRequest,
    Pool,
    RefundRequest,
    SettleRequest,
    User,
    check_currency,
    check_id,
    check_text,
    check_user,
    validate,
)
from .currencies import CurrencyTable
from .deliveries import Delivery, DeliveryFilter, DeliveryRecord, retention_cutoff
from .directory import Seen, TournamentSeen
from .domain import ClosedBets, Entry, PlacedBets, PlaceRequest
from .errors import InvalidRequest, LedgerError, UserNotFound
from .events import EventPage
from .money import from_minor, parse_decimal, render, to_minor
from .paging import DEFAULT_LIMIT, EXPORT_PAGE, Page, check_limit, every, page_of, position
from .settings import (
    DEFAULT_STALE_HOLD_DAYS,
    DEFAULT_STALE_HOLD_GRACE,
    SettingsError,
    parse_duration,
)
from .stores import (
    AccountBalance,
    BetRecord,
    CheckReport,
    DeliveryCount,
    PostingRecord,
    StaleRule,
    Store,
    TournamentRecord,
    UnitOfWork,
    UserRecord,
    open_store,
)
from .views import (
    HOUSE_FIELDS,
    Balance,
    BetPosting,
    BetView,
    HoldView,
    HourActivity,
    HouseReport,
    Movement,
    PoolReport,
    StatementLine,
    TournamentView,
    UserView,
    timestamp_text,
)
from .writer import Command, DirectWriter, GroupCommit, Writer
from .writer.process import ChildSpec, ProcessWriter

if TYPE_CHECKING:
    from .reconcile import Reconciliation, Source

__all__ = ["ClosedBets", "Ledger", "PlacedBets", "open_ledger", "parse_instant"]

# The house summary's fields that count entries rather than amounts.
HOUSE_COUNTS = frozenset({"entries", "ticket_entries", "unique_players"})

T = TypeVar("T")
R = TypeVar("R")

Payload = Mapping[str, Any] | bytes | bytearray | str

# A waiting reader of the feed asks the database this often (seconds) for other processes'
# events, and looks at this process's own commits (a counter in memory) every tick.
EVENT_POLL = 0.2
EVENT_TICK = 0.01

# The bet view lists at most this many of the deliveries that named the bet, newest first
# (a bet is named by its Place Bet, the re-sends and its refund or settle: a handful).
BET_DELIVERIES = 100

# Bodies larger than this are decoded on a worker thread: a settle of a million participants is
# 300 MB of JSON and takes seconds, which must not stall the caller (an event loop, say).
INLINE_BODY = 64 * 1024
# The fewest bytes a bet takes in a body (`{"user":{"uid":"u"},"bet":{"uid":1,"payout":0}}`):
# a body's length over this bounds how many bets it can carry.
BYTES_PER_BET = 48


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
        stale_hold_grace: timedelta = DEFAULT_STALE_HOLD_GRACE,
        stale_hold_days: float = DEFAULT_STALE_HOLD_DAYS,
        read_store: Store | None = None,
        writer_process: ChildSpec | None = None,
    ) -> None:
        self.store = store
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
            # Place Bets to a group commit in a child process (ledger.writer_process).
            self.writer = ProcessWriter(self.writer, writer_process)
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
            answer: Future[R] = Future()
            decoders.submit(_answer_paused, answer, self.writer, payload, command)
            return answer
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
        self,
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None = None,
        *,
        request_id: str | None = None,
    ) -> Movement:
        """Credit ``user`` from outside; idempotent by ``reference`` (a fresh one if omitted).
        ``request_id`` (an ``X-Request-Id``) is carried by its event."""
        return self._move(domain.deposit, user, currency, amount, reference, request_id)

    def withdraw(
        self,
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None = None,
        *,
        request_id: str | None = None,
    ) -> Movement:
        """Pay ``user`` out; refused with ``user.insufficient_funds`` when available is short."""
        return self._move(domain.withdrawal, user, currency, amount, reference, request_id)

    def _move(
        self,
        decide: Callable[[str, str, int, str], domain.Transaction],
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None,
        request_id: str | None = None,
    ) -> Movement:
        user, currency = check_user(user), check_currency(currency)
        reference = check_text(reference, "reference") if reference is not None else new_reference()
        minor = self._minor(parse_decimal(amount), currency, "amount")
        # Bounded like a delivery's: a hostile header must not become a huge row.
        request_id = None if request_id is None else request_id[:255]
        applied = self.writer.run(
            Move(decide(user, currency, minor, reference), request_id=request_id)
        )
        return Movement(reference, user, currency, self._decimal(minor, currency), applied)

    # --- the callbacks --------------------------------------------------------------------------

    def place_bets(self, payload: PlaceBetsRequest | Payload) -> PlacedBets:
        """Place Bet: hold ``amount + rake`` for every new entry, all or none.

        Re-sent entries are answered without a second debit; the user's shortfall on any entry
        fails the whole request with ``user.insufficient_funds``.
        """
        return _run_paused(self.writer, payload, self._place_command)

    def submit_place_bets(
        self, payload: PlaceBetsRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[PlacedBets]:
        """Place Bet without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._place_command(body, delivery))

    def _place_command(
        self, payload: PlaceBetsRequest | Payload, delivery: Delivery | None = None
    ) -> PlaceBets:
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
        seen = _seen([item.pool for item in request.bets], [item.user for item in request.bets])
        return PlaceBets(PlaceRequest(entries, new_reference()), delivery, seen)

    def refund(self, payload: RefundRequest | Payload) -> ClosedBets:
        """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once."""
        return _run_paused(self.writer, payload, self._refund_command)

    def submit_refund(
        self, payload: RefundRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[ClosedBets]:
        """Refund without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._refund_command(body, delivery))

    def _refund_command(
        self, payload: RefundRequest | Payload, delivery: Delivery | None = None
    ) -> RefundBets:
        request = validate(RefundRequest, payload)
        seen = _pools_seen(request)
        return RefundBets(request, new_reference(), self.currencies.scale, delivery, seen)

    def settle(self, payload: SettleRequest | Payload) -> ClosedBets:
        """Settle Bet: capture each hold and credit positive payouts, each bet exactly once."""
        return _run_paused(self.writer, payload, self._settle_command)

    def submit_settle(
        self, payload: SettleRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[ClosedBets]:
        """Settle without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._settle_command(body, delivery))

    def _settle_command(
        self, payload: SettleRequest | Payload, delivery: Delivery | None = None
    ) -> SettleBets:
        request = validate(SettleRequest, payload)
        seen = _pools_seen(request)
        return SettleBets(request, new_reference(), self.currencies.scale, delivery, seen)

    # --- reads ----------------------------------------------------------------------------------

    def balance(self, user: str, currency: str | None = None) -> list[Balance]:
        """The user's balances, one per currency (or only ``currency``)."""
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        rows = self._read(lambda uow: uow.balances(user))
        return self._balances(rows, wanted)

    def _balances(self, rows: list[AccountBalance], wanted: str | None) -> list[Balance]:
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
        before: int | str | None = None,
    ) -> list[StatementLine]:
        """The user's movements, newest first; page with ``before`` = the last line's ``id``
        (or use :meth:`statement_page` and its opaque cursor)."""
        return self.statement_page(user, currency, limit=limit, before=before).items

    def statement_page(
        self,
        user: str,
        currency: str | None = None,
        *,
        limit: int = 50,
        before: int | str | None = None,
    ) -> Page[StatementLine]:
        """A page of the user's movements, newest first, each with the balance after it.

        ``before`` is the previous page's ``next`` (an opaque cursor) or, as before cursors
        existed, a line ``id`` (an integer, or its decimal text): only older lines follow.
        """
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidRequest("limit must be between 1 and 10000")
        older_than = _statement_position(before)
        rows = self._read(lambda uow: uow.statement(user, wanted, limit + 1, older_than))
        lines = [
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
                balance_after=(
                    None
                    if row.balance_after is None
                    else self._decimal(row.balance_after, row.currency)
                ),
                pool_uid=row.pool_uid,
            )
            for row in rows
        ]
        return page_of(lines, limit, lambda line: (line.id,))

    def statement_export(self, user: str, currency: str | None = None) -> Iterator[StatementLine]:
        """Every line of the user's statement, newest first, read a page at a time (for CSV)."""
        return every(
            lambda after: self.statement_page(user, currency, limit=EXPORT_PAGE, before=after)
        )

    def balance_at(
        self, user: str, at: datetime | str, currency: str | None = None
    ) -> list[Balance]:
        """The user's balances at the moment ``at`` (ISO 8601 with a zone), exactly: per
        account, the balance its last posting at or before ``at`` left. Currencies the user
        had no posting in by then are left out (or zero, for the ``currency`` asked for)."""
        user = check_user(user)
        moment = parse_instant(at, "at")
        wanted = check_currency(currency) if currency else None
        rows = self._read(lambda uow: uow.balances_at(user, moment))
        return self._balances(rows, wanted)

    def holds(
        self,
        *,
        stale: bool = False,
        user: str | None = None,
        pool_uid: int | None = None,
        older_than: timedelta | str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> Page[HoldView]:
        """Open holds (placed bets not yet settled or refunded), oldest first, a page at a time.

        ``stale``: only those to chase (see :meth:`stale_rule`); ``older_than``: placed longer
        ago than this (a ``timedelta``, or text such as ``2d``, ``12h``); ``before``: the
        previous page's ``next``.
        """
        who = check_user(user) if user is not None else None
        pool = check_id(pool_uid, "pool") if pool_uid is not None else None
        limit = check_limit(limit)
        after = position(before, str, int)
        start = None if after is None else (parse_instant(str(after[0]), "before"), int(after[1]))
        rule = self.stale_rule()
        age = _duration(older_than, "older_than") if older_than is not None else None
        placed_by = None if age is None else rule.now - age
        rows = self._read(
            lambda uow: uow.holds(
                limit=limit + 1,
                after=start,
                user=who,
                pool_uid=pool,
                placed_by=placed_by,
                rule=rule,
                only_stale=stale,
            )
        )
        views = [
            HoldView(
                uid=row.uid,
                user=row.user,
                pool_uid=row.pool_uid,
                currency=row.currency,
                amount=self._decimal(row.amount, row.currency),
                rake=self._decimal(row.rake, row.currency),
                funding=row.funding,
                placed_at=row.placed_at,
                stale=row.stale,
            )
            for row in rows
        ]
        return page_of(views, limit, lambda hold: (timestamp_text(hold.placed_at), hold.uid))

    def holds_export(self, *, stale: bool = False, **filters: Any) -> Iterator[HoldView]:
        """Every open hold the filters of :meth:`holds` select, read a page at a time."""
        return every(
            lambda after: self.holds(stale=stale, limit=EXPORT_PAGE, before=after, **filters)
        )

    def stale_rule(self) -> StaleRule:
        """When an open hold is stale, now: its tournament's estimated end plus the grace
        (``LEDGER_STALE_HOLD_GRACE``) has passed or, without an end time, it is older than
        ``LEDGER_STALE_HOLD_DAYS``."""
        return StaleRule(
            now=datetime.now(UTC),
            grace=self.stale_hold_grace,
            max_age=timedelta(days=self.stale_hold_days),
        )

    def count_stale_holds(self) -> int:
        """How many open holds are stale now (the ``ledger_stale_holds`` gauge)."""
        rule = self.stale_rule()
        return self._read(lambda uow: uow.count_stale_holds(rule))

    def house(
        self,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        currency: str | None = None,
    ) -> HouseReport:
        """Per currency, the house accounts' balances now, and over ``[since, until)``:
        deposits, withdrawals, stakes captured, rake earned, prizes paid, ticket-funded
        entries, refunds, entries and unique players, exact from the postings and bets."""
        start = None if since is None else parse_instant(since, "since")
        end = None if until is None else parse_instant(until, "until")
        wanted = check_currency(currency) if currency else None
        if start is not None and end is not None and end < start:
            raise InvalidRequest("until must not be before since")
        rows = self._read(lambda uow: uow.house_totals(start, end, wanted))
        currencies = []
        for row in rows:
            scale = self.currencies.scale(row.currency)
            item: dict[str, Any] = {
                "currency": row.currency,
                "balances": {name: render(value, scale) for name, value in row.balances.items()},
            }
            for name in HOUSE_FIELDS:
                value = getattr(row, name)
                item[name] = value if name in HOUSE_COUNTS else render(value, scale)
            currencies.append(item)
        return HouseReport(since=start, until=end, currencies=currencies)

    def activity(self, days: int = 7, *, now: datetime | None = None) -> list[HourActivity]:
        """Per hour of the last ``days`` days (up to ``now``) and currency: entries placed,
        their stakes, and payouts settled; quiet hours are left out. Oldest first."""
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 366:
            raise InvalidRequest("days must be between 1 and 366")
        until = now or datetime.now(UTC)
        rows = self._read(lambda uow: uow.hourly_totals(until - timedelta(days=days), until))
        return [
            HourActivity(
                hour=row.hour,
                currency=row.currency,
                entries=row.entries,
                stakes=self._decimal(row.stakes, row.currency),
                payouts=self._decimal(row.payouts, row.currency),
            )
            for row in rows
        ]

    def delivery_counts(
        self, hours: int = 24, *, now: datetime | None = None
    ) -> list[DeliveryCount]:
        """The deliveries of the last ``hours`` hours, counted by event, status and error key."""
        if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= 24 * 366:
            raise InvalidRequest("hours must be between 1 and 8784")
        since = (now or datetime.now(UTC)) - timedelta(hours=hours)
        return self._read(lambda uow: uow.count_deliveries(since))

    def bet(self, uid: int) -> BetView | None:
        """The recorded bet with its user's and tournament's names and its postings, or
        ``None``."""
        uid = check_id(uid, "bet uid")

        def read(
            uow: UnitOfWork,
        ) -> tuple[BetRecord | None, list[PostingRecord], list[DeliveryRecord]]:
            found = uow.bet(uid)
            if found is None:
                return None, [], []
            named = uow.deliveries(DeliveryFilter(bet=uid), BET_DELIVERIES, None)
            return found, uow.bet_postings(found), named

        found, legs, named = self._read(read)
        if found is None:
            return None
        return self._bet_view(found, [self._posting(leg) for leg in legs], named)

    def _bet_view(
        self,
        record: BetRecord,
        postings: list[BetPosting] | None = None,
        deliveries: Sequence[DeliveryRecord] = (),
    ) -> BetView:
        found = record.bet
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
            placed_at=record.placed_at,
            closed_at=record.closed_at,
            user_name=record.user_name,
            pool_name=record.pool_name,
            postings=postings,
            deliveries=tuple(deliveries),
        )

    def _posting(self, leg: PostingRecord) -> BetPosting:
        return BetPosting(
            id=leg.id,
            created_at=leg.created_at,
            account=leg.account,
            currency=leg.currency,
            amount=self._decimal(leg.amount, leg.currency),
            kind=leg.kind,
            reference=leg.reference,
            transaction_id=leg.transaction_id,
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

    def reconcile(self, source: Source, *, pools_only: bool = False) -> Reconciliation:
        """Compare a file of the platform's bets with the books (see :mod:`ledger.reconcile`).

        ``source`` is a path, raw bytes or a binary file (CSV, TSV, JSON array or JSON lines);
        with ``pools_only`` only the file's pools count as the books. Reads only, in one read
        unit of work (one snapshot). Use the result as a context manager.
        """
        # Imported here: sqlite-utils takes most of a second to import, which a process that
        # never reconciles (every callback server) should not pay at start.
        from .reconcile import reconcile

        with self.store.unit_of_work(write=False) as uow:
            return reconcile(source, uow.bet_records, self.currencies, pools_only=pools_only)

    # --- the delivery journal -------------------------------------------------------------------

    def record_delivery(self, record: DeliveryRecord) -> Future[None]:
        """Write a refused delivery's journal row after the fact: a future of the write.

        Through the writer like every write; on SQLite it rides in a group commit, so a flood
        of refusals costs the accepted deliveries no extra commits.
        """
        return self.writer.submit(RecordDelivery(record))

    def deliveries(
        self,
        wanted: DeliveryFilter | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
    ) -> Page[DeliveryRecord]:
        """Journal rows matching ``wanted``, newest first; ``before`` is a page's ``next``."""
        limit = check_limit(limit)
        after = _delivery_position(before)
        chosen = wanted or DeliveryFilter()
        rows = self._read(lambda uow: uow.deliveries(chosen, limit + 1, after))
        return page_of(rows, limit, _delivery_key)

    def prune_deliveries(self, days: int, *, batch: int = 1000) -> int:
        """Delete journal rows received more than ``days`` days ago, ``batch`` rows per
        transaction (no long lock on a busy server); answers how many were deleted."""
        cutoff = retention_cutoff(days)
        total = 0
        while True:
            gone = self.writer.run(PruneDeliveries(cutoff, batch))
            total += gone
            if gone < batch:
                return total

    # --- the event feed (ledger.events) ---------------------------------------------------------

    def events(
        self,
        after: int | str | None = 0,
        *,
        limit: int = DEFAULT_LIMIT,
        types: str | Sequence[str] | None = None,
    ) -> EventPage:
        """Committed events above id ``after``, oldest first, at most ``limit`` (1 to 1000),
        only those of ``types`` when given; read on from the page's ``next``."""
        start = events.parse_after(after)
        size = check_limit(limit)
        wanted = events.parse_types(types)
        scale = self.currencies.scale
        rows = self._read(lambda uow: uow.events(start, size, wanted))
        found = [events.to_event(event_id, at, row, scale) for event_id, at, row in rows]
        return EventPage(found, found[-1].id if found else start)

    def last_event_id(self) -> int:
        """The newest committed event's id (0 before the first): the feed's head."""
        return self._read(lambda uow: uow.last_event_id())

    @property
    def events_appended(self) -> int:
        """Events this process has committed (it changes as soon as one commits: a waiter
        in this process need not ask the database until it does)."""
        return self.store.events_appended

    def wait_for_events(
        self,
        after: int | str | None = 0,
        *,
        wait: float | str | None = None,
        limit: int = DEFAULT_LIMIT,
        types: str | Sequence[str] | None = None,
        poll: float = EVENT_POLL,
    ) -> EventPage:
        """:meth:`events`, waiting up to ``wait`` seconds (at most ``events.MAX_WAIT``) for one
        to commit when there is none yet. Between reads it holds no connection; it reads again
        every ``poll`` seconds, or at once when this process commits an event."""
        seconds = events.parse_wait(wait)
        deadline = time.monotonic() + seconds
        while True:
            seen = self.events_appended
            page = self.events(after, limit=limit, types=types)
            left = deadline - time.monotonic()
            if page.events or left <= 0:
                return page
            until = time.monotonic() + min(poll, left)
            while time.monotonic() < until and self.events_appended == seen:
                time.sleep(EVENT_TICK)

    def prune_events(self, days: int, *, batch: int = 1000, keep_undelivered: bool = True) -> int:
        """Delete events committed more than ``days`` days ago, ``batch`` transactions' events
        per unit of work; answers how many events were deleted. Unless ``keep_undelivered`` is
        false, none past the cursor of the slowest webhook endpoint (:meth:`slowest_webhook`)."""
        cutoff = retention_cutoff(days)
        total = 0
        while gone := self.writer.run(PruneEvents(cutoff, batch, keep_undelivered)):
            total += gone
        return total

    def slowest_webhook(self) -> tuple[str, int] | None:
        """The webhook endpoint that has received the fewest events, and its cursor (the last
        event id it received); ``None`` when no endpoint was ever configured."""
        return self._read(lambda uow: uow.slowest_webhook(), primary=True)

    # --- the directory: tournaments, users, bets (ledger.directory) ----------------------------

    def tournaments(
        self,
        status: str | None = None,
        search: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
    ) -> Page[TournamentView]:
        """Tournaments, newest first (by when the ledger first saw them), a page at a time.

        ``status``: only those whose last status seen is this one; ``search``: a
        case-insensitive substring of the name or of the uid. ``before``: the previous page's
        ``next`` cursor.
        """
        status = _filter_text(status, "status")
        search = _filter_text(search, "q")
        limit = check_limit(limit)
        key = position(before, str, int)
        after = None if key is None else (_cursor_time(key[0]), int(key[1]))
        rows = self._read(lambda uow: uow.tournaments(status, search, limit + 1, after))
        page = page_of(rows, limit, lambda row: (timestamp_key(row.first_seen), row.uid))
        return Page([_tournament_view(row) for row in page.items], page.next)

    def tournament(self, uid: int) -> TournamentView | None:
        """The tournament with its report per currency, or ``None`` when no payload and no bet
        named it."""
        uid = check_id(uid, "pool uid")
        found = self._read(lambda uow: uow.tournament(uid))
        if found is None:
            return None
        return _tournament_view(found, self.pool_report(uid))

    def users(
        self, search: str | None = None, *, limit: int = DEFAULT_LIMIT, before: str | None = None
    ) -> Page[UserView]:
        """Users the payloads described, newest first, a page at a time.

        ``search``: a case-insensitive substring of the uid or of the name.
        """
        search = _filter_text(search, "q")
        limit = check_limit(limit)
        key = position(before, str, str)
        after = None if key is None else (_cursor_time(key[0]), str(key[1]))
        rows = self._read(lambda uow: uow.users(search, limit + 1, after))
        # Every listed user has a first_seen: only users known by an account alone lack one,
        # and those are not in the list.
        page = page_of(rows, limit, lambda row: (timestamp_key(row.first_seen or _EPOCH), row.uid))
        return Page([_user_view(row) for row in page.items], page.next)

    def user(self, uid: str) -> UserView | None:
        """The user with their balances; ``None`` unless a payload named them or they hold an
        account (a deposit creates one)."""
        uid = check_user(uid)
        found = self._read(lambda uow: uow.user(uid))
        if found is None:
            return None
        return _user_view(found, self.balance(uid))

    def require_user(self, uid: str) -> None:
        """Raise ``user.not_found`` (404) unless a payload named the user or they hold an
        account: an unknown user must not look like one with nothing."""
        uid = check_user(uid)
        if self._read(lambda uow: uow.user(uid)) is None:
            raise UserNotFound(f"user {uid} is unknown")

    def bets(
        self,
        user: str | None = None,
        pool: int | None = None,
        state: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
    ) -> Page[BetView]:
        """Bets by uid, highest first, filtered by user, tournament and state, a page at a time."""
        user = None if user is None else check_user(user)
        pool = None if pool is None else check_id(pool, "pool")
        if state is not None and state not in _STATES:
            raise InvalidRequest(f"state: expected one of {', '.join(_STATES)}")
        limit = check_limit(limit)
        key = position(before, int)
        after = None if key is None else int(key[0])
        rows = self._read(lambda uow: uow.bets(user, pool, state, limit + 1, after))
        page = page_of(rows, limit, lambda row: (row.bet.uid,))
        return Page([self._bet_view(row) for row in page.items], page.next)

    def check(self) -> CheckReport:
        """Verify the journal's invariants (DESIGN section 4) over the whole database."""
        return self._read(lambda uow: uow.check(), primary=True)

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""
        self._read(lambda uow: uow.ping(), primary=True)


def _delivery_key(row: DeliveryRecord) -> tuple[str, int]:
    return (timestamp_key(row.received_at), row.id or 0)


def _delivery_position(before: str | None) -> tuple[datetime, int] | None:
    key = position(before, str, int)
    return None if key is None else (_cursor_time(key[0]), int(key[1]))


_STATES = tuple(state.value for state in domain.BetState)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _seen(pools: Iterable[Pool], users: Iterable[User]) -> Seen:
    """What a payload said of its tournaments and users, one record per uid, sorted.

    Within one payload the last description of a uid wins whole (a payload describes a
    tournament the same way in each of its entries); across payloads the writer merges field
    by field (:func:`ledger.directory.merge`). Hot: built for every Place Bet, so no merge here.
    """
    # The last description of each user wins whole (``directory.described``); keeping only it
    # before labelling labels each user once, not once per entry of a 1,000-entry Place Bet.
    last_users = {user.uid: user for user in users}
    return Seen(
        _tournaments_seen(pools), directory.described(directory.users_seen(last_users.values()))
    )


def _tournaments_seen(pools: Iterable[Pool]) -> tuple[TournamentSeen, ...]:
    """The tournaments a payload described, one record per uid (the last), sorted."""
    label = directory.label
    last_pools = {pool.uid: pool for pool in pools}
    return tuple(
        TournamentSeen(
            uid=pool.uid,
            name=label(pool.name),
            currency=None if (code := label(pool.currency)) is None else code.upper(),
            category=label(pool.category),
            game_type=label(pool.game_type),
            status=label(pool.status),
            estimated_end=(
                None
                if pool.estimated_end_time is None
                else directory.end_time(pool.estimated_end_time)
            ),
        )
        for _, pool in sorted(last_pools.items())
    )


def _bets_in(payload: Any) -> int:
    """How many bets ``payload`` carries, at most: a raw body's length over
    :data:`BYTES_PER_BET`, a parsed body's or a model's lists; 0 for a shape that validation
    will refuse."""
    if isinstance(payload, bytes | bytearray | str):
        return len(payload) // BYTES_PER_BET
    if isinstance(payload, Mapping):
        pools = payload.get("pools")
        parts = pools if isinstance(pools, list) else [payload]
        return sum(
            len(bets)
            for part in parts
            if isinstance(part, Mapping) and isinstance(bets := part.get("bets"), list)
        )
    if isinstance(payload, PlaceBetsRequest):
        return len(payload.bets)
    if isinstance(payload, RefundRequest | SettleRequest):
        return sum(len(pool.bets) for pool in payload.pools)
    return 0


def _run_paused(writer: Writer, payload: Any, command: Callable[[Any], Command[R]]) -> R:
    """Build the command of ``payload`` and run it, in the calling thread: :func:`_answer_paused`
    with the caller waiting for the answer."""
    answer: Future[R] = Future()
    _answer_paused(answer, writer, payload, command)
    return answer.result()


def _answer_paused(
    answer: Future[R], writer: Writer, payload: Any, command: Callable[[Any], Command[R]]
) -> None:
    """Build the command of ``payload``, run it and answer, the garbage collector paused for a
    huge body: decoding a million-participant settle and building its command allocate
    millions of objects (none in cycles), and the collector's passes over them were 45% of that
    time. The writer pauses it again while it applies; one pause across both leaves no gap.

    The command's objects (claims, users, staged rows of a huge close) are freed after the
    answer rather than before it (0.3 s at a million participants, on a worker thread while the
    caller answers), and still within the pause: made while it was paused, they are all in its
    youngest generation, and its first pass after would walk every one of them (0.14 s a pass
    per million objects here)."""
    if not answer.set_running_or_notify_cancel():
        return
    try:
        with paused_gc(_bets_in(payload)):
            built = command(payload)
            answer.set_result(writer.run(built))
            del built
    except BaseException as error:  # noqa: BLE001 - the caller's, as a pool's future has it
        answer.set_exception(error)


def _pools_seen(request: RefundRequest | SettleRequest) -> Seen:
    """What a refund or settle said of its tournaments. Its users, one per item, the writer
    reads from the request itself (a huge close records them in SQL from its staged items,
    rather than sorting and upserting a million of them from Python: ``ledger.writer``)."""
    return Seen(_tournaments_seen(pool.pool for pool in request.pools))


def _filter_text(value: str | None, name: str) -> str | None:
    return None if value is None or value == "" else check_text(value, name)


def timestamp_key(moment: datetime) -> str:
    """A stored timestamp as a cursor part: ISO 8601 in UTC (SQLite hands back naive UTC)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).isoformat()


def _cursor_time(text: int | str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        raise InvalidRequest("not a cursor this API gave", key="request.invalid_cursor") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _tournament_view(row: TournamentRecord, report: PoolReport | None = None) -> TournamentView:
    return TournamentView(
        uid=row.uid,
        name=row.name,
        currency=row.currency,
        category=row.category,
        game_type=row.game_type,
        status=row.status,
        estimated_end_time=row.estimated_end_time,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        entries=row.entries,
        report=report,
    )


def _user_view(row: UserRecord, balances: list[Balance] | None = None) -> UserView:
    return UserView(
        uid=row.uid,
        name=row.name,
        client=row.client,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        balances=balances,
    )


def open_ledger(
    url: str = "sqlite:///ledger.db",
    *,
    currencies: CurrencyTable | None = None,
    migrate: bool | None = None,
    group_commit: bool | None = None,
    max_queue: int = 10_000,
    max_wait: float = 10.0,
    threads: int = 16,
    stale_hold_grace: timedelta = DEFAULT_STALE_HOLD_GRACE,
    stale_hold_days: float = DEFAULT_STALE_HOLD_DAYS,
    read_url: str | None = None,
    writer_process: bool = False,
    **store_options: Any,
) -> Ledger:
    """Open the ledger in the database ``url`` names (the one composition root of the library).

    ``sqlite:///path.db`` creates and upgrades the file itself; Postgres URLs expect
    ``ledger db upgrade`` to have run (or pass ``migrate=True``). ``group_commit`` (default on)
    applies concurrent writes in shared transactions, one durable commit per batch; at most
    ``max_queue`` writes wait for the writer, and none is queued while it has been stuck on one
    batch for ``max_wait`` seconds (both refused with 503 ``store.busy``). ``threads`` writers
    apply the writes that do not go through group commit. An open hold is stale once its
    tournament's estimated end plus ``stale_hold_grace`` has passed or, without an end time,
    after ``stale_hold_days`` (see :meth:`Ledger.stale_rule`). ``read_url`` names a read
    replica (a streaming standby) that reports read from; see :meth:`Ledger._read`.
    ``writer_process`` applies Place Bets in a child process with a GIL of its own (the
    callback server's default; see :mod:`ledger.writer_process`).
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
        stale_hold_grace=stale_hold_grace,
        stale_hold_days=stale_hold_days,
        read_store=read_store,
        writer_process=(
            ChildSpec(url, store_options, max_queue, max_wait) if writer_process else None
        ),
    )


def parse_instant(value: datetime | str, name: str) -> datetime:
    """A moment given as ISO 8601 text (or a ``datetime``), which must name its zone.

    A time without a zone is refused (400) rather than guessed: "midnight" in the operator's
    zone and in UTC are hours apart, and the balances between them differ.
    """
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidRequest(
                f"{name}: expected an ISO 8601 time such as 2026-11-20T00:00:00Z, got {value!r}"
            ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise InvalidRequest(f"{name}: expected an ISO 8601 time")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidRequest(f"{name}: {value!s} has no zone; add Z (UTC) or an offset (+02:00)")
    return moment.astimezone(UTC)


def _statement_position(before: int | str | None) -> int | None:
    """The posting id a statement page continues below: from a cursor, or a bare id."""
    if before is None or before == "":
        return None
    # ASCII only: str.isdigit() also admits "²", which int() then refuses (a 500).
    if isinstance(before, str) and before.isascii() and before.strip().lstrip("-").isdigit():
        before = int(before)
    if isinstance(before, int):
        return check_id(before, "before")
    found = position(before, int)
    return None if found is None else check_id(found[0], "before")


def _duration(value: timedelta | str, name: str) -> timedelta:
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise InvalidRequest(f"{name}: must not be negative")
        return value
    try:
        return parse_duration(value, name)
    except SettingsError as error:
        raise InvalidRequest(str(error)) from None
