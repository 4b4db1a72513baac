"""Open holds, and when one is stale (the rule has one home here, in SQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Connection,
    FromClause,
    and_,
    case,
    func,
    or_,
    select,
)
from sqlalchemy.sql import ColumnElement

from ..base import (
    HoldRow,
    StaleRule,
)
from ..schema import bets, open_bets, tournaments


def stale_condition(rule: StaleRule) -> ColumnElement[bool]:
    """When an open hold is stale: the one home of the rule.

    A hold whose tournament has an ``estimated_end_time`` is stale once that time plus
    ``rule.grace`` has passed, whatever its age; without an end time, once it was placed more
    than ``rule.max_age`` ago. Read from :func:`holds_source`, which joins the tournaments.
    """
    return case(
        (
            tournaments.c.estimated_end_time.is_not(None),
            tournaments.c.estimated_end_time <= (rule.now - rule.grace).astimezone(UTC),
        ),
        else_=open_bets.c.placed_at <= (rule.now - rule.max_age).astimezone(UTC),
    )


def holds_source() -> FromClause:
    """What open holds are read from: ``open_bets`` (which bets are open, oldest first) with
    their bets and their tournament's estimated end."""
    return open_bets.join(bets, bets.c.uid == open_bets.c.uid).outerjoin(
        tournaments, tournaments.c.uid == bets.c.pool_uid
    )


def holds(
    connection: Connection,
    *,
    limit: int,
    after: tuple[datetime, int] | None,
    user: str | None,
    pool_uid: int | None,
    placed_by: datetime | None,
    rule: StaleRule,
    only_stale: bool,
) -> list[HoldRow]:
    """Open holds (placed bets), oldest first, after the ``(placed_at, uid)`` position."""
    query = (
        select(
            bets.c.uid,
            bets.c.user_uid,
            bets.c.pool_uid,
            bets.c.currency,
            bets.c.amount,
            bets.c.rake,
            bets.c.funding,
            open_bets.c.placed_at,
            # Computed where it is filtered: the rule has one home.
            stale_condition(rule).label("stale"),
        )
        .select_from(holds_source())
        .order_by(open_bets.c.placed_at, open_bets.c.uid)
        .limit(limit)
    )
    if after is not None:
        placed_at, uid = after[0].astimezone(UTC), after[1]
        query = query.where(
            or_(
                open_bets.c.placed_at > placed_at,
                and_(open_bets.c.placed_at == placed_at, open_bets.c.uid > uid),
            )
        )
    if user is not None:
        query = query.where(bets.c.user_uid == user)
    if pool_uid is not None:
        query = query.where(bets.c.pool_uid == pool_uid)
    if placed_by is not None:
        query = query.where(open_bets.c.placed_at <= placed_by.astimezone(UTC))
    if only_stale:
        query = query.where(stale_condition(rule))
    return [
        HoldRow(
            uid=row.uid,
            user=row.user_uid,
            pool_uid=row.pool_uid,
            currency=row.currency,
            amount=row.amount,
            rake=row.rake,
            funding=row.funding,
            placed_at=row.placed_at,
            stale=bool(row.stale),
        )
        for row in connection.execute(query)
    ]


def count_stale_holds(connection: Connection, stale: StaleRule) -> int:
    """How many open holds are stale: a walk of ``open_bets``, the open holds only."""
    query = select(func.count()).select_from(holds_source()).where(stale_condition(stale))
    return int(connection.execute(query).scalar_one())
