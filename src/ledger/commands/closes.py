"""Refund Bet, Refund Tournament and Settle: close each named bet exactly once.

The domain decides (:func:`ledger.domain.refund`, :func:`ledger.domain.settle`); a huge close
is decided and written set-based in the database instead (:mod:`ledger.stores.closing`), from
:data:`SET_BASED_FROM` items.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, overload

from .. import directory, domain, events
from ..contract import RefundRequest, SettleRequest
from ..deliveries import Delivery
from ..directory import NOTHING_SEEN, Seen, UserSeen
from ..domain import (
    Bet,
    ClosedBets,
    CloseDecision,
    RefundItem,
    SettleClaim,
)
from ..errors import InvalidAmount, LedgerError
from ..money import to_minor
from ..stores import Staged, UnitOfWork
from ..writer.port import Single
from . import chunks
from .recording import journal, record_seen, request_id

log = logging.getLogger("ledger.writer")

T = TypeVar("T")

# Items from which a refund or settle is closed set-based, in the database (see _close_set):
# below it the domain's per-bet Python costs less than the staging's fixed statements. Measured
# (benchmarks/settle_cpu.py --set-based-from 0 vs never, process CPU): SQLite even at 300 items,
# ahead from 1,000 (0.066 vs 0.076 s); Postgres, client and server CPU, behind at 300 (0.107 vs
# 0.081 s), well ahead at 3,000 (0.32 vs 0.47 s).
SET_BASED_FROM = 1_000


def _write_closing(uow: UnitOfWork, decision: CloseDecision, delivery: Delivery | None) -> None:
    uow.close_bets(decision.bets)
    if decision.transaction is not None:
        uow.post([decision.transaction])
        # Never refused by a limit; what it credits counts in limited users' windows.
        credits = domain.user_credits(decision.transaction)
        if credits:
            uow.limits.record_returns(credits)
    # Only the bets closed now: a re-sent refund or settle closes nothing and says nothing.
    uow.append_events(events.closed_rows(decision.bets, request_id(delivery)))
    for note in decision.notes:
        # What the platform said of a bet that differs from the record: worth a look, not used.
        log.warning("%s", note)


Request = TypeVar("Request", RefundRequest, SettleRequest)


@dataclass(frozen=True, slots=True)
class _CloseBets(Single, Generic[Request]):
    """What a refund and a settle carry: the request as decoded (a huge one is staged straight
    from it, in one pass; its items and users as the domain reads them are built only when the
    domain decides), a fresh reference for its transactions, and the currencies' scales."""

    request: Request
    reference: str
    scale: Callable[[str], int]
    delivery: Delivery | None = None
    # The tournaments the payload described; its users are read from the request.
    seen: Seen = NOTHING_SEEN

    @property
    def bulk(self) -> bool:
        return closes_set_based(self.size, None)

    @property
    def size(self) -> int:
        return sum(len(pool.bets) for pool in self.request.pools)


@dataclass(frozen=True, slots=True)
class RefundBets(_CloseBets[RefundRequest]):
    """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once
    (:func:`refund_items`, :func:`ledger.directory.users_seen`)."""

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
class SettleBets(_CloseBets[SettleRequest]):
    """Settle Bet: capture each hold and credit positive payouts, each bet exactly once
    (:func:`settle_claims`)."""

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
                # As ledger.domain.closing._settle_item, in the same order: a payout in a named
                # currency is read (and may be refused) before the bet is looked at; one in the
                # bet's own currency only for a known bet (bad = 2).
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


def _users_of(request: RefundRequest | SettleRequest) -> _Derived[UserSeen]:
    """The user of each item as the payload describes it, in item order (the directory's)."""
    return _Derived(
        sum(len(pool.bets) for pool in request.pools),
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
            seen = seen._replace(users=directory.described([*seen.users, *users]), entered=False)
        closed: list[int] = []
        unchanged: list[int] = []
        for part, chunk in chunks.split(items):
            known = uow.get_bets([item.bet_uid for item in chunk])
            decision = closing.decide(chunk, known, f"{closing.key}:{part or 0}")
            _write_closing(uow, decision, delivery)
            closed += decision.answer.closed
            unchanged += decision.answer.unchanged
        result = ClosedBets(closed, unchanged)
        record_seen(uow, seen)
    journal(uow, [(delivery, result)])
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
    before = uow.limits.last_posting()
    outcome = uow.close_staged(
        closing.kind, rows, closing.key, chunks.CHUNK, request_id(delivery), seen, describe_users
    )
    if outcome is None:
        return None
    if not isinstance(outcome, int):
        # Its credits to limited users, in one statement joined to them.
        uow.limits.record_set_returns(closing.key, before)
    if isinstance(outcome, int):
        uid = items[outcome].bet_uid
        mentions = [item for item in items[: outcome + 1] if item.bet_uid == uid]
        closing.decide(mentions, uow.get_bets([uid]), f"{closing.key}:{outcome // chunks.CHUNK}")
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


_bet_uid = operator.itemgetter(Staged._fields.index("uid"))  # a staged row's bet
