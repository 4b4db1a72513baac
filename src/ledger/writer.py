"""The one write path: every write is a command, submitted to a writer that answers with a future.

A command (Place Bet, refund, settle, deposit or withdrawal) knows how to apply itself in one unit
of work: load what it names from the store, ask the domain what to do, write the decision. A
huge command is chunked here (:data:`CHUNK` bets at a time, in the one transaction), so that
memory stays bounded and every write stays set-based.

Two adapters of one port (:class:`Writer`), chosen once by :func:`ledger.open_ledger`:

- :class:`DirectWriter` applies each command in a unit of work of its own, and owns the one retry
  loop: a command that loses a race to a concurrent writer (a unique key, a deadlock) runs again
  and then sees the winner's work as the idempotent re-send it is.
- :class:`GroupCommit` queues commands to one writer thread, which applies a whole queue in one
  transaction, each command in its own savepoint (a failing one rolls back alone) and
  consecutive Place Bets decided together, commits once, and only then answers every command.
  SQLite with ``synchronous=FULL`` pays an fsync per commit, yet writes hundreds of thousands of
  rows a second inside one: this is how Postgres, TigerBeetle and pgledger amortise fsyncs.
  Its queue is bounded: past ``max_queue`` commands, or while the writer has been stuck on one
  batch for ``max_wait`` seconds, a new command is refused at once with 503 ``store.busy``.

Correctness does not depend on the batching: the database's unique keys, conditional debits and
triggers guard every write as before.
"""

from __future__ import annotations

import logging
import operator
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

from . import directory, domain, events
from ._process import paused_gc
from .contract import RefundRequest, SettleRequest
from .deliveries import Delivery, DeliveryRecord, answered_uids
from .directory import NOTHING_SEEN, Seen, UserSeen
from .domain import (
    Bet,
    ClosedBets,
    CloseDecision,
    PlacedBets,
    PlaceDecision,
    PlaceRequest,
    RefundItem,
    Replay,
    SettleClaim,
    Transaction,
)
from .errors import InvalidAmount, LedgerError, StoreBusy, StoreUnavailable
from .money import to_minor
from .stores import Retry, Staged, Store, UnitOfWork

__all__ = [
    "CHUNK",
    "SET_BASED_FROM",
    "Command",
    "DirectWriter",
    "GroupCommit",
    "Move",
    "PlaceBets",
    "PruneDeliveries",
    "PruneEvents",
    "RecordDelivery",
    "RefundBets",
    "SettleBets",
    "Writer",
    "closes_set_based",
]

log = logging.getLogger("ledger.writer")

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
C = TypeVar("C")
T = TypeVar("T")

# Bets per chunk of a huge request: bounds memory while keeping every write set-based.
CHUNK = 50_000

# Items from which a refund or settle is closed set-based, in the database (see _close_set):
# below it the domain's per-bet Python costs less than the staging's fixed statements. Measured
# (benchmarks/settle_cpu.py --set-based-from 0 vs never, process CPU): SQLite even at 300 items,
# ahead from 1,000 (0.066 vs 0.076 s); Postgres, client and server CPU, behind at 300 (0.107 vs
# 0.081 s), well ahead at 3,000 (0.32 vs 0.47 s).
SET_BASED_FROM = 1_000


class Command(Protocol[R_co]):
    """A write, applied in one unit of work; it raises a :class:`LedgerError` to refuse."""

    @property
    def size(self) -> int:
        """How many bets it carries (1 for a deposit): huge commands are never grouped."""
        ...

    def apply(self, uow: UnitOfWork) -> R_co:
        """Apply the command alone; nothing it wrote survives an exception."""
        ...


class Writer(Protocol):
    """Where commands go: both adapters answer with a future, resolved after the commit."""

    def submit(self, command: Command[R]) -> Future[R]:
        """Queue or start ``command``; its future holds the result or the error."""
        ...

    def run(self, command: Command[R]) -> R:
        """Apply ``command`` and wait for its durable result (or raise its error)."""
        ...

    def close(self) -> None:
        """Finish what was submitted, then stop."""
        ...


def _chunks(items: Sequence[C]) -> Iterator[tuple[int | None, Sequence[C]]]:
    """The chunks of a request, numbered when there are several (each gets a key of its own)."""
    if len(items) <= CHUNK:
        yield None, items
        return
    for number, start in enumerate(range(0, len(items), CHUNK)):
        yield number, items[start : start + CHUNK]


# --- the commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlaceBets:
    """Place Bet: hold every new entry of one request, all or none."""

    request: PlaceRequest
    # The delivery it came in (None: not journalled): its 200 row is written with its effects.
    delivery: Delivery | None = None
    # The tournaments and users the payload described, recorded with its effects.
    seen: Seen = NOTHING_SEEN

    @property
    def size(self) -> int:
        return len(self.request.entries)

    def apply(self, uow: UnitOfWork) -> PlacedBets:
        answers = []
        for part, entries in _chunks(self.request.entries):
            # A later chunk reads what earlier ones wrote (same transaction): an entry repeated
            # across chunks is held once, and the balances are what is left.
            piece = PlaceRequest(entries, self.request.reference, part)
            [decision] = _decide_places(uow, [piece])
            if isinstance(decision, LedgerError):
                raise decision
            _write_places(uow, [(decision, self.delivery)])
            answers.append(decision.answer)
        placed = domain.merge_placements(answers)
        # After the decisions: a refused request records nothing (its unit is rolled back).
        _record_seen(uow, self.seen)
        _journal(uow, [(self.delivery, placed)])
        return placed

    @staticmethod
    def apply_group(
        uow: UnitOfWork, commands: Sequence[PlaceBets]
    ) -> list[PlacedBets | LedgerError]:
        """Decide small Place Bets together against bets and balances read once, write set-based.

        A refused request gets its error in its place and writes nothing; the others are
        written together.
        """
        decisions = _decide_places(uow, [command.request for command in commands])
        _write_places(
            uow,
            [
                (decision, command.delivery)
                for command, decision in zip(commands, decisions, strict=True)
                if not isinstance(decision, LedgerError)
            ],
        )
        outcomes = [d if isinstance(d, LedgerError) else d.answer for d in decisions]
        accepted = [
            (command, outcome)
            for command, outcome in zip(commands, outcomes, strict=True)
            if not isinstance(outcome, LedgerError)
        ]
        # One upsert per table for the whole group, of the requests that were not refused.
        _record_seen(uow, directory.merge(command.seen for command, _ in accepted))
        # Only the accepted ones are journalled here; refusals are recorded after the fact.
        _journal(uow, [(command.delivery, outcome) for command, outcome in accepted])
        return outcomes


def _decide_places(
    uow: UnitOfWork, requests: Sequence[PlaceRequest]
) -> list[PlaceDecision | LedgerError]:
    entries = [entry for request in requests for entry in request.entries]
    # The held balances the holds will credit are read too, in the same statement: the unit of
    # work then writes the whole group without reading a balance again. SQLite, one-bet Place
    # Bets in groups of 30 among 4,000 accounts: one read a group instead of two, 2.1 against
    # 2.6 us of CPU a bet; Postgres: the group's reads one round trip and its writes another.
    known, balances = uow.bets_and_balances(
        [entry.bet_uid for entry in entries],
        domain.debited_accounts(entries),
        domain.held_accounts(entries),
    )
    return domain.place_many(requests, known, balances)


def _write_places(
    uow: UnitOfWork, decisions: Sequence[tuple[PlaceDecision, Delivery | None]]
) -> None:
    uow.add_bets([bet for decision, _ in decisions for bet in decision.bets])
    uow.post([d.transaction for d, _ in decisions if d.transaction is not None])
    # One bulk append for the whole group: each new bet's event, with its delivery's id.
    uow.append_events(
        [
            row
            for decision, delivery in decisions
            for row in events.placed_rows(decision.bets, _request_id(delivery))
        ]
    )


def _request_id(delivery: Delivery | None) -> str | None:
    return None if delivery is None else delivery.request_id


def _journal(
    uow: UnitOfWork, answered: Sequence[tuple[Delivery | None, PlacedBets | ClosedBets]]
) -> None:
    """Write the 200 journal rows of accepted deliveries, in the transaction of their effects:
    so a committed effect always has its row, and no row claims an effect that did not commit.
    Their duration is measured up to here; the commit that follows is not in it."""
    records = [
        delivery.record(200, None, answered_uids(result))
        for delivery, result in answered
        if delivery is not None
    ]
    if records:
        uow.record_deliveries(records)


def _record_seen(uow: UnitOfWork, seen: Seen) -> None:
    if seen:
        uow.record_seen(seen)


def _write_closing(uow: UnitOfWork, decision: CloseDecision, delivery: Delivery | None) -> None:
    uow.close_bets(decision.bets)
    if decision.transaction is not None:
        uow.post([decision.transaction])
    # Only the bets closed now: a re-sent refund or settle closes nothing and says nothing.
    uow.append_events(events.closed_rows(decision.bets, _request_id(delivery)))
    for note in decision.notes:
        # What the platform said of a bet that differs from the record: worth a look, not used.
        log.warning("%s", note)


@dataclass(frozen=True, slots=True)
class RefundBets:
    """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once.

    It carries the request as decoded: a huge one is staged straight from it (one pass), and
    its items and users as the domain reads them (:func:`refund_items`,
    :func:`ledger.directory.users_seen`) are built only when the domain decides.
    """

    request: RefundRequest
    reference: str
    scale: Callable[[str], int]
    delivery: Delivery | None = None
    # The tournaments the payload described; its users are read from the request.
    seen: Seen = NOTHING_SEEN

    @property
    def size(self) -> int:
        return _items_in(self.request)

    def apply(self, uow: UnitOfWork) -> ClosedBets:
        def decide(chunk: Sequence[RefundItem], known: Mapping[int, Bet], key: str) -> Decision:
            return domain.refund_many(chunk, known, key, self.scale)

        def note(item: RefundItem, bet: Bet) -> list[str]:
            return domain.refund_notes(item, bet, self.scale)

        closing = _Closing("refund", f"refund:{self.reference}", decide, note, self._staged)
        request = self.request
        items = _Derived(self.size, lambda: refund_items(request))
        return _close(uow, items, closing, self.delivery, self.seen, _users_of(request))

    def _staged(self, uow: UnitOfWork) -> list[Staged] | None:
        """The items as the set-based close stages them (None: the domain must decide): read
        from the request in one pass, as :func:`refund_items` and the users would say them."""
        pools = self.request.pools
        own: str | None = None
        if any(
            part.bet.amount is not None or part.bet.rake is not None
            for pool in pools
            for part in pool.bets
        ):
            # The claims are read in the bet's currency: one for the whole request, or the
            # domain decides.
            found = uow.bet_currencies([part.bet.uid for pool in pools for part in pool.bets])
            if len(found) > 1:
                return None
            own = next(iter(found), None)
        try:
            scale = None if own is None else self.scale(own)
        except LedgerError:
            return None
        new, label = tuple.__new__, directory.label
        rows: list[Staged] = []
        append = rows.append
        pos = 0
        for pool in pools:
            pool_uid = pool.pool.uid
            for part in pool.bets:
                bet, user = part.bet, part.user
                note = 1 if bet.secrets else 0
                claimed: dict[str, int | None] = {}
                for name, sent in (("amount", bet.amount), ("rake", bet.rake)):
                    claimed[name] = None
                    if sent is not None and scale is not None:
                        try:
                            claimed[name] = to_minor(sent, scale, field=name)
                        except InvalidAmount:
                            note = 1  # the domain notes a claim it cannot read
                append(
                    new(
                        Staged,
                        (
                            pos,
                            bet.uid,
                            user.uid,
                            pool_uid,
                            None,
                            None,
                            claimed["amount"],
                            claimed["rake"],
                            0,
                            note,
                            label(user.name),
                            label(user.client),
                        ),
                    )
                )
                pos += 1
        return rows


@dataclass(frozen=True, slots=True)
class SettleBets:
    """Settle Bet: capture each hold and credit positive payouts, each bet exactly once.

    It carries the request as decoded, as :class:`RefundBets` does (:func:`settle_claims`).
    """

    request: SettleRequest
    reference: str
    scale: Callable[[str], int]
    delivery: Delivery | None = None
    # The tournaments the payload described; its users are read from the request.
    seen: Seen = NOTHING_SEEN

    @property
    def size(self) -> int:
        return _items_in(self.request)

    def apply(self, uow: UnitOfWork) -> ClosedBets:
        def decide(chunk: Sequence[SettleClaim], known: Mapping[int, Bet], key: str) -> Decision:
            return domain.settle_many(chunk, known, key, self.scale)

        def note(claim: SettleClaim, bet: Bet) -> list[str]:
            return domain.echo_notes(claim.secrets, bet)

        closing = _Closing("settle", f"settle:{self.reference}", decide, note, self._staged)
        request = self.request
        claims = _Derived(self.size, lambda: settle_claims(request))
        return _close(uow, claims, closing, self.delivery, self.seen, _users_of(request))

    def _staged(self, uow: UnitOfWork) -> list[Staged] | None:
        """The claims as the set-based close stages them (None: the domain must decide): read
        from the request in one pass, as :func:`settle_claims` and the users would say them.
        A million claims: 0.63 s, against 1.3 s for the claims, the users and then the rows
        (benchmarks/settle_split.py's steps)."""
        pools = self.request.pools
        own: str | None = None
        if any(not part.bet.currency for pool in pools for part in pool.bets):
            # A payout without a currency is in the bet's own: one for the whole request, or
            # the domain decides.
            found = uow.bet_currencies([part.bet.uid for pool in pools for part in pool.bets])
            if len(found) > 1:
                return None
            own = next(iter(found), None)
        scale = self.scale
        new, label = tuple.__new__, directory.label
        rows: list[Staged] = []
        append = rows.append
        # A settle repeats a few payouts in one currency, and the decoder hands out one object
        # per amount string: each (payout, currency) read once, keyed by the objects (alive in
        # the request all along; no Decimal hashed, which a signalling NaN could not be).
        read: dict[tuple[int, str | None], tuple[str, int, int]] = {}
        pos = 0
        for pool in pools:
            pool_uid = pool.pool.uid
            for part in pool.bets:
                bet, user = part.bet, part.user
                # As domain._settle_item, in the same order: a payout in a named currency is
                # read (and may be refused) before the bet is looked at; one in the bet's own
                # currency only for a known bet (bad = 2).
                key = (id(bet.payout), bet.currency)
                known = read.get(key)
                if known is None:
                    named = _currency(bet.currency)
                    currency, bad, payout = named or own or "", 0, 0
                    if currency:
                        try:
                            payout = to_minor(bet.payout, scale(currency), field="bet.payout")
                        except LedgerError:
                            bad = 1 if named else 2
                    known = read[key] = (currency, bad, payout)
                currency, bad, payout = known
                append(
                    new(
                        Staged,
                        (
                            pos,
                            bet.uid,
                            user.uid,
                            pool_uid,
                            payout,
                            currency,
                            None,
                            None,
                            bad,
                            1 if bet.secrets else 0,
                            label(user.name),
                            label(user.client),
                        ),
                    )
                )
                pos += 1
        return rows


def _currency(code: str | None) -> str | None:
    """A payout's currency as the domain reads it (None: the bet's own)."""
    return code.upper() if code else None


def refund_items(request: RefundRequest) -> list[RefundItem]:
    """The items of a refund, as the domain reads them, in the request's order."""
    return [
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


def settle_claims(request: SettleRequest) -> list[SettleClaim]:
    """The claims of a settle, as the domain reads them, in the request's order."""
    # tuple.__new__ straight, as directory.users_seen does: 0.40 -> 0.27 s at a million claims.
    new = tuple.__new__
    return [
        new(
            SettleClaim,
            (
                part.bet.uid,
                part.user.uid,
                pool.pool.uid,
                part.bet.payout,
                _currency(part.bet.currency),
                part.bet.secrets,
            ),
        )
        for pool in request.pools
        for part in pool.bets
    ]


def _items_in(request: RefundRequest | SettleRequest) -> int:
    return sum(len(pool.bets) for pool in request.pools)


def _users_of(request: RefundRequest | SettleRequest) -> _Derived[UserSeen]:
    """The user of each item as the payload describes it, in item order (the directory's)."""
    return _Derived(
        _items_in(request),
        lambda: directory.users_seen(part.user for pool in request.pools for part in pool.bets),
    )


class _Derived(Sequence[T]):
    """What a request says item by item, built on first use: a huge close staged straight from
    the request (and closed set-based) never builds it."""

    __slots__ = ("_build", "_built", "_count")

    def __init__(self, count: int, build: Callable[[], list[T]]) -> None:
        self._count = count
        self._build = build
        self._built: list[T] | None = None

    def _items(self) -> list[T]:
        if self._built is None:
            self._built = self._build()
        return self._built

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._items()[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self._items())


Decision = CloseDecision
Named = TypeVar("Named", RefundItem, SettleClaim)


@dataclass(frozen=True, slots=True)
class _Closing(Generic[Named]):
    """What a refund or a settle brings to the one close path."""

    kind: Literal["refund", "settle"]
    key: str
    decide: Callable[[Sequence[Named], Mapping[int, Bet], str], CloseDecision]
    note: Callable[[Named, Bet], list[str]]
    staged: Callable[[UnitOfWork], list[Staged] | None]


def _bulk(command: Command[Any]) -> bool:
    """Whether ``command`` may close a huge request set-based: its unit of work is then a bulk
    one (:meth:`ledger.stores.base.Store.unit_of_work`). Said before the unit opens, so before
    the store's own bound is known: the threshold alone decides."""
    return isinstance(command, RefundBets | SettleBets) and closes_set_based(command.size, None)


def closes_set_based(items: int, bound: int | None) -> bool:
    """Whether a refund or settle of ``items`` is closed set-based on a store that closes up
    to ``bound`` items so (None: no bound)."""
    return items >= SET_BASED_FROM and (bound is None or items <= bound)


def _close(
    uow: UnitOfWork,
    items: Sequence[Named],
    closing: _Closing[Named],
    delivery: Delivery | None,
    seen: Seen,
    users: Sequence[UserSeen],
) -> ClosedBets:
    """Close the bets of a refund or settle: set-based when it is huge, else (or when the
    set-based close declines) chunk by chunk through the domain, in the one unit of work: a
    later chunk sees what earlier ones wrote (a bet named twice is closed once).

    The directory: the set-based close records ``seen`` itself, then the items' ``users`` from
    its staged items in SQL (1,000,000 users deduplicated, sorted and upserted from Python cost
    4.4 s of a 29 s SQLite settle; tournaments before users, the order every writer locks
    them in); the domain path adds the ``users`` to ``seen`` by the same rule
    (:func:`ledger.directory.described`) and records it after its close."""
    huge = closes_set_based(len(items), uow.set_based_up_to())
    result = _close_set(uow, items, closing, delivery, seen, bool(users)) if huge else None
    if result is None:
        if users:
            seen = seen._replace(users=directory.described([*seen.users, *users]))
        closed: list[int] = []
        unchanged: list[int] = []
        for part, chunk in _chunks(items):
            known = uow.get_bets([item.bet_uid for item in chunk])
            decision = closing.decide(chunk, known, f"{closing.key}:{part or 0}")
            _write_closing(uow, decision, delivery)
            closed += decision.answer.closed
            unchanged += decision.answer.unchanged
        result = ClosedBets(closed, unchanged)
        _record_seen(uow, seen)
    _journal(uow, [(delivery, result)])
    return result


def _close_set(
    uow: UnitOfWork,
    items: Sequence[Named],
    closing: _Closing[Named],
    delivery: Delivery | None,
    seen: Seen,
    describe_users: bool,
) -> ClosedBets | None:
    """The set-based close (:mod:`ledger.stores.closing`); None when the domain must decide.

    Its refusals are the domain's own: the store finds the first item the domain refuses, and
    the domain decides that item again (with the earlier mentions of its bet) to raise it.
    """
    rows = closing.staged(uow)
    if rows is None:
        return None
    outcome = uow.close_staged(
        closing.kind, rows, closing.key, CHUNK, _request_id(delivery), seen, describe_users
    )
    if outcome is None:
        return None
    if isinstance(outcome, int):
        uid = items[outcome].bet_uid
        mentions = [item for item in items[: outcome + 1] if item.bet_uid == uid]
        closing.decide(mentions, uow.get_bets([uid]), f"{closing.key}:{outcome // CHUNK}")
        # Not refused after all: the store and the domain disagree, and the domain is the
        # specification.
        log.error("the set-based %s refused bet %d, the domain does not", closing.kind, uid)
        return None
    # The bets from the staged rows (item order, each row's uid its item's bet): the items
    # themselves are built only for a note or a refusal (see _Derived).
    uids = list(map(_bet_uid, rows))
    if outcome.unchanged:
        skipped = set(outcome.unchanged)
        closed = [uid for pos, uid in enumerate(uids) if pos not in skipped]
    else:
        closed = uids
    if outcome.noted:
        bets = uow.get_bets([uids[pos] for pos in outcome.noted])
        for pos in outcome.noted:
            for note in closing.note(items[pos], bets[uids[pos]]):
                log.warning("%s", note)
    return ClosedBets(closed, [uids[pos] for pos in outcome.unchanged])


_bet_uid = operator.itemgetter(1)  # a staged row's bet (ledger.stores.base.Staged)


@dataclass(frozen=True, slots=True)
class Move:
    """A deposit or withdrawal; applies to ``True``, or ``False`` for an idempotent re-send."""

    transaction: Transaction
    size: int = 1
    # The X-Request-Id it came with, for its event (None: the embedded API, or none sent).
    request_id: str | None = None

    def apply(self, uow: UnitOfWork) -> bool:
        reference = self.transaction.reference or ""
        existing = None
        for key in domain.movement_keys(reference):
            existing = uow.get_transaction(key)
            if existing is not None:
                break
        decided = domain.movement(self.transaction, existing)
        if isinstance(decided, Replay):
            return False
        uow.post([decided])
        uow.append_events(events.movement_rows(decided, self.request_id))
        return True


@dataclass(frozen=True, slots=True)
class RecordDelivery:
    """The journal row of a refused delivery, written after the fact (best effort)."""

    record: DeliveryRecord
    size: int = 1

    def apply(self, uow: UnitOfWork) -> None:
        uow.record_deliveries([self.record])


@dataclass(frozen=True, slots=True)
class PruneDeliveries:
    """Delete up to ``batch`` journal rows received before ``cutoff``; answers how many."""

    cutoff: datetime
    batch: int
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        return uow.prune_deliveries(self.cutoff, self.batch)


@dataclass(frozen=True, slots=True)
class PruneEvents:
    """Delete the events of up to ``batch`` transactions committed before ``cutoff``; answers
    how many events went. With ``keep_undelivered``, none that a webhook endpoint has yet to
    receive: retention must not take what a receiver that was away would still be sent."""

    cutoff: datetime
    batch: int
    keep_undelivered: bool = True
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        # Read in the same transaction; cursors only move forward, so it can only keep more.
        slowest = uow.slowest_webhook() if self.keep_undelivered else None
        return uow.prune_events(self.cutoff, self.batch, None if slowest is None else slowest[1])


# --- the adapters ------------------------------------------------------------------------------


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


class DirectWriter:
    """Each command in a unit of work of its own, re-run when it lost a race (the retry loop).

    :meth:`run` applies in the caller's thread; :meth:`submit` on a pool of ``threads`` workers,
    with at most ``max_queue`` commands waiting for one (more are refused with ``store.busy``).
    """

    def __init__(
        self, store: Store, *, max_attempts: int = 8, threads: int = 16, max_queue: int = 10_000
    ) -> None:
        self.store = store
        self.max_attempts = max_attempts
        self.threads = threads
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending = 0
        self._closed = False

    def run(self, command: Command[R]) -> R:
        with paused_gc(command.size):
            for attempt in range(1, self.max_attempts + 1):
                try:
                    with self.store.unit_of_work(bulk=_bulk(command)) as uow:
                        result = command.apply(uow)
                        uow.commit()
                        return result
                except Retry as race:
                    if attempt == self.max_attempts:
                        raise StoreBusy(
                            f"gave up after {attempt} attempts: {race.message}"
                        ) from race
                    # Jittered backoff so that racing writers do not collide again in lockstep.
                    time.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")

    def submit(self, command: Command[R]) -> Future[R]:
        with self._lock:
            if self._closed:
                return _failed(StoreUnavailable("the ledger is closed"))
            if self._pending >= self.max_queue:
                return _failed(StoreBusy(f"{self._pending} writes are waiting: re-send later"))
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ledger-writer")
            self._pending += 1
            future = self._pool.submit(self.run, command)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=True)


@dataclass(eq=False)
class _Job(Generic[R]):
    command: Command[R]
    # Where its outcome goes: the future its submitter waits on, or, for a command applied by
    # apply_now (future None), ``outcome``. A future's condition, lock and set_result cost 5 us
    # a command, a thirtieth of the writer process's Place Bet, for a caller who waits on none.
    future: Future[R] | None = None
    outcome: tuple[bool, Any] | None = None

    def settle(self, ok: bool, value: Any) -> None:
        future = self.future
        if future is None:
            self.outcome = (ok, value)
        elif not future.done():  # a caller may have cancelled its wait
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_STOP: Any = object()


class GroupCommit:
    """One writer thread applying queued commands in shared, savepointed transactions.

    On a store that admits one writer at a time (SQLite) every command goes through the queue.
    On one that admits many (Postgres) only Place Bets do; refunds, settles and movements go to
    ``direct`` and keep their own connections, so that a huge settle never holds up entries.
    A command that lost a race inside a batch is handed to ``direct``, whose retry loop runs it
    again.
    """

    def __init__(
        self,
        store: Store,
        direct: DirectWriter,
        *,
        max_batch: int = 512,
        max_queue: int = 10_000,
        max_wait: float = 10.0,
    ) -> None:
        self.store = store
        self.direct = direct
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.max_wait = max_wait
        self._queue: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._queued = 0  # submitted, not yet taken into a batch
        self._batch_started: float | None = None  # while the writer applies a batch
        self.batches = 0  # how many commits; with ``commands``, the average batch size
        self.commands = 0

    def _grouped(self, command: Command[Any]) -> bool:
        return self.store.single_writer or isinstance(command, PlaceBets)

    def submit(self, command: Command[R]) -> Future[R]:
        if not self._grouped(command):
            return self.direct.submit(command)
        future: Future[R] = Future()
        job = _Job(command, future)
        with self._lock:
            refusal = self._refusal()
            if refusal is not None:
                return _failed(refusal)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-group-commit", daemon=True
                )
                self._thread.start()
            self._queued += 1
            self._queue.put(job)
        return future

    def _refusal(self) -> LedgerError | None:
        # Bounded, so that an overload or a frozen database answers 503 at once (the platform
        # re-sends later) instead of growing memory and outlasting the platform's timeout.
        if self._closed:
            return StoreUnavailable("the ledger is closed")
        if self._queued >= self.max_queue:
            return StoreBusy(f"{self._queued} writes are queued: re-send later")
        started = self._batch_started
        if self._queued and started is not None and time.monotonic() - started > self.max_wait:
            return StoreBusy(
                f"the writer has been busy on one batch for over {self.max_wait:g} s: re-send later"
            )
        return None

    def run(self, command: Command[R]) -> R:
        if not self._grouped(command):
            return self.direct.run(command)
        return self.submit(command).result()

    def apply_now(self, commands: Sequence[Command[Any]]) -> list[tuple[bool, Any] | Future[Any]]:
        """Apply ``commands`` on the calling thread, in batches of at most ``max_batch``, each
        as the writer thread applies its batches (the same runs, savepoints and one commit).

        For a caller that gathers its own batches and has nothing else to do meanwhile (the
        writer process): handing them to the writer thread and waiting on its futures cost a
        thread switch each way and a queue per command. Not to be mixed with :meth:`submit` on
        the same writer. Returns each command's outcome, ``(True, result)`` or ``(False,
        error)``, or, for one that lost a race, the future of its retry on the direct writer.
        """
        jobs: list[_Job[Any]] = [_Job(command) for command in commands]
        for start in range(0, len(jobs), self.max_batch):
            self._commit(jobs[start : start + self.max_batch])
        answers: list[tuple[bool, Any] | Future[Any]] = []
        for job in jobs:
            answer = job.outcome if job.outcome is not None else job.future
            assert answer is not None, "every command of a batch is settled or retried"
            answers.append(answer)
        return answers

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()
        self.direct.close()

    # --- the writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if _STOP in batch:
                stopping = True
                batch = [job for job in batch if job is not _STOP]
            with self._lock:
                self._queued -= len(batch)
                self._batch_started = time.monotonic()
            if batch:
                self._commit(batch)
            with self._lock:
                self._batch_started = None

    def _commit(self, batch: list[_Job[Any]]) -> None:
        done: list[tuple[_Job[Any], Any]] = []
        failed: list[tuple[_Job[Any], BaseException]] = []
        raced: list[_Job[Any]] = []
        bulk = any(_bulk(job.command) for job in batch)
        try:
            runs = _runs(batch)
            if isinstance(runs[0][0].command, PlaceBets):
                # A first run of Place Bets without a savepoint around it. A savepoint is not
                # free. On SQLite, while one is open, every statement journals the pages it
                # changes into a temporary file (its INSERTs into tables with triggers, every
                # multi-row INSERT), 20 us of the writer's CPU per one-bet Place Bet in groups of
                # 30 (139 against 117 us, /proc thread CPU) and 2.5 us a bet in batches of 1,000.
                # On Postgres, opening and releasing one are two round trips of a batch's five
                # or six, each a wait of the writer and a subtransaction of the server. Nothing
                # precedes the first run in the unit of work, so rolling the unit back undoes
                # exactly what its savepoint would have; what is left then goes into a new one.
                # Refunds and settles keep theirs: a set-based settle of 20,000 bets cost 7%
                # more without it (benchmarks/write_path_cpu.py, 22.5 against 21.1 ms per 1,000).
                #
                # When that run is the whole batch (as under steady load), what the store holds
                # back goes with the COMMIT: on Postgres its writes and the commit are then one
                # round trip, not two (benchmark (a): 0.55 against 0.52 of the echo). A write
                # refused there (a bet another process placed meanwhile, say) rolls the unit
                # back like any failure; as nothing was committed, the batch is applied again
                # the way that tells whose failure it was.
                try:
                    rest = self._first_unit(runs, bulk, done, failed, raced, flush=len(runs) > 1)
                except _RefusedAtCommit:
                    done, failed, raced = [], [], []
                    rest = self._first_unit(runs, bulk, done, failed, raced, flush=True)
                runs = [] if rest is None else rest + runs[1:]
            if runs:
                with self.store.unit_of_work(bulk=bulk) as uow:
                    self._apply_runs(uow, runs, done, failed, raced)
                    uow.commit()
        except BaseException as error:
            # The batch did not commit: nothing of it is durable, so every command gets the
            # (retryable) error, even one that had failed on its own: its refusal (a 402, say)
            # may have rested on an earlier command of the batch that never committed, and a
            # 4xx would tell the platform never to re-send it.
            reason: BaseException = error
            if not isinstance(error, LedgerError):
                log.exception("group commit failed")
                reason = StoreUnavailable(f"the batch failed: {error!r}")
            failed = [(job, reason) for job in batch]
            done, raced = [], []
        self.batches += 1
        self.commands += len(batch)
        for job, result in done:
            job.settle(True, result)
        for job, problem in failed:
            job.settle(False, problem)
        for job in raced:
            retried = self.direct.submit(job.command)
            if job.future is None:
                job.future = retried  # apply_now's caller waits on the retry itself
            else:
                _chain(retried, job.future)

    def _first_unit(
        self,
        runs: list[list[_Job[Any]]],
        bulk: bool,
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        flush: bool,
    ) -> list[list[_Job[Any]]] | None:
        """The unit of work of a batch that starts with Place Bets: ``None`` if it committed,
        else the runs to apply instead (:meth:`_apply_first`). Raises :class:`_RefusedAtCommit`
        when, unflushed, its commit was refused by the database: nothing committed, and whose
        failure it was not known."""
        with self.store.unit_of_work(bulk=bulk) as uow:
            rest = self._apply_first(uow, runs[0], done, failed, raced, flush=flush)
            if rest is None:
                self._apply_runs(uow, runs[1:], done, failed, raced)
                try:
                    uow.commit()
                except LedgerError as error:
                    # A plain StoreUnavailable: the connection may have died during the COMMIT,
                    # whose outcome is then unknown; only the platform's re-send may resolve it.
                    # Anything else (a Retry, a timeout, a refusal) is the database's answer to
                    # a statement: the transaction was rolled back.
                    if flush or type(error) is StoreUnavailable:
                        raise
                    raise _RefusedAtCommit from error
            return rest

    def _apply_runs(
        self,
        uow: UnitOfWork,
        runs: list[list[_Job[Any]]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
    ) -> None:
        """Apply ``runs`` in order, each group and each command in a savepoint of its own."""
        for run in runs:
            if len(run) > 1 and self._apply_group(uow, run, done, failed):
                continue
            for job in run:
                self._apply_one(uow, job, done, failed, raced)

    def _apply_first(
        self,
        uow: UnitOfWork,
        run: list[_Job[Any]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        flush: bool = True,
    ) -> list[list[_Job[Any]]] | None:
        """Apply the first run of a fresh unit of work without a savepoint: ``None`` if it went
        through, else the runs to apply instead in a new unit of work (this one must then be
        rolled back): a failed group's commands one by one, nothing for a failed command.
        Unless ``flush``, what the store holds back is left for the commit."""
        scope = _flushed if flush else _held
        if len(run) > 1:
            return (
                None
                if self._apply_group(uow, run, done, failed, scope=scope)
                else [[job] for job in run]
            )
        return None if self._apply_one(uow, run[0], done, failed, raced, scope=scope) else []

    @staticmethod
    def _apply_group(
        uow: UnitOfWork,
        run: list[_Job[Any]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        *,
        scope: _Scope | None = None,
    ) -> bool:
        """Apply a run of Place Bets in one call; False (nothing written) if it raised."""
        commands = [job.command for job in run if isinstance(job.command, PlaceBets)]
        assert len(commands) == len(run), "only Place Bets form groups"
        try:
            with (scope or _savepoint)(uow), paused_gc(sum(c.size for c in commands)):
                outcomes = PlaceBets.apply_group(uow, commands)
        except BaseException:  # noqa: BLE001 - each command is then applied alone, in order
            log.debug("a group of %d failed as a whole; applying them one by one", len(run))
            return False
        for job, outcome in zip(run, outcomes, strict=True):
            if isinstance(outcome, LedgerError):
                failed.append((job, outcome))
            else:
                done.append((job, outcome))
        return True

    @staticmethod
    def _apply_one(
        uow: UnitOfWork,
        job: _Job[Any],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        scope: _Scope | None = None,
    ) -> bool:
        """Apply one command (in a savepoint, or ``scope``); False (nothing written) if it
        raised."""
        try:
            with (scope or _savepoint)(uow), paused_gc(job.command.size):
                result = job.command.apply(uow)
            # Done only once its scope is closed: leaving it sends what Postgres held back,
            # and a failure there is the command's (never answered success as well).
            done.append((job, result))
            return True
        except Retry:
            # Another process won a race on a key: after this batch commits, the direct
            # writer's retry loop runs it again, and it will see the winner's work.
            raced.append(job)
        except BaseException as error:  # noqa: BLE001 - handed to its own caller
            failed.append((job, error))
        return False


# Where a command of a batch is applied: a savepoint, or unguarded (the first run of a unit).
_Scope = Callable[[UnitOfWork], AbstractContextManager[None]]


class _RefusedAtCommit(Exception):
    """A batch's unflushed writes were refused with its COMMIT: nothing of it was committed,
    and it is applied again, flushing, to tell whose failure it was."""


def _savepoint(uow: UnitOfWork) -> AbstractContextManager[None]:
    return uow.savepoint()


@contextmanager
def _flushed(uow: UnitOfWork) -> Iterator[None]:
    """Unguarded: what the store holds back is sent before the scope ends, as a savepoint's
    release sends it, so that a failure among it is the command's own (raced, or refused)
    rather than the whole batch's at commit."""
    yield
    uow.flush()


@contextmanager
def _held(uow: UnitOfWork) -> Iterator[None]:
    """Unguarded, and what the store holds back stays held for the commit (one round trip on
    Postgres); a failure among it fails the commit (see GroupCommit._first_unit)."""
    yield


def _runs(batch: list[_Job[Any]]) -> list[list[_Job[Any]]]:
    """Split a batch into runs of consecutive small Place Bets (other commands alone).

    Refused deliveries' journal rows go last: they touch nothing else, so moving them keeps a
    flood of refusals from splitting the accepted Place Bets into many small groups.
    """
    runs: list[list[_Job[Any]]] = []
    journal = [job for job in batch if isinstance(job.command, RecordDelivery)]
    rest = [job for job in batch if not isinstance(job.command, RecordDelivery)]
    for job in rest + journal:
        if runs and _groupable(job) and _groupable(runs[-1][0]):
            runs[-1].append(job)
        else:
            runs.append([job])
    return runs


def _groupable(job: _Job[Any]) -> bool:
    return isinstance(job.command, PlaceBets) and job.command.size <= CHUNK


def _chain(source: Future[R], target: Future[R]) -> None:
    def copy(finished: Future[R]) -> None:
        if target.done():
            return
        error = finished.exception()
        if error is not None:
            target.set_exception(error)
        else:
            target.set_result(finished.result())

    source.add_done_callback(copy)
