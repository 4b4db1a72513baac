"""The delivery journal's SQL: writing rows in bulk, listing them newest first, pruning.

Plain functions over an open connection, called by the unit of work (:mod:`.sql`) inside its
transaction. A batch of rows goes in as two bulk inserts (rows, then their bet links) with ids
allocated beforehand, so that a group commit of hundreds of Place Bets pays two statements for
its journal, not hundreds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select, tuple_

from ..deliveries import DeliveryFilter, DeliveryRecord
from .base import DeliveryCount
from .dialect import Dialect
from .schema import deliveries, delivery_bets

__all__ = ["count_deliveries", "list_deliveries", "prune", "record"]

# Every column, in the table's order: the order of the rows written below.
COLUMNS = tuple(column.name for column in deliveries.columns)


def record(connection: Connection, dialect: Dialect, records: Sequence[DeliveryRecord]) -> None:
    """Write ``records`` and the links of each to the bets it names."""
    if not records:
        return
    ids = dialect.allocate_delivery_ids(connection, len(records))
    rows: list[tuple[Any, ...]] = []
    links: list[tuple[int, int]] = []
    for delivery_id, item in zip(ids, records, strict=True):
        # The record's fields are the columns' order after the id (see COLUMNS); the uids as
        # the JSON of a list of integers, without json.dumps' cost on the hot path.
        uids = f"[{','.join(map(str, item.bet_uids))}]"
        stamp = dialect.timestamp(item.received_at.astimezone(UTC))
        rows.append((delivery_id, stamp, *item[1:10], uids, item.duration_us))
        # A request may name a bet twice; its link is one row.
        links.extend((uid, delivery_id) for uid in dict.fromkeys(item.bet_uids))
    dialect.insert_rows(connection, deliveries, COLUMNS, rows)
    dialect.insert_rows(connection, delivery_bets, ("bet_uid", "delivery_id"), links)


def _utc(moment: datetime) -> datetime:
    # SQLite hands timestamps back without a zone; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _stored_time(moment: datetime) -> datetime:
    # Compared in the form written: UTC (SQLite keeps the text of the UTC wall clock).
    return moment.astimezone(UTC)


def list_deliveries(
    connection: Connection,
    wanted: DeliveryFilter,
    limit: int,
    after: tuple[datetime, int] | None,
) -> list[DeliveryRecord]:
    """Up to ``limit`` rows matching ``wanted``, newest first, older than the ``after`` key."""
    d = deliveries.c
    query = select(deliveries).order_by(d.received_at.desc(), d.id.desc()).limit(limit)
    if wanted.bet is not None:
        linked = select(delivery_bets.c.delivery_id).where(delivery_bets.c.bet_uid == wanted.bet)
        query = query.where(d.id.in_(linked))
    if wanted.request_id is not None:
        query = query.where(d.request_id == wanted.request_id)
    if wanted.request_prefix is not None:
        escaped = wanted.request_prefix.lower().replace("\\", "\\\\")
        escaped = escaped.replace("%", "\\%").replace("_", "\\_")
        query = query.where(func.lower(d.request_id).like(escaped + "%", escape="\\"))
    if wanted.error is not None:
        query = query.where(d.error == wanted.error)
    if wanted.status is not None:
        query = query.where(d.status == wanted.status)
    if wanted.event is not None:
        query = query.where(d.event == wanted.event)
    if wanted.since is not None:
        query = query.where(d.received_at >= _stored_time(wanted.since))
    if wanted.until is not None:
        query = query.where(d.received_at < _stored_time(wanted.until))
    if after is not None:
        moment, last_id = _stored_time(after[0]), after[1]
        query = query.where(
            or_(d.received_at < moment, and_(d.received_at == moment, d.id < last_id))
        )
    return [_record(row) for row in connection.execute(query)]


def count_deliveries(connection: Connection, since: datetime) -> list[DeliveryCount]:
    """Rows received at or after ``since``, counted by event, status and error key (one range
    of the ``deliveries_received`` index)."""
    d = deliveries.c
    query = (
        select(d.event, d.status, d.error, func.count())
        .where(d.received_at >= _stored_time(since))
        .group_by(d.event, d.status, d.error)
    )
    found = [
        DeliveryCount(event, status, error, int(count))
        for event, status, error, count in connection.execute(query)
    ]
    # Sorted here: NULL error keys sort differently on the two databases.
    return sorted(found, key=lambda row: (row.event, row.status, row.error or ""))


def _record(row: Any) -> DeliveryRecord:
    return DeliveryRecord(
        id=row.id,
        received_at=_utc(row.received_at),
        request_id=row.request_id,
        event=row.event,
        path=row.path,
        client=row.client,
        subject=row.subject,
        address=row.address,
        status=row.status,
        error=row.error,
        bet_count=row.bet_count,
        bet_uids=tuple(row.bet_uids or ()),
        duration_us=row.duration_us,
    )


def prune(connection: Connection, cutoff: datetime, batch: int) -> int:
    """Delete up to ``batch`` of the oldest rows received before ``cutoff``; how many went."""
    rows = connection.execute(
        select(deliveries.c.id, deliveries.c.bet_uids)
        .where(deliveries.c.received_at < _stored_time(cutoff))
        .order_by(deliveries.c.received_at, deliveries.c.id)
        .limit(batch)
    ).all()
    if not rows:
        return 0
    # Each link by its primary key (bet uid, delivery id), from the uids the row lists.
    links = [(uid, row.id) for row in rows for uid in dict.fromkeys(row.bet_uids or ())]
    key = tuple_(delivery_bets.c.bet_uid, delivery_bets.c.delivery_id)
    for start in range(0, len(links), 500):
        connection.execute(delete(delivery_bets).where(key.in_(links[start : start + 500])))
    connection.execute(delete(deliveries).where(deliveries.c.id.in_([row.id for row in rows])))
    return len(rows)
