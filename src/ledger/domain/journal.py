"""Postings and balanced transactions: every movement of money is one, summing to zero."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from ..errors import (
    UnbalancedTransaction,
)
from .accounts import is_house


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
