"""Use cases: the embedded ledger API over one store.

Each write use case validates its input, then runs as one unit of work: load the bets it names,
ask the domain what to do for each, write the result, commit. Every request is all-or-nothing: the
domain decides every item before anything is written, and any error rolls the whole unit back.
A lost race with a concurrent writer (a unique key, a deadlock) re-runs the whole request, which
then sees the winner's work and treats it as the idempotent re-send it is.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from types import TracebackType
from typing import Any, Self, TypeVar

from . import domain
from .batching import GroupCommit
from .contract import (
    INT64_MAX,
    PlaceBetsRequest,
    RefundParticipant,
    RefundRequest,
    SettleParticipant,
    SettleRequest,
    validate,
)
from .currencies import CurrencyTable
from .domain import Bet, Closing, Entry, RefundItem, SettleItem, Transaction, TxnKind
from .errors import InsufficientFunds, InvalidRequest, LedgerError, StoreBusy
from .money import from_minor, parse_decimal, render, to_minor
from .stores import CheckReport, Retry, Store, UnitOfWork, open_store

__all__ = [
    "Balance",
    "BetView",
    "ClosedBets",
    "Ledger",
    "Movement",
    "PlacedBets",
    "PoolReport",
    "StatementLine",
    "open_ledger",
]

log = logging.getLogger("ledger")

T = TypeVar("T")
P = TypeVar("P", RefundParticipant, SettleParticipant)

Payload = Mapping[str, Any] | bytes | str


@dataclass(frozen=True, slots=True)
class Balance:
    """A user's money in one currency: ``available`` to spend, ``held`` for open entries."""

    currency: str
    available: Decimal
    held: Decimal

    def to_dict(self) -> dict[str, str]:
        return {"currency": self.currency, "available": str(self.available), "held": str(self.held)}


@dataclass(frozen=True, slots=True)
class StatementLine:
    """One movement on a user's available or held balance."""

    id: int
    created_at: datetime
    account: str
    currency: str
    amount: Decimal
    kind: str
    bet_uid: int | None
    reference: str | None
    transaction_id: int

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["amount"] = str(self.amount)
        # SQLite hands timestamps back without a zone; they were written in UTC.
        stamp = self.created_at
        data["created_at"] = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).isoformat()
        return data


@dataclass(frozen=True, slots=True)
class BetView:
    """A bet as the ledger recorded it, amounts as exact decimals."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: Decimal
    rake: Decimal
    funding: str
    state: str
    payout: Decimal | None
    payout_currency: str | None
    secrets: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("amount", "rake", "payout"):
            data[name] = None if data[name] is None else str(data[name])
        data["secrets"] = dict(self.secrets)
        return data


@dataclass(frozen=True, slots=True)
class PlacedBets:
    """The answer to Place Bet: ``secrets`` go back to the platform and are stored per bet."""

    secrets: dict[str, Any]
    placed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ClosedBets:
    """The answer to a refund or settle: which bets this request closed, which were already."""

    closed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Movement:
    """A deposit or withdrawal; ``applied`` is false for an idempotent re-send."""

    reference: str
    user: str
    currency: str
    amount: Decimal
    applied: bool


@dataclass(frozen=True, slots=True)
class _Placement:
    """A validated Place Bet request on its way to the writer."""

    entries: list[Entry]
    reference: str


@dataclass(frozen=True, slots=True)
class PoolReport:
    """A tournament's entries by currency: stakes, rake, payouts and what is still held."""

    pool_uid: int
    currencies: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"pool_uid": self.pool_uid, "currencies": self.currencies}


class Ledger:
    """A double-entry wallet ledger over one store. Build it with :func:`open_ledger`."""

    def __init__(
        self,
        store: Store,
        *,
        currencies: CurrencyTable | None = None,
        max_attempts: int = 8,
        group_commit: bool | None = None,
    ) -> None:
        self.store = store
        self.currencies = currencies or CurrencyTable()
        self.max_attempts = max_attempts
        # Group commit (ledger.batching): concurrent Place Bets are decided together and written
        # set-based in one transaction, one commit per batch. On by default on both stores; on
        # SQLite, the one-writer database, every write goes through the writer, while on
        # Postgres refunds, settles and movements keep their own connections so that a huge
        # settle never holds up entries.
        self.group_commit = (
            GroupCommit(store, max_attempts=max_attempts) if group_commit in (None, True) else None
        )
        self._all_writes_grouped = self.group_commit is not None and store.single_writer

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
        if self.group_commit is not None:
            self.group_commit.close()
        self.store.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _transact(self, work: Callable[[UnitOfWork], T]) -> T:
        """Run ``work`` in one unit of work and commit; re-run it when a concurrent writer won."""
        if self._all_writes_grouped:
            assert self.group_commit is not None
            return self.group_commit.run(work)
        for attempt in range(1, self.max_attempts + 1):
            try:
                with self.store.unit_of_work() as uow:
                    result = work(uow)
                    uow.commit()
                    return result
            except Retry as race:
                if attempt == self.max_attempts:
                    raise StoreBusy(f"gave up after {attempt} attempts: {race.message}") from race
                # Jittered backoff so that racing writers do not collide again in lockstep.
                time.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")

    def _read(self, work: Callable[[UnitOfWork], T]) -> T:
        with self.store.unit_of_work(write=False) as uow:
            return work(uow)

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
        user, currency = _user(user), _currency(currency)
        reference = _text(reference, "reference") if reference is not None else _reference()
        minor = self._minor(parse_decimal(amount), currency, "amount")
        requested = decide(user, currency, minor, reference)

        def work(uow: UnitOfWork) -> bool:
            existing = uow.get_transaction(requested.key)
            if existing is not None:
                domain.same_movement(existing, requested)
                return False
            uow.post([requested])
            return True

        applied = self._transact(work)
        return Movement(reference, user, currency, self._decimal(minor, currency), applied)

    # --- the callbacks --------------------------------------------------------------------------

    def place_bets(self, payload: PlaceBetsRequest | Payload) -> PlacedBets:
        """Place Bet: hold ``amount + rake`` for every new entry, all or none.

        Re-sent entries are answered without a second debit; the user's shortfall on any entry
        fails the whole request with ``user.insufficient_funds``.
        """
        request = validate(PlaceBetsRequest, payload)
        with _bulk(len(request.bets)):
            entries = self._entries(request)
            return self._place(_Placement(entries, _reference())).result()

    def _entries(self, request: PlaceBetsRequest) -> list[Entry]:
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
        return entries

    def submit_place_bets(self, payload: PlaceBetsRequest | Payload) -> Future[PlacedBets]:
        """Place Bet without waiting: validates now, then returns a future of the result.

        With group commit (SQLite) the request is queued to the writer and the future resolves
        once its batch is durable, so an event loop can await it without a thread of its own.
        Without group commit the work runs here, and the future is already done.
        """
        request = validate(PlaceBetsRequest, payload)
        return self._place(_Placement(self._entries(request), _reference()))

    def _place(self, placement: _Placement) -> Future[PlacedBets]:
        def alone(uow: UnitOfWork) -> PlacedBets:
            outcome = self._place_requests(uow, [placement], alone=True)[0]
            assert isinstance(outcome, PlacedBets)
            return outcome

        if self.group_commit is None:
            done: Future[PlacedBets] = Future()
            try:
                done.set_result(self._transact(alone))
            except BaseException as error:  # noqa: BLE001 - delivered through the future
                done.set_exception(error)
            return done
        if len(placement.entries) > CHUNK:
            # A huge request is written chunk by chunk as it goes: it must run alone.
            return self.group_commit.submit(alone)
        return self.group_commit.submit(alone, group=self._place_requests, item=placement)

    def _place_requests(
        self, uow: UnitOfWork, requests: list[_Placement], *, alone: bool = False
    ) -> list[PlacedBets | LedgerError]:
        """Decide and write several Place Bet requests with set-based writes.

        Each request is decided in memory against the bets and available balances read once,
        all of it or none of it: a failing request leaves no trace and gets its error as its
        outcome. On SQLite the writer holds the database lock, so nothing changes meanwhile; on
        Postgres another process may, and then the store's conditional debits and unique keys,
        which guard every write, make the whole group fail, and the group commit applies its
        requests one by one instead (see ledger.batching). ``alone`` is the single-request path:
        errors are raised, and a huge request is flushed chunk by chunk.
        """
        known: dict[int, Bet | None] = {}
        balances: dict[tuple[str, str], int] = {}
        pending_bets: list[Bet] = []
        pending: list[Transaction] = []

        def flush() -> None:
            uow.add_bets(pending_bets)
            uow.post(pending)
            pending_bets.clear()
            pending.clear()

        def load(entries: list[Entry]) -> None:
            missing = [entry.bet_uid for entry in entries if entry.bet_uid not in known]
            if missing:
                found = uow.get_bets(missing)
                known.update({uid: found.get(uid) for uid in missing})
            debited = {
                (domain.user_account(entry.user), entry.currency)
                for entry in entries
                if not entry.ticket and entry.total
            }
            missing_accounts = [key for key in debited if key not in balances]
            if missing_accounts:
                found_balances = uow.account_balances(missing_accounts)
                balances.update({key: found_balances.get(key, 0) for key in missing_accounts})

        if not alone:
            load([entry for request in requests for entry in request.entries])
        outcomes: list[PlacedBets | LedgerError] = []
        for request in requests:
            secrets = {"ledger_ref": request.reference}
            mine: dict[int, Bet] = {}
            fresh: list[Bet] = []
            spent: dict[tuple[str, str], int] = defaultdict(int)
            legs: list[domain.Posting] = []
            placed: list[int] = []
            unchanged: list[int] = []
            stored_secrets: Mapping[str, Any] = {}
            try:
                for number, chunk in enumerate(_chunks(request.entries)):
                    load(chunk)
                    for entry in chunk:
                        existing = mine.get(entry.bet_uid) or known[entry.bet_uid]
                        if not placed and not unchanged and existing is not None:
                            stored_secrets = existing.secrets
                        decided = domain.place(entry, existing, secrets)
                        if decided is None:
                            unchanged.append(entry.bet_uid)
                            continue
                        mine[entry.bet_uid] = decided.bet
                        fresh.append(decided.bet)
                        placed.append(entry.bet_uid)
                        for leg in decided.legs:
                            legs.append(leg)
                            key = (leg.account, leg.currency)
                            if leg.amount < 0 and key in balances:
                                spent[key] += leg.amount
                                if balances[key] + spent[key] < 0:
                                    raise InsufficientFunds(
                                        f"user {entry.user} has insufficient "
                                        f"{entry.currency} funds",
                                        bet_uid=entry.bet_uid,
                                    )
                    if alone and len(request.entries) > CHUNK:
                        pending_bets.extend(fresh)
                        fresh = []
                        if legs:
                            name = f"hold:{request.reference}:{number}"
                            pending.append(Transaction.journal(name, TxnKind.HOLD, legs))
                        legs = []
                        flush()
            except LedgerError as error:
                if alone:
                    raise
                outcomes.append(error)
                continue
            # The request holds: make it visible to the requests after it, and queue its writes.
            pending_bets.extend(fresh)
            known.update(mine)
            for key, amount in spent.items():
                balances[key] += amount
            if legs:
                name = f"hold:{request.reference}"
                pending.append(Transaction.journal(name, TxnKind.HOLD, legs))
            # A pure re-send answers with the secrets the platform already stored.
            answer = secrets if placed else dict(stored_secrets) or secrets
            outcomes.append(PlacedBets(secrets=answer, placed=placed, unchanged=unchanged))
        flush()
        return outcomes

    def refund(self, payload: RefundRequest | Payload) -> ClosedBets:
        """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once."""
        request = validate(RefundRequest, payload)
        with _bulk(sum(len(pool.bets) for pool in request.pools)):
            return self._refund(request)

    def _refund(self, request: RefundRequest) -> ClosedBets:
        items = [(pool.pool.uid, part) for pool in request.pools for part in pool.bets]

        def decide(item: tuple[int, RefundParticipant], bet: Bet | None) -> Closing | None:
            pool_uid, part = item
            closing = domain.refund(RefundItem(part.bet.uid, part.user.uid, pool_uid), bet)
            if closing is not None:
                self._note_refund_mismatch(closing.bet, part.bet)
            return closing

        return self._close(TxnKind.REFUND, items, decide)

    def settle(self, payload: SettleRequest | Payload) -> ClosedBets:
        """Settle Bet: capture each hold and credit positive payouts, each bet exactly once."""
        request = validate(SettleRequest, payload)
        with _bulk(sum(len(pool.bets) for pool in request.pools)):
            return self._settle(request)

    def _settle(self, request: SettleRequest) -> ClosedBets:
        items = [(pool.pool.uid, part) for pool in request.pools for part in pool.bets]

        def decide(item: tuple[int, SettleParticipant], bet: Bet | None) -> Closing | None:
            pool_uid, part = item
            currency = (part.bet.currency or (bet.currency if bet else "")).upper()
            payout = self._minor(part.bet.payout, currency, "bet.payout") if currency else 0
            settled = SettleItem(part.bet.uid, part.user.uid, pool_uid, payout, currency)
            return domain.settle(settled, bet)

        return self._close(TxnKind.SETTLE, items, decide)

    def _close(
        self,
        kind: TxnKind,
        items: list[tuple[int, P]],
        decide: Callable[[tuple[int, P], Bet | None], Closing | None],
    ) -> ClosedBets:
        """Close the bets of a refund or settle, chunk by chunk, in one unit of work.

        Chunks bound the memory a million-participant settle needs; they share the one database
        transaction, so the request stays all-or-nothing, and a later chunk sees what earlier
        ones wrote (a bet named twice is closed once).
        """
        reference = _reference()

        def work(uow: UnitOfWork) -> ClosedBets:
            closed: list[int] = []
            unchanged: list[int] = []
            for number, chunk in enumerate(_chunks(items)):
                known = uow.get_bets([part.bet.uid for _, part in chunk])
                closings: list[Bet] = []
                legs: list[domain.Posting] = []
                for item in chunk:
                    uid = item[1].bet.uid
                    closing = decide(item, known.get(uid))
                    if closing is None:
                        unchanged.append(uid)
                        continue
                    known[uid] = closing.bet
                    closings.append(closing.bet)
                    legs.extend(closing.legs)
                    closed.append(uid)
                uow.close_bets(closings)
                if legs:
                    key = f"{kind.value}:{reference}:{number}"
                    uow.post([Transaction.journal(key, kind, legs)])
            return ClosedBets(closed=closed, unchanged=unchanged)

        return self._transact(work)

    def _note_refund_mismatch(self, bet: Bet, sent: Any) -> None:
        # The ledger refunds what it recorded; a payload that disagrees is worth a look, not a
        # different refund.
        for name, recorded in (("amount", bet.amount), ("rake", bet.rake)):
            value = getattr(sent, name, None)
            if value is None:
                continue
            try:
                claimed = self._minor(value, bet.currency, name)
            except InvalidRequest:
                claimed = None
            if claimed != recorded:
                log.warning(
                    "refund payload disagrees with the recorded bet",
                    extra={"bet_uid": bet.uid, "field": name, "sent": str(value)},
                )

    # --- reads ----------------------------------------------------------------------------------

    def balance(self, user: str, currency: str | None = None) -> list[Balance]:
        """The user's balances, one per currency (or only ``currency``)."""
        user = _user(user)
        wanted = _currency(currency) if currency else None
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
        user = _user(user)
        wanted = _currency(currency) if currency else None
        if not 1 <= limit <= 10_000:
            raise InvalidRequest("limit must be between 1 and 10000")
        if before is not None:
            before = _int64(before, "before")
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
        uid = _int64(uid, "bet uid")
        found = self._read(lambda uow: uow.get_bets([uid])).get(uid)
        if found is None:
            return None
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
        )

    def pool_report(self, pool_uid: int) -> PoolReport:
        """Entries, stakes, rake, payouts and open holds of one tournament, per currency.

        Payouts are listed per payout currency (``{"JPY": "500"}``): a bet may be paid out in
        another currency than its own, and two currencies never add up.
        """
        pool_uid = _int64(pool_uid, "pool uid")
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
        return self._read(lambda uow: uow.check())

    def ping(self) -> None:
        """Raise :class:`~ledger.errors.StoreUnavailable` unless the database answers."""
        self._read(lambda uow: uow.ping())


# Bets per chunk of a large request: bounds memory while keeping every write set-based.
CHUNK = 50_000

# Requests with more bets than this run with the cyclic garbage collector paused (see _bulk).
BULK = 1_000
_paused = 0
_was_enabled = True
_paused_lock = threading.Lock()


@contextlib.contextmanager
def _bulk(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a huge request is applied.

    A settle of 100,000 participants allocates millions of small objects, and every few
    thousand allocations the collector walks all live ones: a third of the request's time.
    Nothing here forms reference cycles (reference counting frees it all), and the pause lasts
    as long as the request. Nested and concurrent pauses are counted.
    """
    global _paused, _was_enabled
    if size <= BULK:
        yield
        return
    with _paused_lock:
        _paused += 1
        if _paused == 1:
            _was_enabled = gc.isenabled()  # an embedding program may have its own reasons
            gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


C = TypeVar("C")


def _chunks(items: list[C]) -> Iterator[list[C]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _reference() -> str:
    """A fresh 128-bit reference (request transaction keys, Place Bet secrets).

    Drawn from a PRNG seeded by the OS rather than ``uuid4``: one urandom system call per
    request showed up in the Place Bet profile, and these only need to be unique.
    """
    return f"{_RANDOM.getrandbits(128):032x}"


_RANDOM = random.Random(random.SystemRandom().getrandbits(128))
# A forked child must not repeat its parent's references (they are unique keys).
os.register_at_fork(after_in_child=lambda: _RANDOM.seed(random.SystemRandom().getrandbits(128)))


def _int64(value: object, name: str) -> int:
    # Bad input must be a 400 here, not a driver error on the database's 64-bit column (an
    # OverflowError on SQLite, a 503 on Postgres).
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > INT64_MAX:
        raise InvalidRequest(f"{name}: expected a 64-bit integer")
    return value


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 255 or "\x00" in value:
        raise InvalidRequest(f"{name}: expected a non-empty string of at most 255 characters")
    return value


def _user(value: object) -> str:
    user = _text(value, "user")
    if not domain.is_valid_user_uid(user):
        raise InvalidRequest(f"user: a user uid must not end in {domain.HELD_SUFFIX!r}")
    return user


def _currency(value: object) -> str:
    # The same rule as the payload models' Currency: ASCII letters, digits and underscores.
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise InvalidRequest("currency: expected a currency code such as EUR")
    return value.upper()


_CURRENCY = re.compile(r"[A-Za-z0-9_]{1,16}")


def open_ledger(
    url: str = "sqlite:///ledger.db",
    *,
    currencies: CurrencyTable | None = None,
    migrate: bool | None = None,
    group_commit: bool | None = None,
    **store_options: Any,
) -> Ledger:
    """Open the ledger in the database ``url`` names (the one composition root of the library).

    ``sqlite:///path.db`` creates and upgrades the file itself; Postgres URLs expect
    ``ledger db upgrade`` to have run (or pass ``migrate=True``). ``group_commit`` (default on)
    applies concurrent writes in shared transactions, one durable commit per batch.
    """
    store = open_store(url, migrate=migrate, **store_options)
    return Ledger(store, currencies=currencies, group_commit=group_commit)
