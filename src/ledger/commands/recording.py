"""What every callback's write records beside its effects, in the same unit of work: the
delivery journal's 200 rows and what the payload said of its tournaments and users."""

from __future__ import annotations

from collections.abc import Sequence

from ..deliveries import Delivery, answered_uids
from ..directory import Seen
from ..domain import ClosedBets, PlacedBets
from ..stores import UnitOfWork

__all__ = ["journal", "record_seen", "request_id"]


def request_id(delivery: Delivery | None) -> str | None:
    """The X-Request-Id a delivery came with, for its events (None: none, or not journalled)."""
    return None if delivery is None else delivery.request_id


def journal(
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


def record_seen(uow: UnitOfWork, seen: Seen) -> None:
    """Record what the payload said of its tournaments and users (nothing: nothing written)."""
    if seen:
        uow.record_seen(seen)
