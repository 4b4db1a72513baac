"""The embedded ledger API over one store: :class:`Ledger`, built by :func:`open_ledger`.

Each write turns its input into a command (:mod:`ledger.commands`): the payload is validated and
its amounts converted to minor units here, then the writer (:mod:`ledger.writer`) applies it in
one unit of work, where the domain decides and the store writes. Every request is
all-or-nothing. Reads open a read-only unit of work of their own.

The class is assembled from its parts, one module each: :mod:`.writes` (money in and out, the
callbacks), :mod:`.books` (balances, statements, holds, reports), :mod:`.directory`
(tournaments, users, bets), :mod:`.feed` (events, the delivery journal) and :mod:`.limits`
(responsible-gambling limits and exclusions), over
:mod:`.core` (the store, the writer, reading).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..currencies import CurrencyTable
from ..settings import (
    DEFAULT_LIMIT_COOLING_OFF,
    DEFAULT_STALE_HOLD_DAYS,
    DEFAULT_STALE_HOLD_GRACE,
)
from ..stores import (
    open_store,
)
from ..writer.process import ChildSpec
from .directory import Directory
from .feed import Feed
from .limits import PlayerLimits
from .writes import Writes

__all__ = ["Ledger", "open_ledger"]


class Ledger(Writes, Directory, Feed, PlayerLimits):
    """A double-entry wallet ledger over one store. Build it with :func:`open_ledger`."""


def open_ledger(
    url: str = "sqlite:///ledger.db",
    *,
    currencies: CurrencyTable | None = None,
    migrate: bool | None = None,
    group_commit: bool | None = None,
    max_queue: int = 10_000,
    max_wait: float = 10.0,
    threads: int = 16,
    stale_hold_grace: timedelta = DEFAULT_STALE_HOLD_GRACE,
    stale_hold_days: float = DEFAULT_STALE_HOLD_DAYS,
    read_url: str | None = None,
    writer_process: bool = False,
    limit_cooling_off: timedelta = DEFAULT_LIMIT_COOLING_OFF,
    clock: Callable[[], datetime] | None = None,
    **store_options: Any,
) -> Ledger:
    """Open the ledger in the database ``url`` names (the one composition root of the library).

    ``sqlite:///path.db`` creates and upgrades the file itself; Postgres URLs expect
    ``ledger db upgrade`` to have run (or pass ``migrate=True``). ``group_commit`` (default on)
    applies concurrent writes in shared transactions, one durable commit per batch; at most
    ``max_queue`` writes wait for the writer, and none is queued while it has been stuck on one
    batch for ``max_wait`` seconds (both refused with 503 ``store.busy``). ``threads`` writers
    apply the writes that do not go through group commit. An open hold is stale once its
    tournament's estimated end plus ``stale_hold_grace`` has passed or, without an end time,
    after ``stale_hold_days`` (see :meth:`Ledger.stale_rule`). ``read_url`` names a read
    replica (a streaming standby) that reports read from; see :meth:`Ledger._read`.
    ``writer_process`` applies Place Bets in a child process with a GIL of its own (the
    callback server's default; see :mod:`ledger.writer.process`). ``limit_cooling_off`` is
    how long a higher responsible-gambling limit or a removal waits (:mod:`.limits`);
    ``clock`` (timezone-aware UTC) replaces the wall clock of the limits' windows and
    cooling-off, for tests (a writer process keeps its own wall clock).
    """
    store = open_store(url, migrate=migrate, **store_options)
    try:
        read_store = (
            None
            if read_url is None
            else open_store(read_url, migrate=False, create=False, primary=False, **store_options)
        )
    except BaseException:
        store.close()
        raise
    return Ledger(
        store,
        currencies=currencies,
        group_commit=group_commit,
        max_queue=max_queue,
        max_wait=max_wait,
        threads=threads,
        stale_hold_grace=stale_hold_grace,
        stale_hold_days=stale_hold_days,
        read_store=read_store,
        writer_process=(
            ChildSpec(url, store_options, max_queue, max_wait) if writer_process else None
        ),
        limit_cooling_off=limit_cooling_off,
        clock=clock,
    )
