"""The writes of a set-based close: bet states, postings, balances, running balances, events."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Connection

from ...domain import (
    HOUSE_ENTRIES,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
)
from ...errors import CapacityExceeded, InsufficientFunds
from ...events import BET_REFUNDED, BET_SETTLED
from ..base import ClosingOutcome, Retry
from ..dialect import Dialect
from ..posting import TRANSACTION_COLUMNS
from ..schema import CAPACITY, postings, transactions
from . import statements
from .collecting import LEGS, _deltas
from .staging import Kind


def write(
    connection: Connection,
    dialect: Dialect,
    kind: Kind,
    key: str,
    chunk: int,
    request_id: str | None,
    event_slots: Callable[[int], tuple[int, int]],
    items: int,
    notes: bool,
    one_user_each: bool,
    closing: int,
) -> ClosingOutcome:
    """Write what the staged request of ``items`` items does (after :func:`collect` found
    nothing refused and :func:`within_bounds` agreed): bet states, postings, balances, one event
    per bet closed (ordinals from ``event_slots``); transaction ``key:<n>`` for the items of
    chunk ``n``. ``notes``: some item may have something to note (:func:`may_note`);
    ``one_user_each``: as :func:`within_bounds` was told; ``closing``: how many bets the
    request closes (:attr:`Collected.closing`, the rows of ``close_rows``)."""
    closed_at = dialect.timestamp(datetime.now(UTC))
    # The unit of work's group, which its rows name for the journal's chain (ledger.stores.chain).
    grp, _ = event_slots(0)
    # Bets first, as the domain path does: one closed meanwhile by a concurrent request (READ
    # COMMITTED on Postgres) makes the request run again, and see it.
    payout = "c.payout" if kind == "settle" else "NULL"
    payout_currency = "c.payout_currency" if kind == "settle" else "NULL"
    changed = statements.run(
        connection,
        f"""UPDATE bets SET state = :state, payout = {payout},
                payout_currency = {payout_currency}, closed_at = :closed_at, closed_grp = :grp
            FROM close_rows c WHERE bets.uid = c.uid AND bets.state = 'placed'""",  # noqa: S608
        state="refunded" if kind == "refund" else "settled",
        closed_at=closed_at,
        grp=grp,
    ).rowcount
    if changed != closing:
        raise Retry(f"{closing - changed} bet(s) were closed by a concurrent request")
    statements.run(connection, "DELETE FROM open_bets WHERE uid IN (SELECT uid FROM close_rows)")
    # Which bets this commit closed, for the journal's chain (a table keyed by the commit: an
    # index of bets naming it would make every close on Postgres a full, non-heap-only update).
    statements.run(
        connection,
        "INSERT INTO bet_closes (grp, uid) SELECT :grp, uid FROM close_rows ORDER BY uid",
        grp=grp,
    )
    _append_events(connection, kind, closing, request_id, event_slots, closing == items)
    # The user accounts (close_deltas, from within_bounds), each changed once by the request's
    # total for it, in key order like every other writer's: credits added (the account
    # created when new), debits (the held money released) taken only from accounts that hold
    # them; a zero total changes nothing.
    deltas = _deltas(one_user_each)
    statements.run(
        connection,
        f"""INSERT INTO accounts (name, currency, kind, balance)
            SELECT d.account, d.currency, d.kind, d.delta FROM {deltas} d WHERE d.delta > 0
            ORDER BY d.account, d.currency
            ON CONFLICT (name, currency)
            DO UPDATE SET balance = accounts.balance + excluded.balance""",  # noqa: S608
    )
    debited = statements.run(
        connection,
        f"""UPDATE accounts SET balance = accounts.balance + d.delta
            FROM {deltas} d
            WHERE d.delta < 0 AND accounts.name = d.account
              AND accounts.currency = d.currency""",  # noqa: S608 - fixed SQL, no input
    ).rowcount
    debits, most_legs = statements.run(
        connection,
        f"SELECT sum(CASE WHEN delta < 0 THEN 1 ELSE 0 END), max(legs) FROM {deltas} d",  # noqa: S608
    ).one()
    if debited != (debits or 0):
        # A held account that is missing: never, while holds are what placed them.
        raise InsufficientFunds("a user balance would go below zero")
    house, parts = _house_legs(connection, kind, chunk)
    ids = dialect.allocate_transaction_ids(connection, len(parts)) if parts else []
    house_rows = _house_running_balances(connection, dialect, kind, house, parts)
    created_at = dialect.timestamp(datetime.now(UTC))
    if ids:
        # Every chunk's user legs in one statement, each with its chunk's transaction: one pass
        # over the legs (a statement per chunk scanned all of them again: twenty times at a
        # million items) and one run of the journal's per-statement checks. Each leg's running
        # balance counts up, leg by leg in the request's order, to the balance the update left
        # (read under the lock the update holds), computed as the rows go in: no temporary
        # table of a million postings written and read back: the balance after a leg is the
        # balance after the update less the legs that follow it on its account, one running sum
        # over each account's legs taken from the last (one sort, one window). When no account
        # has more than one leg (one entry per user, the usual tournament), a leg's balance
        # after is its account's: no sort and no window (about 1 s of Postgres's time at a million).
        # Each account's legs keep the order of their running balances; the house legs follow,
        # chunk by chunk.
        txn_of = " ".join(
            f"WHEN {part} THEN {txn_id}" for txn_id, part in zip(ids, parts, strict=True)
        )
        after = (
            "a.balance"
            if most_legs == 1
            else """a.balance + l.amount
                    - sum(l.amount) OVER (PARTITION BY l.account, l.currency
                                          ORDER BY l.pos DESC, l.leg DESC
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"""
        )
        statements.run(
            connection,
            f"""INSERT INTO postings (txn_id, account, currency, amount, bet_uid, balance_after)
                SELECT CASE l.pos / {chunk} {txn_of} END, l.account, l.currency, l.amount,
                       l.bet_uid, {after}
                FROM close_legs l
                JOIN accounts a ON a.name = l.account AND a.currency = l.currency
                ORDER BY l.pos, l.leg""",  # noqa: S608 - integers, no input
        )
    for txn_id, part in zip(ids, parts, strict=True):
        dialect.insert_rows(
            connection,
            postings,
            ("txn_id", "account", "currency", "amount", "bet_uid", "balance_after"),
            [(txn_id, *row) for row in house_rows.get(part, [])],
        )
        dialect.insert_rows(
            connection,
            transactions,
            TRANSACTION_COLUMNS,
            [(txn_id, f"{key}:{part}", kind, None, None, created_at, grp)],
        )
    # Every item closed its bet (the usual case: no re-send, no bet named twice): none left
    # unchanged, and no anti-join of a million staged items with a million closed ones.
    unchanged = (
        []
        if closing == items
        else [
            int(pos)
            for (pos,) in statements.run(
                connection,
                # NOT EXISTS, an anti-join on close_rows' key: Postgres hashes a NOT IN list
                # only while it fits work_mem, and past that (a million items) compares every
                # item with every closed one, for hours: the statement timeout's 503.
                "SELECT s.pos FROM close_stage s WHERE NOT EXISTS "
                "(SELECT 1 FROM close_rows c WHERE c.pos = s.pos) ORDER BY s.pos",
            )
        ]
    )
    noted: list[int] = []
    if notes:
        # The first condition reads the staged item alone, so the database filters the items
        # before the join (a settle claims nothing: usually none are left).
        found = statements.run(
            connection,
            """SELECT s.pos FROM close_stage s JOIN close_rows c ON c.pos = s.pos
               WHERE (s.note = 1 OR s.claimed_amount IS NOT NULL OR s.claimed_rake IS NOT NULL)
                 AND (s.note = 1 OR COALESCE(s.claimed_amount <> c.amount, FALSE)
                      OR COALESCE(s.claimed_rake <> c.rake, FALSE))
               ORDER BY s.pos""",
        )
        noted = [int(pos) for (pos,) in found]
    # The staged items stay for the directory's upsert of their users; the caller discards.
    return ClosingOutcome(unchanged, noted)


def _append_events(
    connection: Connection,
    kind: Kind,
    count: int,
    request_id: str | None,
    event_slots: Callable[[int], tuple[int, int]],
    every: bool,
) -> None:
    """A ``bet.refunded`` or ``bet.settled`` event per bet closed, in the request's order: the
    rows :func:`ledger.events.closed_rows` makes for the domain path. ``every``: each item
    closed its bet (the positions 0 .. count - 1 are all in ``close_rows``)."""
    if not count:
        return
    grp, first = event_slots(count)
    # Each closed bet's place among them: its item's position when every item closed one (no
    # sort of a million rows and no window over them: 0.55 s of Postgres's time, EXPLAIN
    # ANALYZE), else its rank by position.
    ordinal = "pos" if every else "row_number() OVER (ORDER BY pos) - 1"
    order = "" if every else "ORDER BY pos"
    if kind == "settle":
        event, payout, payout_currency = BET_SETTLED, "payout", "payout_currency"
    else:
        event, payout, payout_currency = BET_REFUNDED, "NULL", "NULL"
    statements.run(
        connection,
        f"""INSERT INTO events (grp, ordinal, type, user_uid, pool_uid, bet_uid, currency,
                                amount, rake, payout, payout_currency, reference, request_id)
            SELECT :grp, :first + {ordinal}, :event, user_uid, pool_uid, uid, currency, amount,
                   rake, {payout}, {payout_currency}, NULL, :request_id
            FROM close_rows {order}""",  # noqa: S608 - fixed SQL, no input
        grp=grp,
        first=first,
        event=event,
        request_id=request_id,
    )


# The house legs of each chunk, summed per account and currency as Transaction.journal sums
# them: (house account, currency column, amount expression, which closed bets).
_HOUSE = {
    "refund": [
        (HOUSE_TICKETS, "currency", "amount + rake", "funding = 'ticket' AND amount + rake <> 0"),
    ],
    "settle": [
        (HOUSE_ENTRIES, "currency", "amount", "funding <> 'free' AND amount + rake <> 0"),
        (HOUSE_RAKE, "currency", "rake", "funding <> 'free' AND amount + rake <> 0"),
        (HOUSE_PRIZES, "payout_currency", "-payout", "payout <> 0"),
    ],
}


def _house_legs(
    connection: Connection, kind: Kind, chunk: int
) -> tuple[dict[int, list[tuple[str, str, int]]], list[int]]:
    """Per chunk, the house legs ``(account, currency, amount)``, sorted, zero sums left out;
    and the chunks with a user leg (each a transaction), in order."""
    legs = _HOUSE[kind]
    # Every leg's sum in one pass over the closed bets, grouped by chunk and by each currency
    # column a leg reads (a pass per leg read them all again: 0.2 s each at a million). Summed
    # in SQL within the bound (within_bounds): no sum of the request's amounts leaves 64 bits.
    # A house total over the request may: that one is Python's.
    columns = sorted({currency for _, currency, _, _ in legs})
    totals = ", ".join(f"sum(CASE WHEN {when} THEN {amount} END)" for _, _, amount, when in legs)
    # Whether a closed bet has a user leg: the conditions close_legs was filled by (a pass of
    # its own over the legs, SELECT DISTINCT, cost 0.17 s of the server's time at a million).
    with_legs = " OR ".join(f"({when})" for *_, when in LEGS[kind])
    rows = statements.run(
        connection,
        f"SELECT pos / {chunk}, {', '.join(columns)}, {totals}, "  # noqa: S608 - no input
        f"max(CASE WHEN {with_legs} THEN 1 ELSE 0 END) FROM close_rows "
        f"GROUP BY pos / {chunk}, {', '.join(columns)}",
    )
    found: dict[int, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    parts: set[int] = set()
    for row in rows:
        part = int(row[0])
        codes = dict(zip(columns, row[1 : 1 + len(columns)], strict=True))
        sums = row[1 + len(columns) : -1]
        for (account, currency, _, _), value in zip(legs, sums, strict=True):
            if value is not None:
                found[part][(account, codes[currency])] += int(value)
        if row[-1]:
            parts.add(part)
    house = {
        part: [(name, code, value) for (name, code), value in sorted(sums.items()) if value]
        for part, sums in found.items()
    }
    return house, sorted(parts)


def _house_running_balances(
    connection: Connection,
    dialect: Dialect,
    kind: Kind,
    house: dict[int, list[tuple[str, str, int]]],
    parts: list[int],
) -> dict[int, list[tuple[str, str, int, None, int]]]:
    """Apply the house legs to the house balances; per chunk, each leg with its running balance
    ``(account, currency, amount, None, balance_after)``."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for part in parts:
        for name, code, value in house.get(part, []):
            if not -CAPACITY <= value <= CAPACITY:
                # The message of SqlUnitOfWork.post's own refusal: the domain path's.
                raise CapacityExceeded(
                    f"{kind}: a {code} leg on {name} would exceed the {len(str(CAPACITY))} "
                    "digits a store holds"
                )
            totals[(name, code)] += value
    after = dialect.upsert_balances(
        connection,
        [(name, code, "house", delta) for (name, code), delta in sorted(totals.items()) if delta],
    )
    # Legs that cancel out over the request leave their account as it was.
    still = sorted(key for key in totals if key not in after)
    if still:
        current = dialect.lock_balances(connection, still)
        after.update({key: current.get(key, 0) for key in still})
    running = {key: after.get(key, 0) - delta for key, delta in totals.items()}
    rows: dict[int, list[tuple[str, str, int, None, int]]] = {}
    for part in parts:
        for name, code, value in house.get(part, []):
            balance = running[(name, code)] = running[(name, code)] + value
            rows.setdefault(part, []).append((name, code, value, None, balance))
    return rows
