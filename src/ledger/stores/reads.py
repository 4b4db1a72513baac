"""The SQL stores' :class:`~ledger.stores.port.Reads` and :class:`~ledger.stores.port.Audit`:
reports and the audit over one read-only connection (:meth:`SqlStore.reading`); the driver's
errors are translated once, where the connection is opened.

Each read is a plain function of the query modules, taking the connection (and, where the SQL
differs by store, the dialect) first; :class:`SqlReads` binds them to its connection, one line
each, so a new read is its query function and one line here. The port
(:class:`~ledger.stores.port.Reads`) is checked against this class by mypy where the store
hands it out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection

from . import audit, directory, queries
from . import deliveries as journal
from . import events as feed
from .dialect import Dialect

__all__ = ["SqlReads"]

P = ParamSpec("P")
R = TypeVar("R")


def _on_connection(
    query: Callable[Concatenate[Connection, P], R],
) -> Callable[Concatenate[SqlReads, P], R]:
    """A method that runs ``query`` over the reader's connection."""

    def read(self: SqlReads, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return query(self.connection, *args, **kwargs)

    read.__doc__ = query.__doc__
    return read


def _with_dialect(
    query: Callable[Concatenate[Connection, Dialect, P], R],
) -> Callable[Concatenate[SqlReads, P], R]:
    """A method that runs ``query`` over the reader's connection, in its store's SQL."""

    def read(self: SqlReads, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return query(self.connection, self.dialect, *args, **kwargs)

    read.__doc__ = query.__doc__
    return read


class SqlReads:
    """Every report, and the audit, over one read-only connection."""

    def __init__(self, connection: Connection, dialect: Dialect) -> None:
        self.connection = connection
        self.dialect = dialect

    # Balances and holds.
    balances = _on_connection(queries.balances)
    balances_at = _on_connection(queries.balances_at)
    statement = _on_connection(queries.statement)
    holds = _on_connection(queries.holds)
    count_stale_holds = _on_connection(queries.count_stale_holds)
    # The house's books.
    house_totals = _with_dialect(queries.house_totals)
    hourly_totals = _with_dialect(queries.hourly_totals)
    pool_totals = _with_dialect(queries.pool_totals)
    bet_records = _on_connection(queries.bet_records)
    # The directory: bets, tournaments and users as the platform named them.
    bet = _on_connection(directory.bet_record)
    bet_postings = _on_connection(directory.bet_postings)
    bet_times = _on_connection(directory.bet_times)
    bets = _on_connection(directory.bet_records)
    bets_by_time = _on_connection(directory.bets_by_time)
    tournament_names = _on_connection(directory.tournament_names)
    tournament_statuses = _on_connection(directory.tournament_statuses)
    tournaments = _on_connection(directory.tournament_records)
    tournament = _on_connection(directory.tournament_record)
    users = _on_connection(directory.user_records)
    user = _on_connection(directory.user_record)
    # The event feed and the delivery journal.
    events = _on_connection(feed.list_events)
    last_event_id = _on_connection(feed.last_id)
    slowest_webhook = _on_connection(feed.slowest_cursor)
    deliveries = _on_connection(journal.list_deliveries)
    count_deliveries = _on_connection(journal.count_deliveries)
    # Health and the audit.
    ping = _on_connection(audit.ping)
    check = _with_dialect(audit.check)
