"""A set-based close run inside a unit of work: its steps in order, and what runs beside them.

The statements are :mod:`.closing`'s; here is their order. Invariant: a staged close either
refuses with the first item the domain would refuse, or hands the request back to the domain
(``None``: beyond the bounds of exact sums), or writes all of it; what it staged is discarded on
every way out. Proved by ``tests/stores/test_set_based.py`` (the same as the domain) and
``tests/stores/test_set_based_threshold.py`` (a refusal, a failure after it wrote).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Literal, TypeVar

from sqlalchemy import Connection

from ..directory import Seen
from . import closing, directory
from .base import ClosingOutcome, Staged
from .dialect import Dialect

__all__ = ["close_staged"]

R = TypeVar("R")


def close_staged(
    connection: Connection,
    dialect: Dialect,
    kind: Literal["refund", "settle"],
    rows: Sequence[Staged],
    limit: int,
    key: str,
    chunk: int,
    request_id: str | None,
    seen: Seen,
    describe_users: bool,
    *,
    event_slots: Callable[[int], tuple[int, int]],
    now: Callable[[], datetime],
) -> int | ClosingOutcome | None:
    """Close ``rows`` (within ``limit``: :func:`ledger.stores.closing.bound`) set-based.

    ``event_slots`` is the unit of work's, ``now`` its clock. (A huge close runs in a bulk unit
    of work, whose commit on SQLite leaves the copy of its log to a thread:
    :meth:`ledger.stores.dialect.Dialect.release`.)"""
    repeats = closing.stage(connection, dialect, rows)
    # Two passes over the items that need no database, made while the database joins
    # them with their bets: the wait for Postgres's answer and SQLite's statements let
    # go of the interpreter. A million items: 0.37 s of the writer's own time, now
    # under the join's 2.5 s (benchmarks/settle_split.py).
    aside = _beside(
        lambda: (not repeats and closing.one_item_per_user(rows), closing.may_note(rows))
    )
    collected = closing.collect(connection, dialect, kind, repeats, len(rows), limit)
    if collected.refused is not None:
        closing.discard(connection)
        return collected.refused
    one_user_each, notes = aside.result()
    if not closing.within_bounds(connection, dialect, kind, limit, one_user_each, collected):
        closing.discard(connection)
        return None
    outcome = closing.write(
        connection,
        dialect,
        kind,
        key,
        chunk,
        request_id,
        event_slots,
        len(rows),
        notes,
        one_user_each,
        collected.closing,
    )
    at = now()
    directory.record_seen(connection, dialect, seen, at)
    if describe_users:
        directory.record_staged_users(
            connection, dialect, "close_stage", at, distinct=one_user_each
        )
    closing.discard(connection)
    return outcome


def _beside(work: Callable[[], R]) -> Future[R]:
    """``work`` started on a thread of its own; its outcome in the future. For Python that can
    run while the calling thread waits for the database (which lets go of the GIL)."""
    outcome: Future[R] = Future()

    def run() -> None:
        if not outcome.set_running_or_notify_cancel():
            return
        try:
            outcome.set_result(work())
        except BaseException as error:  # noqa: BLE001 - the caller's, through result()
            outcome.set_exception(error)

    threading.Thread(target=run, name="ledger-close-beside", daemon=True).start()
    return outcome
