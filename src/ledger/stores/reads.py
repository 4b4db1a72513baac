"""The SQL stores' :class:`~ledger.stores.port.Reads` and :class:`~ledger.stores.port.Audit`:
reports and the audit over one read-only connection (:meth:`SqlStore.reading`); the driver's
errors are translated once, where the connection is opened."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, literal, select

from ..deliveries import DeliveryFilter, DeliveryRecord
from ..events import EventRow
from . import audit, directory, queries
from . import deliveries as journal
from . import events as feed
from .base import (
    AccountBalance,
    BetRecord,
    CheckReport,
    DeliveryCount,
    HoldRow,
    HourTotals,
    HouseTotals,
    PoolTotals,
    PostingRecord,
    StaleRule,
    StatementRow,
    TournamentRecord,
    UserRecord,
)
from .dialect import Dialect
from .schema import bets

__all__ = ["SqlReads"]


class SqlReads:
    """Every report, and the audit, over one read-only connection."""

    def __init__(self, connection: Connection, dialect: Dialect) -> None:
        self._connection = connection
        self._dialect = dialect

    def balances(self, user: str) -> list[AccountBalance]:
        return queries.balances(self._connection, user)

    def balances_at(self, user: str, at: datetime) -> list[AccountBalance]:
        return queries.balances_at(self._connection, user, at)

    def statement(
        self, user: str, currency: str | None, limit: int, before: int | None
    ) -> list[StatementRow]:
        return queries.statement(self._connection, user, currency, limit, before)

    def holds(
        self,
        *,
        limit: int,
        after: tuple[datetime, int] | None,
        user: str | None,
        pool_uid: int | None,
        placed_by: datetime | None,
        rule: StaleRule,
        only_stale: bool,
    ) -> list[HoldRow]:
        return queries.holds(
            self._connection,
            limit=limit,
            after=after,
            user=user,
            pool_uid=pool_uid,
            placed_by=placed_by,
            rule=rule,
            only_stale=only_stale,
        )

    def count_stale_holds(self, stale: StaleRule) -> int:
        return queries.count_stale_holds(self._connection, stale)

    def house_totals(
        self, since: datetime | None, until: datetime | None, currency: str | None
    ) -> list[HouseTotals]:
        return queries.house_totals(self._connection, self._dialect, since, until, currency)

    def hourly_totals(self, since: datetime, until: datetime) -> list[HourTotals]:
        return queries.hourly_totals(self._connection, self._dialect, since, until)

    def pool_totals(self, pool_uid: int) -> list[PoolTotals]:
        return queries.pool_totals(self._connection, self._dialect, pool_uid)

    def bet_records(
        self, pools: Collection[int] | None = None, uids: Collection[int] | None = None
    ) -> Iterator[list[tuple[Any, ...]]]:
        yield from queries.bet_records(self._connection, pools, uids)

    def bet(self, uid: int) -> BetRecord | None:
        return directory.bet_record(self._connection, uid)

    def bet_postings(self, found: BetRecord) -> list[PostingRecord]:
        return directory.bet_postings(self._connection, found)

    def bets(
        self,
        user: str | None,
        pool: int | None,
        state: str | None,
        limit: int,
        before: int | None,
    ) -> list[BetRecord]:
        return directory.bet_records(self._connection, user, pool, state, limit, before)

    def bets_by_time(
        self,
        user: str | None,
        pool: int | None,
        state: str | None,
        limit: int,
        before: tuple[datetime, int] | None,
    ) -> list[BetRecord]:
        return directory.bets_by_time(self._connection, user, pool, state, limit, before)

    def tournament_names(self, uids: Sequence[int]) -> dict[int, str]:
        return directory.tournament_names(self._connection, uids)

    def tournament_statuses(self) -> list[str]:
        return directory.tournament_statuses(self._connection)

    def tournaments(
        self,
        status: str | None,
        search: str | None,
        limit: int,
        before: tuple[datetime, int] | None,
    ) -> list[TournamentRecord]:
        return directory.tournament_records(self._connection, status, search, limit, before)

    def tournament(self, uid: int) -> TournamentRecord | None:
        return directory.tournament_record(self._connection, uid)

    def users(
        self, search: str | None, limit: int, before: tuple[datetime, str] | None
    ) -> list[UserRecord]:
        return directory.user_records(self._connection, search, limit, before)

    def user(self, uid: str) -> UserRecord | None:
        return directory.user_record(self._connection, uid)

    def events(
        self, after: int, limit: int, types: Sequence[str] | None
    ) -> list[tuple[int, datetime, EventRow]]:
        return feed.list_events(self._connection, after, limit, types)

    def last_event_id(self) -> int:
        return feed.last_id(self._connection)

    def slowest_webhook(self) -> tuple[str, int] | None:
        return feed.slowest_cursor(self._connection)

    def deliveries(
        self, wanted: DeliveryFilter, limit: int, after: tuple[datetime, int] | None
    ) -> list[DeliveryRecord]:
        return journal.list_deliveries(self._connection, wanted, limit, after)

    def count_deliveries(self, since: datetime) -> list[DeliveryCount]:
        return journal.count_deliveries(self._connection, since)

    def bet_times(self, uid: int) -> tuple[datetime, datetime | None] | None:
        query = select(bets.c.placed_at, bets.c.closed_at).where(bets.c.uid == uid)
        row = self._connection.execute(query).first()
        return None if row is None else (row.placed_at, row.closed_at)

    def ping(self) -> None:
        self._connection.execute(select(literal(1))).scalar_one()

    def check(self) -> CheckReport:
        return audit.check(self._connection, self._dialect)
