"""The pure core: accounts, postings, balanced transactions and the bet lifecycle.

Functions here take values and return values (postings, transactions, bet records); they never do
I/O. The service layer loads the current state through a unit of work, asks these functions what
to do, and writes what they return. Every outcome of the idempotency table (DESIGN section 5) is
decided here, in one place.

Amounts are integers of the currency's minor unit. Standard library only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, TypeVar

from .errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    InsufficientFunds,
    InvalidAmount,
    LedgerError,
    ReferenceConflict,
    UnbalancedTransaction,
)
from .money import render, to_minor

__all__ = [
    "HELD_SUFFIX",
    "HOUSE_CASH",
    "HOUSE_ENTRIES",
    "HOUSE_PRIZES",
    "HOUSE_RAKE",
    "HOUSE_TICKETS",
    "Bet",
    "BetState",
    "CloseDecision",
    "ClosedBets",
    "Entry",
    "Funding",
    "PlaceDecision",
    "PlaceRequest",
    "PlacedBets",
    "Posting",
    "RefundItem",
    "Replay",
    "SettleClaim",
    "SettleItem",
    "Transaction",
    "TxnKind",
    "account_kind",
    "debited_accounts",
    "deposit",
    "echo_notes",
    "held_account",
    "held_accounts",
    "is_house",
    "merge_placements",
    "movement",
    "movement_keys",
    "place",
    "place_many",
    "refund",
    "refund_many",
    "refund_notes",
    "residual",
    "settle",
    "settle_many",
    "user_account",
    "withdrawal",
]

# Account names. ``user:<uid>`` is what the operator owes the user; ``user:<uid>:held`` is money
# reserved for entries not yet settled or refunded; the house accounts are the other legs.
HOUSE_PREFIX = "house:"
HOUSE_CASH = f"{HOUSE_PREFIX}cash"
HOUSE_TICKETS = f"{HOUSE_PREFIX}tickets"
HOUSE_ENTRIES = f"{HOUSE_PREFIX}entries"
HOUSE_RAKE = f"{HOUSE_PREFIX}rake"
HOUSE_PRIZES = f"{HOUSE_PREFIX}prizes"


def is_house(name: str) -> bool:
    """True for the house's accounts: they may go negative, and a request's legs on them sum."""
    return name.startswith(HOUSE_PREFIX)


# ``user_account("u1:held")`` would be ``held_account("u1")``: a user with such a uid would spend,
# and see, u1's held money. The contract refuses these uids (``ledger.contract.check_user``), so
# that every account name stays unambiguous.
HELD_SUFFIX = ":held"


def user_account(uid: str) -> str:
    """The user's available balance."""
    return f"user:{uid}"


def held_account(uid: str) -> str:
    """The user's money held for open entries."""
    return f"user:{uid}{HELD_SUFFIX}"


def account_kind(name: str) -> str:
    """``available``, ``held`` or ``house``: the kinds the store's no-overdraft rule keys on."""
    if is_house(name):
        return "house"
    return "held" if name.endswith(HELD_SUFFIX) else "available"


class Posting(NamedTuple):
    """One leg of a transaction: a signed amount (minor units) on one account in one currency.

    Legs on a user's accounts carry the ``bet_uid`` they are for, so that every bet's money can be
    traced (and ``ledger check`` can prove each bet was held, released and paid at most once)
    even though one transaction carries a whole request.
    """

    account: str
    currency: str
    amount: int
    bet_uid: int | None = None


def residual(postings: Iterable[Posting]) -> dict[str, int]:
    """What a set of postings fails to balance by, per currency (empty when balanced)."""
    sums: dict[str, int] = defaultdict(int)
    for posting in postings:
        sums[posting.currency] += posting.amount
    return {currency: total for currency, total in sums.items() if total}


class TxnKind(StrEnum):
    DEPOSIT = "deposit"
    WITHDRAWAL = "withdrawal"
    HOLD = "hold"
    REFUND = "refund"
    SETTLE = "settle"


@dataclass(frozen=True, slots=True)
class Transaction:
    """A balanced set of postings with a unique idempotency ``key``.

    One callback request is one transaction (TigerBeetle-style batching: a settle of a million
    participants is one journal entry, not a million). The legs on user accounts stay one per
    bet; the house legs of a request are summed per account and currency by :meth:`journal`.
    A bet's own idempotency is the bet row (unique uid, a state that the database lets change
    only from ``placed``), not the transaction key.
    """

    key: str
    kind: TxnKind
    postings: tuple[Posting, ...]
    user: str | None = None
    reference: str | None = None

    def __post_init__(self) -> None:
        unbalanced = residual(self.postings)
        if unbalanced:
            raise UnbalancedTransaction(f"transaction {self.key} is off by {unbalanced}")

    @classmethod
    def journal(cls, key: str, kind: TxnKind, legs: Iterable[Posting]) -> Transaction:
        """One transaction from the legs of many bets, house legs summed per account."""
        house: dict[tuple[str, str], int] = defaultdict(int)
        kept: list[Posting] = []
        for leg in legs:
            if leg.bet_uid is None and is_house(leg.account):
                house[(leg.account, leg.currency)] += leg.amount
            else:
                kept.append(leg)
        kept.extend(
            Posting(account, currency, amount)
            for (account, currency), amount in sorted(house.items())
            if amount
        )
        return cls(key=key, kind=kind, postings=tuple(kept))


def transfer(
    source: str, destination: str, currency: str, amount: int, bet_uid: int | None = None
) -> tuple[Posting, ...]:
    """Move ``amount`` from ``source`` to ``destination``; no postings for a zero amount.

    ``bet_uid`` tags the legs on user accounts (house legs stay untagged so they can be summed).
    """
    if amount == 0:
        return ()
    return (
        Posting(source, currency, -amount, None if is_house(source) else bet_uid),
        Posting(destination, currency, amount, None if is_house(destination) else bet_uid),
    )


# --- replays -----------------------------------------------------------------------------------


class Replay(StrEnum):
    """What a request that changes nothing found: every idempotent re-send has a name.

    As in TigerBeetle's ``create_transfers`` results, a replay is an answer rather than an
    absence. The conflicting cases (the same key with other terms) are errors instead
    (:class:`~ledger.errors.BetConflict`, ``bet.already_settled``, ``reference.conflict``).
    """

    EXISTS = "exists"  # Place Bet re-sent for a bet placed with the same terms
    EXISTS_REFUNDED = "exists_refunded"  # Place Bet for a bet since refunded: never debited again
    EXISTS_SETTLED = "exists_settled"  # Place Bet for a bet since settled: never debited again
    ALREADY_REFUNDED = "already_refunded"  # Refund re-sent
    ALREADY_SETTLED = "already_settled"  # Settle re-sent with the same payout
    MOVEMENT_EXISTS = "movement_exists"  # deposit or withdrawal re-sent under its reference


# --- deposits and withdrawals ------------------------------------------------------------------


def _positive(amount: int) -> None:
    if amount <= 0:
        raise InvalidAmount("amount: must be greater than zero")


def movement_keys(reference: str) -> tuple[str, ...]:
    """The idempotency key of a deposit or withdrawal, then the keys earlier versions wrote.

    Deposits and withdrawals share one namespace of references: a reference used by a deposit
    cannot be re-used by a withdrawal (409 ``reference.conflict``), and because both write the
    same unique key, a deposit and a withdrawal racing for one reference cannot both win.
    Earlier versions prefixed the key with the kind; those keys are still looked up, so that a
    re-send of a movement recorded then stays a replay.
    """
    return (f"movement:{reference}", f"deposit:{reference}", f"withdrawal:{reference}")


def deposit(user: str, currency: str, amount: int, reference: str) -> Transaction:
    """Money in from the outside world, idempotent by the caller's reference."""
    _positive(amount)
    return Transaction(
        key=movement_keys(reference)[0],
        kind=TxnKind.DEPOSIT,
        postings=transfer(HOUSE_CASH, user_account(user), currency, amount),
        user=user,
        reference=reference,
    )


def withdrawal(user: str, currency: str, amount: int, reference: str) -> Transaction:
    """Money out to the outside world; the store refuses it when the available balance is short."""
    _positive(amount)
    return Transaction(
        key=movement_keys(reference)[0],
        kind=TxnKind.WITHDRAWAL,
        postings=transfer(user_account(user), HOUSE_CASH, currency, amount),
        user=user,
        reference=reference,
    )


def movement(requested: Transaction, existing: Transaction | None) -> Transaction | Replay:
    """Decide a deposit or withdrawal given what its reference already holds.

    New: the transaction to post. The same movement again: a replay. Anything else under a used
    reference (another kind, user, currency or amount) is a conflict.
    """
    if existing is None:
        return requested
    if existing.kind != requested.kind or set(existing.postings) != set(requested.postings):
        raise ReferenceConflict(
            f"reference {requested.reference!r} was already used for a different "
            f"{existing.kind.value}"
        )
    return Replay.MOVEMENT_EXISTS


# --- bets --------------------------------------------------------------------------------------


class BetState(StrEnum):
    PLACED = "placed"
    REFUNDED = "refunded"
    SETTLED = "settled"


class Funding(StrEnum):
    """Where a bet's hold came from, so that a refund returns it there."""

    CASH = "cash"  # the user's available balance
    TICKET = "ticket"  # the house, on behalf of a ticket
    FREE = "free"  # free-to-play: nothing held


class Entry(NamedTuple):
    """One entry of a Place Bet request, amounts already in minor units."""

    bet_uid: int
    user: str
    pool_uid: int
    currency: str
    amount: int
    rake: int
    ticket: str | None = None
    request_uuid: str | None = None

    @property
    def total(self) -> int:
        """What the entry costs: the contract charges the rake on top of the buy-in."""
        return self.amount + self.rake


class Bet(NamedTuple):
    """The ledger's record of one fantasy team entry."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: int
    rake: int
    funding: Funding
    state: BetState = BetState.PLACED
    payout: int | None = None
    payout_currency: str | None = None
    ticket: str | None = None
    request_uuid: str | None = None
    secrets: Mapping[str, Any] = MappingProxyType({})

    @property
    def total(self) -> int:
        return self.amount + self.rake


class Placement(NamedTuple):
    """What a new entry writes: the bet record and the legs of its hold (none when free)."""

    bet: Bet
    legs: tuple[Posting, ...]


def _matches(bet: Bet, entry: Entry) -> bool:
    return (
        bet.user == entry.user
        and bet.pool_uid == entry.pool_uid
        and bet.currency == entry.currency
        and bet.amount == entry.amount
        and bet.rake == entry.rake
    )


def place(entry: Entry, existing: Bet | None, secrets: Mapping[str, Any]) -> Placement | Replay:
    """Decide a Place Bet entry: a new placement, the replay it is, or an error.

    A bet already refunded or settled is never debited again: the re-send answers success.
    """
    if existing is not None:
        if existing.state == BetState.REFUNDED:
            return Replay.EXISTS_REFUNDED
        if existing.state == BetState.SETTLED:
            return Replay.EXISTS_SETTLED
        if not _matches(existing, entry):
            raise BetConflict(
                f"bet {entry.bet_uid} was placed with a different user, pool, amount or currency",
                bet_uid=entry.bet_uid,
            )
        return Replay.EXISTS
    total = entry.amount + entry.rake
    if entry.ticket:
        funding, source = Funding.TICKET, HOUSE_TICKETS
    elif total == 0:
        return Placement(_new_bet(entry, Funding.FREE, secrets), ())
    else:
        funding, source = Funding.CASH, user_account(entry.user)
    legs = transfer(source, held_account(entry.user), entry.currency, total, entry.bet_uid)
    return Placement(_new_bet(entry, funding, secrets), legs)


def _new_bet(entry: Entry, funding: Funding, secrets: Mapping[str, Any]) -> Bet:
    """The bet a new entry places: its fields in :class:`Bet`'s order, by position (by keyword,
    a named tuple of thirteen fields costs 1.2 us to build instead of 0.5; one per bet)."""
    uid, user, pool_uid, currency, amount, rake, ticket, request_uuid = entry
    return Bet(
        uid, user, pool_uid, currency, amount, rake, funding, BetState.PLACED, None, None,
        ticket, request_uuid, secrets,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlacedBets:
    """The answer to Place Bet: ``secrets`` go back to the platform and are stored per bet."""

    secrets: dict[str, Any]
    placed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


class PlaceRequest(NamedTuple):
    """One Place Bet request (or one chunk of a huge one), amounts in minor units."""

    entries: Sequence[Entry]
    reference: str  # the request's own: its secrets, and the key of its hold
    part: int | None = None  # the chunk of a huge request: each chunk's hold has its own key

    @property
    def key(self) -> str:
        suffix = "" if self.part is None else f":{self.part}"
        return f"hold:{self.reference}{suffix}"


class PlaceDecision(NamedTuple):
    """What an accepted Place Bet request writes (new bets, their holds) and what it answers."""

    bets: list[Bet]
    transaction: Transaction | None
    answer: PlacedBets


def debited_accounts(entries: Iterable[Entry]) -> set[tuple[str, str]]:
    """The ``(account, currency)`` pairs a Place Bet may debit: their balances decide overdrafts."""
    return {
        (user_account(entry.user), entry.currency)
        for entry in entries
        if not entry.ticket and entry.total
    }


def held_accounts(entries: Iterable[Entry]) -> set[tuple[str, str]]:
    """The ``(account, currency)`` pairs the holds of a Place Bet may credit."""
    return {
        (held_account(entry.user), entry.currency)
        for entry in entries
        if entry.ticket or entry.total
    }


def place_many(
    requests: Sequence[PlaceRequest],
    known: Mapping[int, Bet | None],
    balances: Mapping[tuple[str, str], int],
) -> list[PlaceDecision | LedgerError]:
    """Decide Place Bet requests in order, each all or nothing, as if they came one by one.

    ``known`` holds the recorded bets the requests name (absent or ``None``: unknown) and
    ``balances`` the available balances of their :func:`debited_accounts` (absent: zero; any
    other account in it is not looked at). A request that fails gets its error in its place and
    leaves no trace; one that holds is seen by the requests after it: its bets are known, its
    debits spent. The store's conditional debits and unique keys still guard what is finally
    written.
    """
    seen = dict(known)
    available = dict(balances)
    decisions: list[PlaceDecision | LedgerError] = []
    for request in requests:
        try:
            decision, spent = _place_request(request, seen, available)
        except LedgerError as error:
            decisions.append(error)
            continue
        for bet in decision.bets:
            seen[bet.uid] = bet
        for account, amount in spent.items():
            available[account] = available.get(account, 0) + amount
        decisions.append(decision)
    return decisions


def _place_request(
    request: PlaceRequest,
    known: Mapping[int, Bet | None],
    available: Mapping[tuple[str, str], int],
) -> tuple[PlaceDecision, dict[tuple[str, str], int]]:
    secrets = {"ledger_ref": request.reference}
    mine: dict[int, Bet] = {}  # bets this request places: an entry named twice is held once
    legs: list[Posting] = []
    spent: dict[tuple[str, str], int] = defaultdict(int)
    placed: list[int] = []
    unchanged: list[int] = []
    stored: Mapping[str, Any] | None = None
    for entry in request.entries:
        existing = mine.get(entry.bet_uid) or known.get(entry.bet_uid)
        decided = place(entry, existing, secrets)
        if isinstance(decided, Replay):
            if stored is None and existing is not None:
                stored = existing.secrets
            unchanged.append(entry.bet_uid)
            continue
        mine[entry.bet_uid] = decided.bet
        placed.append(entry.bet_uid)
        legs += decided.legs
        for name, currency, amount, _ in decided.legs:
            if amount < 0 and not is_house(name):
                account = (name, currency)
                spent[account] += amount
                # No overdraft: the whole request fails when any entry would take the user's
                # available balance below zero (contract: 402, nothing applied).
                if available.get(account, 0) + spent[account] < 0:
                    raise InsufficientFunds(
                        f"user {entry.user} has insufficient {entry.currency} funds",
                        bet_uid=entry.bet_uid,
                    )
    transaction = Transaction.journal(request.key, TxnKind.HOLD, legs) if legs else None
    # A pure re-send answers with the secrets the platform already stored for its bets.
    answer = secrets if placed or not stored else dict(stored)
    decision = PlaceDecision(
        list(mine.values()), transaction, PlacedBets(answer, placed, unchanged)
    )
    return decision, spent


def merge_placements(parts: Sequence[PlacedBets]) -> PlacedBets:
    """One answer for a huge request decided chunk by chunk: placed or not, as a whole."""
    answer = next((part.secrets for part in parts if part.placed), parts[0].secrets)
    return PlacedBets(
        answer,
        [uid for part in parts for uid in part.placed],
        [uid for part in parts for uid in part.unchanged],
    )


# --- refunds and settles -----------------------------------------------------------------------


class RefundItem(NamedTuple):
    """One bet of a Refund Bet or Refund Tournament request.

    ``amount``, ``rake`` and ``secrets`` are what the payload says of the bet: compared with the
    record and a mismatch noted, never used (a refund returns exactly what was held).
    """

    bet_uid: int
    user: str
    pool_uid: int
    amount: Decimal | None = None
    rake: Decimal | None = None
    secrets: Mapping[str, Any] | None = None


class Closing(NamedTuple):
    """What closing a bet writes: its new state and the legs of the closing transaction."""

    bet: Bet
    legs: tuple[Posting, ...]


def _closed(bet: Bet, state: BetState, payout: int | None, payout_currency: str | None) -> Bet:
    # Spelled out rather than ``bet._replace(...)``, which costs several times more; a settle
    # pays this once per participant.
    uid, user, pool_uid, currency, amount, rake, funding, _, _, _, ticket, uuid, secrets = bet
    return Bet(
        uid, user, pool_uid, currency, amount, rake, funding, state, payout, payout_currency,
        ticket, uuid, secrets,
    )  # fmt: skip


def _check_owner(bet: Bet, user: str, pool_uid: int) -> None:
    # A bet belongs to exactly one user and one tournament; a callback naming others is not
    # about this bet, and acting on it could move someone else's money.
    if bet.user != user or bet.pool_uid != pool_uid:
        raise BetConflict(f"bet {bet.uid} belongs to another user or tournament", bet_uid=bet.uid)


def refund(item: RefundItem, existing: Bet | None) -> Closing | Replay:
    """Decide a refund: the exact reverse of the hold, the replay it is, or an error.

    The reversal uses the amounts recorded at placement, never the refund payload's, so a
    refund can only ever return what was taken.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        return Replay.ALREADY_REFUNDED
    if existing.state == BetState.SETTLED:
        raise BetAlreadySettled(f"bet {item.bet_uid} is already settled", bet_uid=item.bet_uid)
    _check_owner(existing, item.user, item.pool_uid)
    destination = {
        Funding.CASH: user_account(existing.user),
        Funding.TICKET: HOUSE_TICKETS,
        Funding.FREE: "",
    }[existing.funding]
    legs = (
        transfer(
            held_account(existing.user),
            destination,
            existing.currency,
            existing.total,
            existing.uid,
        )
        if existing.funding != Funding.FREE
        else ()
    )
    return Closing(bet=_closed(existing, BetState.REFUNDED, None, None), legs=legs)


class SettleClaim(NamedTuple):
    """One participant of a Settle request as sent: the payout in the currency it names, if any."""

    bet_uid: int
    user: str
    pool_uid: int
    payout: Decimal
    currency: str | None = None
    secrets: Mapping[str, Any] | None = None


class SettleItem(NamedTuple):
    """One participant of a Settle request: payout in minor units of ``payout_currency``."""

    bet_uid: int
    user: str
    pool_uid: int
    payout: int
    payout_currency: str


def _same_payout(bet: Bet, item: SettleItem) -> bool:
    if (bet.payout or 0) == 0 and item.payout == 0:
        return True
    return bet.payout == item.payout and bet.payout_currency == item.payout_currency


def settle(item: SettleItem, existing: Bet | None) -> Closing | Replay:
    """Decide a settle: capture the hold and pay out, the replay it is, or an error.

    Capture moves the held buy-in to ``house:entries`` and the rake to ``house:rake``; a positive
    payout comes from ``house:prizes``. A zero payout is informational and credits nothing.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        raise BetAlreadyRefunded(f"bet {item.bet_uid} is already refunded", bet_uid=item.bet_uid)
    if existing.state == BetState.SETTLED:
        if _same_payout(existing, item):
            return Replay.ALREADY_SETTLED
        raise BetConflict(
            f"bet {item.bet_uid} was settled with a different payout", bet_uid=item.bet_uid
        )
    _check_owner(existing, item.user, item.pool_uid)
    legs: tuple[Posting, ...] = ()
    if existing.funding != Funding.FREE and existing.total:
        # One leg releases the whole hold; the house legs are summed per request anyway.
        legs = (
            Posting(held_account(existing.user), existing.currency, -existing.total, existing.uid),
            Posting(HOUSE_ENTRIES, existing.currency, existing.amount),
            Posting(HOUSE_RAKE, existing.currency, existing.rake),
        )
    legs += transfer(
        HOUSE_PRIZES, user_account(existing.user), item.payout_currency, item.payout, existing.uid
    )
    closed = _closed(existing, BetState.SETTLED, item.payout, item.payout_currency)
    return Closing(bet=closed, legs=legs)


def _settle_item(claim: SettleClaim, bet: Bet | None, scale: Callable[[str], int]) -> SettleItem:
    # A settle that names no currency pays in the bet's own currency (an unknown bet is refused
    # by settle() whatever its payout).
    currency = claim.currency or (bet.currency if bet is not None else "")
    payout = to_minor(claim.payout, scale(currency), field="bet.payout") if currency else 0
    return SettleItem(claim.bet_uid, claim.user, claim.pool_uid, payout, currency)


@dataclass(frozen=True, slots=True)
class ClosedBets:
    """The answer to a refund or settle: which bets this request closed, which were already."""

    closed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


class CloseDecision(NamedTuple):
    """What a refund or settle (or one chunk of it) writes, answers and notes."""

    bets: list[Bet]  # with their new state
    transaction: Transaction | None
    answer: ClosedBets
    notes: list[str]  # what the payload said that differs from the record: logged, not used


def refund_many(
    items: Sequence[RefundItem],
    known: Mapping[int, Bet],
    key: str,
    scale: Callable[[str], int],
) -> CloseDecision:
    """Decide the bets of a refund, all or nothing: the first rejection is raised."""

    def decide(item: RefundItem, bet: Bet | None) -> Closing | Replay:
        closing = refund(item, bet)
        if bet is not None and not isinstance(closing, Replay):
            notes.extend(refund_notes(item, bet, scale))
        return closing

    notes: list[str] = []
    return _close_many(items, known, key, TxnKind.REFUND, decide, notes)


def settle_many(
    claims: Sequence[SettleClaim],
    known: Mapping[int, Bet],
    key: str,
    scale: Callable[[str], int],
) -> CloseDecision:
    """Decide the participants of a settle, all or nothing: the first rejection is raised."""

    def decide(claim: SettleClaim, bet: Bet | None) -> Closing | Replay:
        closing = settle(_settle_item(claim, bet, scale), bet)
        if bet is not None and not isinstance(closing, Replay):
            notes.extend(echo_notes(claim.secrets, bet))
        return closing

    notes: list[str] = []
    return _close_many(claims, known, key, TxnKind.SETTLE, decide, notes)


class _Named(Protocol):
    @property
    def bet_uid(self) -> int: ...


Item = TypeVar("Item", bound=_Named)


def _close_many(
    items: Sequence[Item],
    known: Mapping[int, Bet],
    key: str,
    kind: TxnKind,
    decide: Callable[[Item, Bet | None], Closing | Replay],
    notes: list[str],
) -> CloseDecision:
    seen = dict(known)
    bets: list[Bet] = []
    legs: list[Posting] = []
    closed: list[int] = []
    unchanged: list[int] = []
    for item in items:
        uid = item.bet_uid
        closing = decide(item, seen.get(uid))
        if isinstance(closing, Replay):
            unchanged.append(uid)
            continue
        # A bet named twice in one request is closed once: the second sees it closed.
        seen[uid] = closing.bet
        bets.append(closing.bet)
        legs.extend(closing.legs)
        closed.append(uid)
    transaction = Transaction.journal(key, kind, legs) if legs else None
    return CloseDecision(bets, transaction, ClosedBets(closed, unchanged), notes)


def refund_notes(item: RefundItem, bet: Bet, scale: Callable[[str], int]) -> list[str]:
    """What a refund says of its bet that differs from the record: logged, never used."""
    notes = echo_notes(item.secrets, bet)
    for name, sent, recorded in (
        ("amount", item.amount, bet.amount),
        ("rake", item.rake, bet.rake),
    ):
        if sent is None:
            continue
        try:
            claimed: int | None = to_minor(sent, scale(bet.currency), field=name)
        except InvalidAmount:
            claimed = None
        if claimed != recorded:
            notes.append(
                f"bet {bet.uid}: the refund's {name} {str(sent)[:40]} differs from the recorded "
                f"{render(recorded, scale(bet.currency))} {bet.currency}"
            )
    return notes


def echo_notes(echoed: Mapping[str, Any] | None, bet: Bet) -> list[str]:
    """A note when the secrets a callback echoes differ from those returned at placement."""
    # The platform echoes the secrets Place Bet returned. An absent or empty echo is no claim
    # (the platform's own validator always sends {}); a different non-empty one is worth a look.
    if echoed and dict(echoed) != dict(bet.secrets):
        return [f"bet {bet.uid}: the secrets echoed differ from those returned at placement"]
    return []
