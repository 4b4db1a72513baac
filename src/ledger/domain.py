"""The pure core: accounts, postings, balanced transactions and the bet lifecycle.

Functions here take values and return values (postings, transactions, bet records); they never do
I/O. The service layer loads the current state through a unit of work, asks these functions what
to do, and writes what they return. Every outcome of the idempotency table (DESIGN section 5) is
decided here, in one place.

Amounts are integers of the currency's minor unit. Standard library only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from .errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    InvalidAmount,
    ReferenceConflict,
    UnbalancedTransaction,
)

__all__ = [
    "HELD_SUFFIX",
    "HOUSE_CASH",
    "HOUSE_ENTRIES",
    "HOUSE_PRIZES",
    "HOUSE_RAKE",
    "HOUSE_TICKETS",
    "Bet",
    "BetState",
    "Entry",
    "Funding",
    "Posting",
    "RefundItem",
    "SettleItem",
    "Transaction",
    "TxnKind",
    "account_kind",
    "deposit",
    "held_account",
    "is_valid_user_uid",
    "place",
    "refund",
    "residual",
    "settle",
    "user_account",
    "withdrawal",
]

# Account names. ``user:<uid>`` is what the operator owes the user; ``user:<uid>:held`` is money
# reserved for entries not yet settled or refunded; the house accounts are the other legs.
HOUSE_CASH = "house:cash"
HOUSE_TICKETS = "house:tickets"
HOUSE_ENTRIES = "house:entries"
HOUSE_RAKE = "house:rake"
HOUSE_PRIZES = "house:prizes"


def user_account(uid: str) -> str:
    """The user's available balance."""
    return f"user:{uid}"


def held_account(uid: str) -> str:
    """The user's money held for open entries."""
    return f"user:{uid}:held"


HELD_SUFFIX = ":held"


def is_valid_user_uid(uid: str) -> bool:
    """False for a uid whose available account would be another user's held account.

    ``user_account("u1:held")`` is ``held_account("u1")``: such a user would spend, and see,
    u1's held money. Refusing these uids keeps every account name unambiguous.
    """
    return not uid.endswith(HELD_SUFFIX)


def account_kind(name: str) -> str:
    """``available``, ``held`` or ``house``: the kinds the store's no-overdraft rule keys on."""
    if name.startswith("house:"):
        return "house"
    return "held" if name.endswith(":held") else "available"


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
            if leg.bet_uid is None and leg.account.startswith("house:"):
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
        Posting(source, currency, -amount, None if source.startswith("house:") else bet_uid),
        Posting(
            destination, currency, amount, None if destination.startswith("house:") else bet_uid
        ),
    )


# --- deposits and withdrawals ------------------------------------------------------------------


def _positive(amount: int) -> None:
    if amount <= 0:
        raise InvalidAmount("amount: must be greater than zero")


def deposit(user: str, currency: str, amount: int, reference: str) -> Transaction:
    """Money in from the outside world, idempotent by the caller's reference."""
    _positive(amount)
    return Transaction(
        key=f"deposit:{reference}",
        kind=TxnKind.DEPOSIT,
        postings=transfer(HOUSE_CASH, user_account(user), currency, amount),
        user=user,
        reference=reference,
    )


def withdrawal(user: str, currency: str, amount: int, reference: str) -> Transaction:
    """Money out to the outside world; the store refuses it when the available balance is short."""
    _positive(amount)
    return Transaction(
        key=f"withdrawal:{reference}",
        kind=TxnKind.WITHDRAWAL,
        postings=transfer(user_account(user), HOUSE_CASH, currency, amount),
        user=user,
        reference=reference,
    )


def same_movement(existing: Transaction, requested: Transaction) -> Transaction:
    """A re-sent deposit or withdrawal: the same one is a no-op, a different one is a conflict."""
    if existing.kind != requested.kind or set(existing.postings) != set(requested.postings):
        raise ReferenceConflict(
            f"reference {requested.reference!r} was already used for a different "
            f"{existing.kind.value}"
        )
    return existing


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


def place(entry: Entry, existing: Bet | None, secrets: Mapping[str, Any]) -> Placement | None:
    """Decide a Place Bet entry: a new placement, ``None`` for an idempotent re-send, or an error.

    A bet already refunded or settled is never debited again: the re-send answers success.
    """
    if existing is not None:
        if existing.state == BetState.PLACED and not _matches(existing, entry):
            raise BetConflict(
                f"bet {entry.bet_uid} was placed with a different user, pool, amount or currency",
                bet_uid=entry.bet_uid,
            )
        return None
    if entry.ticket:
        funding, source = Funding.TICKET, HOUSE_TICKETS
    elif entry.total == 0:
        funding, source = Funding.FREE, ""
    else:
        funding, source = Funding.CASH, user_account(entry.user)
    bet = Bet(
        uid=entry.bet_uid,
        user=entry.user,
        pool_uid=entry.pool_uid,
        currency=entry.currency,
        amount=entry.amount,
        rake=entry.rake,
        funding=funding,
        ticket=entry.ticket,
        request_uuid=entry.request_uuid,
        secrets=secrets,
    )
    legs = (
        transfer(source, held_account(entry.user), entry.currency, entry.total, entry.bet_uid)
        if funding != Funding.FREE
        else ()
    )
    return Placement(bet=bet, legs=legs)


class RefundItem(NamedTuple):
    """One bet of a Refund Bet or Refund Tournament request."""

    bet_uid: int
    user: str
    pool_uid: int


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


def refund(item: RefundItem, existing: Bet | None) -> Closing | None:
    """Decide a refund: the exact reverse of the hold, ``None`` when already refunded, or an error.

    The reversal uses the amounts recorded at placement, never the refund payload's, so a
    refund can only ever return what was taken.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        return None
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


def settle(item: SettleItem, existing: Bet | None) -> Closing | None:
    """Decide a settle: capture the hold and pay out, ``None`` when already so settled, or an error.

    Capture moves the held buy-in to ``house:entries`` and the rake to ``house:rake``; a positive
    payout comes from ``house:prizes``. A zero payout is informational and credits nothing.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        raise BetAlreadyRefunded(f"bet {item.bet_uid} is already refunded", bet_uid=item.bet_uid)
    if existing.state == BetState.SETTLED:
        if _same_payout(existing, item):
            return None
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
