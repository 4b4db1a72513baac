"""The directory in SQL: the upsert of what payloads said of tournaments and users, and the
operator's reads over them and over bets (lists by keyset, one record with its postings).

Plain functions over an open connection, called by the unit of work (:mod:`.sql`) inside its
transaction, which translates driver errors. Every list is newest first by a key that never
changes once written (``first_seen, uid`` for the directory, ``uid`` for bets), so that a page
boundary stays put while the table is being written (see :mod:`ledger.paging`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, String, and_, cast, exists, func, literal, or_, select, text
from sqlalchemy.sql import ColumnElement, Select

from ..directory import Seen
from .base import BetRecord, PostingRecord, TournamentRecord, UserRecord
from .dialect import Dialect
from .queries.bets import bet_from_row
from .schema import accounts, bets, postings, tournaments, transactions, users

__all__ = [
    "bet_postings",
    "bet_record",
    "bet_records",
    "bet_times",
    "bets_by_time",
    "record_seen",
    "record_staged_users",
    "tournament_names",
    "tournament_record",
    "tournament_records",
    "tournament_statuses",
    "user_record",
    "user_records",
]

TOURNAMENT_COLUMNS = (
    "uid",
    "name",
    "currency",
    "category",
    "game_type",
    "status",
    "estimated_end_time",
    "first_seen",
    "last_seen",
)
USER_COLUMNS = ("uid", "name", "client", "first_seen", "last_seen")


def _keep_latest(
    table: str, columns: Sequence[str], dialect: Dialect, *, moves_last_seen: bool
) -> str:
    # The rule of ledger.directory against what is recorded: a field the payload carries
    # replaces the recorded one, a field it does not carry (NULL) keeps it; first_seen stays.
    kept = ", ".join(f"{name} = COALESCE(excluded.{name}, {table}.{name})" for name in columns)
    # A row that would not change is not rewritten: most Place Bets name a user and a
    # tournament exactly as the last one did, and rewriting their rows on every request was
    # most of the directory's cost. last_seen is therefore kept to the minute: a row seen again
    # within the same minute, unchanged, keeps the first time of that minute.
    differs = _differs([(f"excluded.{name}", f"{table}.{name}") for name in columns], dialect)
    if not moves_last_seen:
        # Users a refund or settle describes (Seen.entered false): their last_seen stays.
        return f"ON CONFLICT (uid) DO UPDATE SET {kept} WHERE {differs}"
    minute = f"{dialect.minute('excluded.last_seen')} <> {dialect.minute(f'{table}.last_seen')}"
    return (
        f"ON CONFLICT (uid) DO UPDATE SET {kept}, last_seen = excluded.last_seen "
        f"WHERE {minute} OR {differs}"
    )


def _differs(pairs: Sequence[tuple[str, str]], dialect: Dialect) -> str:
    """Whether any ``(new, recorded)`` pair of expressions says something new: a value carried
    (not NULL) that differs from the recorded one."""
    return " OR ".join(
        f"{new} IS NOT NULL AND {new} {dialect.distinct_from} {old}" for new, old in pairs
    )


_UPSERTS: dict[type[Dialect], tuple[str, str, str]] = {}


def _upserts(dialect: Dialect) -> tuple[str, str, str]:
    """The tournament upsert, the upsert of users who entered and that of users described, in
    ``dialect``'s SQL, built once per database kind."""
    built = _UPSERTS.get(type(dialect))
    if built is None:
        built = _UPSERTS[type(dialect)] = (
            _keep_latest("tournaments", TOURNAMENT_COLUMNS[1:7], dialect, moves_last_seen=True),
            _keep_latest("users", USER_COLUMNS[1:3], dialect, moves_last_seen=True),
            _keep_latest("users", USER_COLUMNS[1:3], dialect, moves_last_seen=False),
        )
    return built


def record_seen(connection: Connection, dialect: Dialect, seen: Seen, now: datetime) -> None:
    """Upsert the tournaments and users of ``seen`` (one uid each, sorted): one statement each."""
    at = dialect.timestamp(now)
    tournament_upsert, entered, described = _upserts(dialect)
    if seen.tournaments:
        rows = [
            (
                t.uid,
                t.name,
                t.currency,
                t.category,
                t.game_type,
                t.status,
                None if t.estimated_end is None else dialect.timestamp(t.estimated_end),
                at,
                at,
            )
            for t in seen.tournaments
        ]
        dialect.insert_rows(
            connection, tournaments, TOURNAMENT_COLUMNS, rows, upsert=tournament_upsert
        )
    if seen.users:
        people = [(u.uid, u.name, u.client, at, at) for u in seen.users]
        upsert = entered if seen.entered else described
        dialect.insert_rows(connection, users, USER_COLUMNS, people, upsert=upsert)


def record_staged_users(
    connection: Connection, dialect: Dialect, staged: str, now: datetime, *, distinct: bool
) -> None:
    """Upsert the users of the staged items of a huge close (``staged``: its table, with
    ``pos, user_uid, user_name, user_client``) in one statement: per user the description of
    its last item (:func:`ledger.directory.described`), in uid order, by the rule of
    :func:`record_seen` for users a close describes. ``distinct``: no two items name the same
    user, so each item is its user's last: no grouping of the items (a million distinct users
    on SQLite, three alternated rounds of benchmarks/settle_split.py's step: 2.9-4.4 -> 2.0-3.1
    s).

    Only the users it would change reach the upsert (new ones, or a name or client that
    differs): on Postgres an upsert locks every row it meets, changed or not, and a million
    users described as they were recorded would each have their row written for that lock."""
    _, _, described = _upserts(dialect)
    named = USER_COLUMNS[1:3]  # what a payload says of a user: name, client
    columns = tuple(f"user_{name}" for name in named)  # their staged columns
    latest = (
        f"SELECT user_uid, {', '.join(columns)} FROM {staged}"  # noqa: S608 - code's names
        if distinct
        else dialect.latest_per(staged, "user_uid", columns, "pos")
    )
    changes = _differs([(f"u.user_{name}", f"k.{name}") for name in named], dialect)
    connection.execute(
        text(
            f"INSERT INTO users ({', '.join(USER_COLUMNS)}) "  # noqa: S608 - code's names
            f"SELECT u.user_uid, {', '.join(f'u.{c}' for c in columns)}, :at, :at "
            f"FROM ({latest}) AS u "
            # A WHERE after the join: SQLite's parser would otherwise read ON CONFLICT as its ON.
            f"LEFT JOIN users AS k ON k.uid = u.user_uid WHERE k.uid IS NULL OR {changes} "
            f"ORDER BY u.user_uid {described}"
        ),
        {"at": dialect.timestamp(now)},
    )


# --- reads --------------------------------------------------------------------------------------


def _like(text: str) -> str:
    """A case-insensitive substring pattern for ``text``, its wildcards taken literally."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _contains(column: ColumnElement[Any], text: str) -> ColumnElement[bool]:
    return func.lower(column).like(_like(text), escape="\\")


def _newest_first(query: Select[Any], table: Any, before: tuple[datetime, Any] | None) -> Any:
    if before is not None:
        seen, uid = before
        query = query.where(
            or_(
                table.c.first_seen < seen,
                and_(table.c.first_seen == seen, table.c.uid < uid),
            )
        )
    return query.order_by(table.c.first_seen.desc(), table.c.uid.desc())


def _entries(connection: Connection, pool_uids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Entries per state of each tournament, counted from the bets (no counter row to update)."""
    found: dict[int, dict[str, int]] = defaultdict(dict)
    if not pool_uids:
        return found
    query = (
        select(bets.c.pool_uid, bets.c.state, func.count())
        .where(bets.c.pool_uid.in_(list(pool_uids)))
        .group_by(bets.c.pool_uid, bets.c.state)
    )
    for pool_uid, state, count in connection.execute(query):
        found[pool_uid][state] = int(count)
    return found


def _tournament(row: Any, entries: dict[str, int]) -> TournamentRecord:
    return TournamentRecord(
        uid=row.uid,
        name=row.name,
        currency=row.currency,
        category=row.category,
        game_type=row.game_type,
        status=row.status,
        estimated_end_time=row.estimated_end_time,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        entries=dict(sorted(entries.items())),
    )


def tournament_records(
    connection: Connection,
    status: str | None,
    search: str | None,
    limit: int,
    before: tuple[datetime, int] | None,
) -> list[TournamentRecord]:
    """Up to ``limit`` tournaments, newest first, after the keyset position ``before``.

    ``search`` is a case-insensitive substring of the name, or of the uid's digits.
    """
    query = select(tournaments)
    if status is not None:
        query = query.where(tournaments.c.status == status)
    if search:
        query = query.where(
            or_(
                _contains(tournaments.c.name, search),
                _contains(cast(tournaments.c.uid, String), search),
            )
        )
    rows = connection.execute(_newest_first(query, tournaments, before).limit(limit)).all()
    entries = _entries(connection, [row.uid for row in rows])
    return [_tournament(row, entries.get(row.uid, {})) for row in rows]


def tournament_record(connection: Connection, uid: int) -> TournamentRecord | None:
    """The tournament, or ``None`` when no payload and no bet named it."""
    row = connection.execute(select(tournaments).where(tournaments.c.uid == uid)).first()
    if row is None:
        return None
    return _tournament(row, _entries(connection, [uid]).get(uid, {}))


def tournament_names(connection: Connection, uids: Sequence[int]) -> dict[int, str]:
    """The names of those of ``uids`` the platform named (a page's worth: one ``IN``)."""
    if not uids:
        return {}
    query = select(tournaments.c.uid, tournaments.c.name).where(
        tournaments.c.uid.in_(sorted(set(uids))), tournaments.c.name.is_not(None)
    )
    return {int(uid): str(name) for uid, name in connection.execute(query)}


def tournament_statuses(connection: Connection) -> list[str]:
    """Every status the payloads gave a tournament, sorted."""
    query = (
        select(tournaments.c.status)
        .where(tournaments.c.status.is_not(None))
        .distinct()
        .order_by(tournaments.c.status)
    )
    return [str(status) for status in connection.scalars(query)]


def _user(row: Any) -> UserRecord:
    return UserRecord(
        uid=row.uid,
        name=row.name,
        client=row.client,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
    )


def user_records(
    connection: Connection, search: str | None, limit: int, before: tuple[datetime, str] | None
) -> list[UserRecord]:
    """Up to ``limit`` users, newest first; ``search``: a case-insensitive substring of the uid
    or the name."""
    query = select(users)
    if search:
        query = query.where(or_(_contains(users.c.uid, search), _contains(users.c.name, search)))
    rows = connection.execute(_newest_first(query, users, before).limit(limit))
    return [_user(row) for row in rows]


def user_record(connection: Connection, uid: str) -> UserRecord | None:
    """The user as payloads described it; a user only the operator's deposits created (an
    account, no payload yet) is known too, with nothing described; else ``None``."""
    row = connection.execute(select(users).where(users.c.uid == uid)).first()
    if row is not None:
        return _user(row)
    has_account = connection.execute(
        select(literal(1)).where(
            exists().where(accounts.c.name.in_([f"user:{uid}", f"user:{uid}:held"]))
        )
    ).first()
    if has_account is None:
        return None
    return UserRecord(uid=uid, name=None, client=None, first_seen=None, last_seen=None)


_BET_ROW = (
    bets.c.uid,
    bets.c.user_uid,
    bets.c.pool_uid,
    bets.c.currency,
    bets.c.amount,
    bets.c.rake,
    bets.c.funding,
    bets.c.state,
    bets.c.payout,
    bets.c.payout_currency,
    bets.c.ticket,
    bets.c.request_uuid,
    bets.c.secrets,
    bets.c.placed_at,
    bets.c.closed_at,
    users.c.name.label("user_name"),
    tournaments.c.name.label("pool_name"),
)


def _bets_with_names() -> Select[Any]:
    return (
        select(*_BET_ROW)
        .select_from(bets)
        .outerjoin(users, users.c.uid == bets.c.user_uid)
        .outerjoin(tournaments, tournaments.c.uid == bets.c.pool_uid)
    )


def _bet(row: Any) -> BetRecord:
    return BetRecord(
        bet=bet_from_row(tuple(row[:13])),
        placed_at=row.placed_at,
        closed_at=row.closed_at,
        user_name=row.user_name,
        pool_name=row.pool_name,
    )


def _bets_of(user: str | None, pool: int | None, state: str | None) -> Select[Any]:
    """The bets with their names, of ``user``, ``pool`` and ``state`` where given."""
    query = _bets_with_names()
    if user is not None:
        query = query.where(bets.c.user_uid == user)
    if pool is not None:
        query = query.where(bets.c.pool_uid == pool)
    if state is not None:
        query = query.where(bets.c.state == state)
    return query


def bet_records(
    connection: Connection,
    user: str | None,
    pool: int | None,
    state: str | None,
    limit: int,
    before: int | None,
) -> list[BetRecord]:
    """Up to ``limit`` bets, by uid descending, below ``before``, with the names."""
    query = _bets_of(user, pool, state)
    if before is not None:
        query = query.where(bets.c.uid < before)
    rows = connection.execute(query.order_by(bets.c.uid.desc()).limit(limit))
    return [_bet(row) for row in rows]


def bets_by_time(
    connection: Connection,
    user: str | None,
    pool: int | None,
    state: str | None,
    limit: int,
    before: tuple[datetime, int] | None,
) -> list[BetRecord]:
    """Up to ``limit`` bets, the last placed first (``placed_at, uid`` descending, a key that
    never changes once written), after the keyset position ``before``, with the names."""
    query = _bets_of(user, pool, state)
    if before is not None:
        placed, uid = before[0].astimezone(UTC), before[1]
        query = query.where(
            or_(bets.c.placed_at < placed, and_(bets.c.placed_at == placed, bets.c.uid < uid))
        )
    ordered = query.order_by(bets.c.placed_at.desc(), bets.c.uid.desc()).limit(limit)
    return [_bet(row) for row in connection.execute(ordered)]


def bet_record(connection: Connection, uid: int) -> BetRecord | None:
    """The bet with its times and names, or ``None``."""
    row = connection.execute(_bets_with_names().where(bets.c.uid == uid)).first()
    return None if row is None else _bet(row)


def bet_times(connection: Connection, uid: int) -> tuple[datetime, datetime | None] | None:
    """When the bet was placed and closed (``None`` while open), or ``None`` for no such bet."""
    query = select(bets.c.placed_at, bets.c.closed_at).where(bets.c.uid == uid)
    row = connection.execute(query).first()
    return None if row is None else (row.placed_at, row.closed_at)


def bet_postings(connection: Connection, found: BetRecord) -> list[PostingRecord]:
    """The postings tagged with the bet (its legs on the user's accounts), oldest first.

    Read through the user's accounts (the ``postings_account`` index) rather than by ``bet_uid``,
    which has no index: one more index on the hottest table would slow every Place Bet.
    """
    bet = found.bet
    query = (
        select(
            postings.c.id,
            postings.c.account,
            postings.c.currency,
            postings.c.amount,
            transactions.c.id.label("txn_id"),
            transactions.c.kind,
            transactions.c.reference,
            transactions.c.created_at,
        )
        .join(transactions, transactions.c.id == postings.c.txn_id)
        .where(
            postings.c.account.in_([f"user:{bet.user}", f"user:{bet.user}:held"]),
            postings.c.currency.in_(sorted({bet.currency, bet.payout_currency or bet.currency})),
            postings.c.bet_uid == bet.uid,
        )
        .order_by(postings.c.id)
    )
    held = f"user:{bet.user}:held"
    return [
        PostingRecord(
            id=row.id,
            created_at=row.created_at,
            account="held" if row.account == held else "available",
            currency=row.currency,
            amount=row.amount,
            kind=row.kind,
            reference=row.reference,
            transaction_id=row.txn_id,
        )
        for row in connection.execute(query)
    ]
