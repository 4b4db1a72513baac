"""What the database holds, read with its plain driver (no ledger code involved), and where the
delivery journal and the books disagree: the reliability tests' view after a fault."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from typing import Any

import psycopg

from support.dedicated_postgres import libpq_dsn
from support.httpkit import (
    PLACE,
    REFUND_BET,
    SETTLE,
    ledger_command,
)


def stored_bets(database_url: str) -> dict[int, tuple[str, int | None]]:
    """``uid -> (state, payout in minor units)`` of every bet, read with a plain driver."""
    rows = plain_query(database_url, "SELECT uid, state, payout FROM bets")
    return {int(uid): (str(state), payout) for uid, state, payout in rows}


def plain_query(database_url: str, sql: str) -> list[Any]:
    """The rows of ``sql``, read with the database's plain driver (no ledger code involved)."""
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as connection:
            return connection.execute(sql).fetchall()
    with psycopg.connect(libpq_dsn(database_url)) as connection:
        return connection.execute(sql.encode()).fetchall()


JOURNAL_200_SQL = (
    "SELECT d.request_id, d.event, b.bet_uid FROM deliveries d "
    "LEFT JOIN delivery_bets b ON b.delivery_id = d.id WHERE d.status = 200"
)


def books_and_journal(
    database_url: str,
) -> tuple[dict[int, tuple[str, int | None]], dict[str, tuple[str, list[int]]]]:
    """:func:`stored_bets`, and ``request id -> (event, bet uids named)`` of every 200 row of the
    delivery journal, read in one read transaction: the two agree on one moment even if
    something still wrote meanwhile."""
    bets_sql = "SELECT uid, state, payout FROM bets"
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute("BEGIN")
            bets = connection.execute(bets_sql).fetchall()
            journal = connection.execute(JOURNAL_200_SQL).fetchall()
            connection.execute("COMMIT")
    else:
        with psycopg.connect(libpq_dsn(database_url)) as connection:
            connection.execute(b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            bets = connection.execute(bets_sql.encode()).fetchall()
            journal = connection.execute(JOURNAL_200_SQL.encode()).fetchall()
    stored = {int(uid): (str(state), payout) for uid, state, payout in bets}
    return stored, _journal_rows(journal)


def journal_diagnosis(database_url: str, uids: list[int], log: str) -> str:
    """What the database and the server's log say of ``uids``: for a failure's message."""
    if not uids:
        return ""
    listed = ", ".join(str(int(uid)) for uid in uids)
    lines = []
    for sql in (
        "SELECT uid, state, placed_at, closed_at, placed_grp, closed_grp FROM bets "
        f"WHERE uid IN ({listed})",
        "SELECT d.id, d.request_id, d.event, d.status, d.error, d.received_at, b.bet_uid "
        "FROM deliveries d JOIN delivery_bets b ON b.delivery_id = d.id "
        f"WHERE b.bet_uid IN ({listed}) ORDER BY d.id",
    ):
        lines += [repr(row) for row in plain_query(database_url, sql)]
    wanted = [str(int(uid)) for uid in uids]
    lines += [line for line in log.splitlines() if any(uid in line for uid in wanted)][-40:]
    return "\n".join(lines)


def _journal_rows(rows: list[Any]) -> dict[str, tuple[str, list[int]]]:
    found: dict[str, tuple[str, list[int]]] = {}
    for request_id, event, bet_uid in rows:
        _, uids = found.setdefault(str(request_id), (str(event), []))
        if bet_uid is not None:
            uids.append(int(bet_uid))
    return found


# What a 200 row of each event claims of the bets it names.
JOURNAL_CLAIMS = {PLACE: None, REFUND_BET: "refunded", SETTLE: "settled"}


def journal_mismatches(
    stored: dict[int, tuple[str, int | None]],
    journal: dict[str, tuple[str, list[int]]],
    acknowledged_requests: list[str],
) -> list[str]:
    """Where the delivery journal and the books disagree: a delivery answered 200 without its
    200 row, or a 200 row claiming a bet (or a bet's closing) the database does not hold."""
    problems = [
        f"request {request_id} answered 200 has no 200 journal row"
        for request_id in acknowledged_requests
        if request_id not in journal
    ]
    for request_id, (event, uids) in journal.items():
        claim = JOURNAL_CLAIMS.get(event)
        for uid in uids:
            found = stored.get(uid)
            if found is None or (claim is not None and found[0] != claim):
                problems.append(f"journal row {request_id} ({event}) names bet {uid}: db {found}")
    return problems


def ledger_check(database_url: str) -> subprocess.CompletedProcess[str]:
    """``ledger check --db URL``: the journal's invariants, from a separate process."""
    return subprocess.run(
        [*ledger_command(), "check", "--db", database_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")},
    )


def unacknowledged_in(
    stored: dict[int, tuple[str, int | None]], acknowledged: list[tuple[int, str]]
) -> list[str]:
    """The acknowledged deliveries the database does not hold: lost despite their 200."""
    lost = []
    for uid, state in acknowledged:
        found = stored.get(uid)
        if found is None or (state != "placed" and found[0] != state):
            lost.append(f"bet {uid} answered 200 as {state}, database has {found}")
    return lost
