"""The delivery journal: its JSON, text and CSV shapes."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .amounts import timestamp_text

if TYPE_CHECKING:
    from ..deliveries import DeliveryRecord

DELIVERY_COLUMNS = (
    "id",
    "received_at",
    "request_id",
    "event",
    "path",
    "client",
    "subject",
    "address",
    "status",
    "error",
    "bet_count",
    "bet_uids",
    "duration_ms",
)


"""The fields of a delivery journal row, in order: its JSON keys and its CSV columns."""


def delivery_dict(item: DeliveryRecord) -> dict[str, Any]:
    """One journal row; ``duration_ms`` (microsecond precision) of a 2xx row runs up to the
    moment its row was written, just before the commit. A JSON number, as in the log lines."""
    return {
        "id": item.id,
        "received_at": timestamp_text(item.received_at),
        "request_id": item.request_id,
        "event": item.event,
        "path": item.path,
        "client": item.client,
        "subject": item.subject,
        "address": item.address,
        "status": item.status,
        "error": item.error,
        "bet_count": item.bet_count,
        "bet_uids": list(item.bet_uids),
        "duration_ms": item.duration_us / 1000,
    }


def deliveries_dict(items: Sequence[DeliveryRecord], next_page: str | None) -> dict[str, Any]:
    """``{"deliveries": [...], "next"}``: pass ``next`` as ``before`` for the next page."""
    return {"deliveries": [delivery_dict(item) for item in items], "next": next_page}


def delivery_text(item: DeliveryRecord) -> str:
    more = "..." if item.bet_count > len(item.bet_uids) else ""
    uids = ",".join(map(str, item.bet_uids)) + more
    return (
        f"{timestamp_text(item.received_at)}  {item.status} {item.error or 'ok':<28} "
        f"{item.event:<18} {item.request_id or '-'}  bets {item.bet_count} [{uids}]  "
        f"{Decimal(item.duration_us).scaleb(-3)} ms  {item.client or '-'}/{item.subject or '-'} "
        f"{item.address or '-'}"
    )
