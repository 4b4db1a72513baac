"""A huge close's temporary tables held in the backend's own memory, and that memory given back.

A set-based close stages its items and the rows it derives from them in temporary tables
(:mod:`ledger.stores.closing`): 306 MiB at a settle of 1,000,000 participants. Postgres keeps
temporary tables in the session's local buffers, 8 MB by default (``temp_buffers``); past that,
every page went out to a file and was read back, through the kernel, statement after
statement. With room for them, the Postgres server's CPU for that settle was 43.7 s against
48.5 s without (medians of seven runs each on one book copied from a template, alternated, with
room of 1 GB; the tables fit in :data:`TEMP_BUFFERS` as well; the runs of one variant spread 39
to 58 s on this shared machine, and the room won six of the seven pairs).

Postgres allocates local buffers as a session first uses them and frees them only when it ends,
and ``temp_buffers`` cannot change once a session has used a temporary table; so every
connection is opened with the setting, and one that staged :data:`RETIRE_FROM` items or more
is closed for good when its unit of work ends instead of going back to the pool.

Invariant: no pooled connection holds more local buffers than the largest close of fewer than
:data:`RETIRE_FROM` items needs (about what the default allowed); a close of any size runs the
same SQL. Tested by ``tests/stores/test_postgres_temp_buffers.py``.
"""

from __future__ import annotations

import contextlib

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

__all__ = ["OPTION", "RETIRE_FROM", "TEMP_BUFFERS", "release", "staged"]

# Room for a settle of about 1,500,000 participants' temporary tables; a larger close spills
# the rest to files, as every close past 8 MB did before.
TEMP_BUFFERS = "512MB"

# The connection's startup option (beside the lock and statement timeouts).
OPTION = f"-c temp_buffers={TEMP_BUFFERS}"

# Staged items from which a close's temporary tables outgrow the default 8 MB (about 300 bytes
# an item, across the tables): its connection is then not kept.
RETIRE_FROM = 25_000

_LARGE = "ledger.large_temporary_tables"  # in the pooled connection's info


def staged(connection: Connection, items: int) -> None:
    """Note that ``connection``'s unit of work staged ``items`` items in temporary tables (never
    raises: it runs after a failed COPY too, whose error is the one to report)."""
    if items >= RETIRE_FROM:
        with contextlib.suppress(SQLAlchemyError):
            connection.info[_LARGE] = True


def release(connection: Connection) -> None:
    """End with ``connection``: back to the pool, or closed for good when it staged a huge close
    (its local buffers go with its session)."""
    with contextlib.suppress(SQLAlchemyError):
        if connection.info.pop(_LARGE, False):
            connection.invalidate()
        connection.close()
