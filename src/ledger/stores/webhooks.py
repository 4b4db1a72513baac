"""The webhooks' table: one durable cursor and one sender's lease per endpoint.

No money moves here, so each method is one short transaction of its own, outside the writer
(like :mod:`.operators`): a sender never holds a connection while it waits on a receiver. The
lease is a row's ``holder`` and ``lease_until``, taken and renewed by one conditional
``UPDATE``, so that replicas on one Postgres (or processes on one SQLite file) agree on who
sends without any lock held between statements. Every write that moves delivery on names its
holder, so a sender whose lease lapsed can no longer move the cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, or_, select, update

from .schema import webhook_cursors
from .tables import SideTables, utc

__all__ = ["CursorRow", "WebhookTables"]

# Error texts are kept to this many characters (a receiver's error page is not a log).
ERROR_TEXT = 500


@dataclass(frozen=True, slots=True)
class CursorRow:
    """One endpoint's row: its cursor, its lease, and how its last posts went."""

    endpoint: str
    position: int
    holder: str | None
    lease_until: datetime | None
    attempts: int
    last_success_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None


def _row(row: Any) -> CursorRow:
    return CursorRow(
        endpoint=row.endpoint,
        position=int(row.position),
        holder=row.holder,
        lease_until=utc(row.lease_until),
        attempts=row.attempts,
        last_success_at=utc(row.last_success_at),
        last_error=row.last_error,
        last_error_at=utc(row.last_error_at),
    )


class WebhookTables(SideTables):
    """Reads and writes of ``webhook_cursors`` in ``store`` (a SQL store)."""

    def ensure(self, endpoints: Sequence[str]) -> None:
        """Give each endpoint a row (cursor 0) unless it has one."""
        with self._tx(write=True) as c:
            self._store.dialect.insert_rows(
                c,
                webhook_cursors,
                ("endpoint", "position", "attempts"),
                [(name, 0, 0) for name in endpoints],
                ignore_conflicts=True,
            )

    def claim(self, endpoint: str, holder: str, now: datetime, until: datetime) -> CursorRow | None:
        """Take or renew the lease on ``endpoint`` for ``holder`` until ``until``; the row as it
        now stands, or ``None`` while another holder's lease runs (past ``now``)."""
        c_ = webhook_cursors.c
        with self._tx(write=True) as c:
            taken = c.execute(
                update(webhook_cursors)
                .where(
                    c_.endpoint == endpoint,
                    or_(
                        c_.holder.is_(None),
                        c_.holder == holder,
                        c_.lease_until.is_(None),
                        c_.lease_until < now.astimezone(UTC),
                    ),
                )
                .values(holder=holder, lease_until=until.astimezone(UTC))
            ).rowcount
            if not taken:
                return None
            return _row(c.execute(select(webhook_cursors).where(c_.endpoint == endpoint)).one())

    def advance(
        self,
        endpoint: str,
        holder: str,
        before: int,
        after: int,
        now: datetime,
        *,
        delivered: bool,
    ) -> bool:
        """Move the cursor from ``before`` to ``after`` if ``holder`` still holds the lease and
        nobody moved it meanwhile; ``delivered`` (a 2xx, not a pass over unwanted events) also
        records the success. Whether it moved."""
        c_ = webhook_cursors.c
        values: dict[str, Any] = {"position": after}
        if delivered:
            values.update(attempts=0, last_success_at=now.astimezone(UTC))
        with self._tx(write=True) as c:
            moved = c.execute(
                update(webhook_cursors)
                .where(c_.endpoint == endpoint, c_.holder == holder, c_.position == before)
                .values(**values)
            ).rowcount
        return bool(moved)

    def failed(self, endpoint: str, holder: str, error: str, now: datetime) -> None:
        """Record a failed post of the batch in flight (the cursor stays)."""
        c_ = webhook_cursors.c
        with self._tx(write=True) as c:
            c.execute(
                update(webhook_cursors)
                .where(c_.endpoint == endpoint, c_.holder == holder)
                .values(
                    attempts=c_.attempts + 1,
                    last_error=error[:ERROR_TEXT],
                    last_error_at=now.astimezone(UTC),
                )
            )

    def release(self, endpoints: Sequence[str], holder: str) -> None:
        """Give the leases up (a clean shutdown): another replica may take over at once."""
        c_ = webhook_cursors.c
        with self._tx(write=True) as c:
            c.execute(
                update(webhook_cursors)
                .where(c_.endpoint.in_(list(endpoints)), c_.holder == holder)
                .values(holder=None, lease_until=None)
            )

    def forget(self, endpoint: str) -> bool:
        """Drop an endpoint's row (an endpoint taken out of the configuration for good): its
        cursor no longer holds the feed's retention back. False if it had none."""
        with self._tx(write=True) as c:
            gone = c.execute(delete(webhook_cursors).where(webhook_cursors.c.endpoint == endpoint))
            return bool(gone.rowcount)

    def rows(self) -> list[CursorRow]:
        """Every endpoint's row, by name."""
        with self._tx(write=False) as c:
            found = c.execute(select(webhook_cursors).order_by(webhook_cursors.c.endpoint))
            return [_row(row) for row in found]
