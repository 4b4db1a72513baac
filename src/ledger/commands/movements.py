"""Deposits and withdrawals: money in and out, applied once per reference."""

from __future__ import annotations

from dataclasses import dataclass

from .. import domain, events
from ..domain import (
    Replay,
    Transaction,
    TxnKind,
)
from ..stores import UnitOfWork
from ..writer.port import Single


@dataclass(frozen=True, slots=True)
class Move(Single):
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
        if decided.kind == TxnKind.DEPOSIT and decided.user is not None:
            # After the post, which locked the account (the order Place Bet takes them in):
            # a deposit past a limit, or of an excluded user, is refused with nothing kept.
            # Withdrawals are never refused by a limit.
            gate = uow.limits.gate([decided.user])
            if gate:
                [leg] = [leg for leg in decided.postings if leg.amount > 0]
                refused = gate.admit_deposit(decided.user, leg.currency, leg.amount)
                if refused is not None:
                    raise refused
                uow.limits.record(gate)
        uow.append_events(events.movement_rows(decided, self.request_id))
        return True
