"""The journal's and the feed's upkeep: a refused delivery's row, and retention."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..deliveries import DeliveryRecord
from ..stores import UnitOfWork
from ..writer.port import Single


@dataclass(frozen=True, slots=True)
class RecordDelivery(Single):
    """The journal row of a refused delivery, written after the fact (best effort)."""

    record: DeliveryRecord
    size: int = 1

    @property
    def deferred(self) -> bool:
        return True

    def apply(self, uow: UnitOfWork) -> None:
        uow.record_deliveries([self.record])


@dataclass(frozen=True, slots=True)
class PruneDeliveries(Single):
    """Delete up to ``batch`` journal rows received before ``cutoff``; answers how many."""

    cutoff: datetime
    batch: int
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        return uow.retention().prune_deliveries(self.cutoff, self.batch)


@dataclass(frozen=True, slots=True)
class PruneEvents(Single):
    """Delete the events of up to ``batch`` transactions committed before ``cutoff``; answers
    how many events went. With ``keep_undelivered``, none that a webhook endpoint has yet to
    receive: retention must not take what a receiver that was away would still be sent."""

    cutoff: datetime
    batch: int
    keep_undelivered: bool = True
    size: int = 1

    def apply(self, uow: UnitOfWork) -> int:
        # Read in the same transaction; cursors only move forward, so it can only keep more.
        retention = uow.retention()
        slowest = retention.slowest_webhook() if self.keep_undelivered else None
        through = None if slowest is None else slowest[1]
        return retention.prune_events(self.cutoff, self.batch, through)
