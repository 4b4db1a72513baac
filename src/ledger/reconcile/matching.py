"""The comparison: the platform's rows and the ledger's bets side by side in a scratch SQLite
database on disk, and one join that classifies every bet.

Invariant: both sides stay on disk, so memory holds one batch at a time; each bet of either side
is counted once, as matched or by each of its differences; with ``pools_only`` the books outside
the file's pools are neither read nor reported missing on the platform. Nothing in the books is
changed. Proved by ``tests/service/test_reconcile.py`` and ``tests/e2e/test_reconcile_cli.py``.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Final

from sqlite_utils import Database

from ..currencies import CurrencyTable
from ..errors import LedgerError
from .parsing import Source, UnreadableFile, load
from .report import Reconciliation

__all__ = ["BetReader", "reconcile"]

# The platform's rows in the scratch database: amounts as minor units (canonical integer text,
# or ``~<decimal>`` for one that cannot be whole minor units), states in the ledger's words.
_PLATFORM_COLUMNS: Final = {
    "uid": int,
    "user": str,
    "pool": int,
    "currency": str,
    "amount": str,
    "rake": str,
    "state": str,
    "payout": str,
    "payout_currency": str,
}

_SCRATCH_SCHEMA: Final = """
CREATE TABLE wallet (
    uid INTEGER PRIMARY KEY, user TEXT, pool INTEGER, currency TEXT, amount TEXT, rake TEXT,
    state TEXT, payout TEXT, payout_currency TEXT
);
"""

# One row of the platform's file beside its bet in the wallet, with what differs. A column the
# file does not give (NULL) is not compared. A payout is compared when both sides settled the bet
# (a state mismatch already says the rest); the wallet's zero payout may be stored as NULL.
_COMPARED: Final = """
CREATE TEMP VIEW compared AS
SELECT p.*, w.uid AS w_uid, w.user AS w_user, w.pool AS w_pool, w.currency AS w_currency,
       w.amount AS w_amount, w.rake AS w_rake, w.state AS w_state, w.payout AS w_payout,
       w.payout_currency AS w_payout_currency,
       w.uid IS NOT NULL AND p.state IS NOT NULL AND p.state IS NOT w.state AS state_mismatch,
       w.uid IS NOT NULL AND (
           (p.amount IS NOT NULL AND p.amount IS NOT w.amount)
           OR (p.rake IS NOT NULL AND p.rake IS NOT w.rake)
           OR (p.currency IS NOT NULL AND p.currency IS NOT w.currency)
       ) AS amount_mismatch,
       w.uid IS NOT NULL AND p.state = 'settled' AND w.state = 'settled' AND (
           (p.payout IS NOT NULL AND p.payout IS NOT coalesce(w.payout, '0'))
           OR (p.payout_currency IS NOT NULL AND w.payout_currency IS NOT NULL
               AND p.payout_currency IS NOT w.payout_currency)
       ) AS payout_mismatch,
       w.uid IS NOT NULL AND (
           (p.user IS NOT NULL AND p.user IS NOT w.user)
           OR (p.pool IS NOT NULL AND p.pool IS NOT w.pool)
       ) AS owner_mismatch
FROM platform p LEFT JOIN wallet w ON w.uid = p.uid
"""

_COUNTS_QUERY: Final = """
SELECT count(*),
       coalesce(sum(w_uid IS NULL), 0),
       coalesce(sum(w_uid IS NOT NULL AND NOT (state_mismatch OR amount_mismatch
                    OR payout_mismatch OR owner_mismatch)), 0),
       coalesce(sum(state_mismatch), 0), coalesce(sum(amount_mismatch), 0),
       coalesce(sum(payout_mismatch), 0), coalesce(sum(owner_mismatch), 0),
       coalesce(sum(w_uid IS NULL OR state_mismatch OR amount_mismatch OR payout_mismatch
                    OR owner_mismatch), 0)
FROM compared
"""

_MISSING_ON_PLATFORM: Final = """
SELECT count(*) FROM wallet w WHERE NOT EXISTS (SELECT 1 FROM platform p WHERE p.uid = w.uid)
"""

# ``read_bets(pools, uids)``: the ledger's bets (all of them when both are None) in batches of
# (uid, user_uid, pool_uid, currency, amount, rake, state, payout, payout_currency).
BetReader = Callable[
    [Collection[int] | None, Collection[int] | None], Iterable[list[tuple[Any, ...]]]
]


def reconcile(
    source: Source,
    read_bets: BetReader,
    currencies: CurrencyTable,
    *,
    pools_only: bool = False,
    scratch_dir: str | Path | None = None,
) -> Reconciliation:
    """Compare the platform's file with the ledger's bets.

    ``source``: a path, raw bytes, or a binary file object. ``read_bets(pools, uids)`` streams
    the ledger's bets in batches (:meth:`ledger.Ledger.reconcile` passes its read unit of work);
    with ``pools_only`` it is asked only for the file's pools, and for the file's bets outside
    them, so that the rest of the books is neither read nor reported missing on the platform.

    Raises :class:`UnreadableFile` (400) for a file that is not a record of bets.
    """
    scratch = tempfile.TemporaryDirectory(prefix="ledger-reconcile-", dir=scratch_dir)
    database = Database(Path(scratch.name) / "reconcile.db")
    try:
        # A throwaway database: durability would only cost time.
        database.execute("PRAGMA journal_mode = OFF")
        database.execute("PRAGMA synchronous = OFF")
        database.conn.executescript(_SCRATCH_SCHEMA)
        database.table("platform").create(_PLATFORM_COLUMNS)
        file_format = load(database, source, currencies)
        _check_unique(database)
        platform_rows = database.table("platform").count
        if pools_only:
            if database.execute("SELECT 1 FROM platform WHERE pool IS NULL LIMIT 1").fetchone():
                raise UnreadableFile("--pools-only needs a pool for every row (column 'pool')")
            pools = _column(database, "SELECT DISTINCT pool FROM platform")
            _copy(database, read_bets(pools, None))
            # The file's bets the wallet holds in another pool (an owner mismatch to report,
            # not a bet missing in the wallet).
            outside = _column(
                database,
                "SELECT uid FROM platform p WHERE NOT EXISTS "
                "(SELECT 1 FROM wallet w WHERE w.uid = p.uid)",
            )
            if outside:
                _copy(database, read_bets(None, outside))
        else:
            _copy(database, read_bets(None, None))
        database.conn.commit()
        database.conn.executescript(_COMPARED)
        found = database.execute(_COUNTS_QUERY).fetchone()
        missing_on_platform = database.execute(_MISSING_ON_PLATFORM).fetchone()[0]
        total, missing, matched, state, amount, payout, owner, differing = found
        counts = {
            "matched": matched,
            "missing_in_wallet": missing,
            "missing_on_platform": missing_on_platform,
            "state_mismatch": state,
            "amount_mismatch": amount,
            "payout_mismatch": payout,
            "owner_mismatch": owner,
        }
        wallet_bets = database.table("wallet").count
    except BaseException:
        database.close()
        scratch.cleanup()
        raise
    return Reconciliation(
        database,
        currencies,
        file_format,
        total if platform_rows is None else platform_rows,
        wallet_bets,
        counts,
        differing + missing_on_platform,
        pools_only,
        scratch,
    )


def _check_unique(database: Database) -> None:
    twice = _column(
        database, "SELECT uid FROM platform GROUP BY uid HAVING count(*) > 1 ORDER BY uid LIMIT 5"
    )
    if twice:
        named = ", ".join(str(uid) for uid in twice)
        raise UnreadableFile(f"bet uid(s) listed more than once in the file: {named}")
    database.execute("CREATE UNIQUE INDEX platform_uid ON platform (uid)")


def _column(database: Database, query: str) -> list[Any]:
    return [row[0] for row in database.execute(query)]


def _copy(database: Database, batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """The ledger's bets into the scratch database, amounts as canonical integer text (the
    ledger's own values are integers, Postgres' ``Decimal`` converted by the store)."""
    insert = "INSERT OR IGNORE INTO wallet VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    for batch in batches:
        try:
            database.conn.executemany(insert, [_wallet_row(*bet) for bet in batch])
        except sqlite3.Error as error:  # pragma: no cover - the scratch disk is full
            raise LedgerError(
                f"the scratch database failed: {error}", key="reconcile.scratch"
            ) from error


def _wallet_row(
    uid: int,
    user: str,
    pool: int,
    currency: str,
    amount: int,
    rake: int,
    state: str,
    payout: int | None,
    payout_currency: str | None,
) -> tuple[Any, ...]:
    return (
        uid,
        user,
        pool,
        currency,
        str(amount),
        str(rake),
        state,
        None if payout is None else str(payout),
        payout_currency,
    )
