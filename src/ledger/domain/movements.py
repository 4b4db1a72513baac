"""Deposits and withdrawals: money in and out, once per reference."""

from __future__ import annotations

from ..errors import (
    InvalidAmount,
    ReferenceConflict,
)
from .accounts import HOUSE_CASH, user_account
from .journal import Replay, Transaction, TxnKind, transfer


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
