"""The Alembic migrations build exactly the schema the code's SQLAlchemy metadata describes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import DBAPIError

import ledger
from ledger.stores import revision
from ledger.stores.migrations import current_revision, head_revision, upgrade
from ledger.stores.postgres import normalize_url
from ledger.stores.schema import POSTGRES_ONLY_TABLES, bets, metadata
from ledger.stores.sqlite import SqliteStore


def test_the_newest_migration_is_known_without_alembic_as_alembic_knows_it() -> None:
    assert revision.head() == head_revision()


def test_migrated_database_matches_the_schema_metadata(store_url: str) -> None:
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": False}
            )
            differences: list[Any] = compare_metadata(context, metadata)
            if engine.dialect.name == "postgresql":
                # Migration 0017: the postings' foreign key is a check at commit there, which
                # notes each INSERT's transactions in a table of its own.
                replaced = [d for d in differences if _replaced_on_postgres(d)]
                assert [d[0] for d in replaced] == ["remove_table", "add_fk"]
                differences = [d for d in differences if d not in replaced]
            assert differences == []
            assert current_revision(connection) == head_revision()
            # The guards the metadata cannot describe are there too.
            names = set(inspect(connection).get_table_names())
            assert {"accounts", "transactions", "postings", "bets", "alembic_version"} <= names
    finally:
        engine.dispose()


def _replaced_on_postgres(difference: Any) -> bool:
    kind, thing = difference[0], difference[1]
    if kind == "remove_table":
        return bool(thing.name in POSTGRES_ONLY_TABLES)
    return bool(kind == "add_fk" and thing.parent.name == "postings")


def test_upgrading_an_up_to_date_database_changes_nothing(store_url: str) -> None:
    with ledger.open_ledger(store_url, migrate=True) as book:
        book.deposit("u1", "EUR", "1.00", "r1")
    with ledger.open_ledger(store_url, migrate=True) as book:
        assert book.balance("u1")[0].available == Decimal("1.00")
        assert book.check().ok


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no schema yet: once on SQLite, once on Postgres."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/old.db"
    return str(request.getfixturevalue("postgres_url"))


def test_upgrade_to_0002_keeps_every_amount_and_repairs_overflowed_balances(
    empty_url: str,
) -> None:
    engine = create_engine(normalize_url(empty_url))
    sqlite = empty_url.startswith("sqlite")
    # The 64-bit schema of 0001, written as the code before 0002 wrote it: 93 deposits of
    # 1e15 EUR, whose running balances SQLite silently turned into REALs (Postgres refused the
    # last one; it gets 92), and one open entry.
    deposits = 93 if sqlite else 92
    try:
        with engine.begin() as connection:
            upgrade(connection, "0001")
            for n in range(1, deposits + 1):
                connection.execute(
                    text(
                        "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                        "(:n, 'house:cash', 'EUR', -100000000000000000), "
                        "(:n, 'user:u1', 'EUR', 100000000000000000)"
                    ),
                    {"n": n},
                )
                connection.execute(
                    text(
                        "INSERT INTO transactions (id, idempotency_key, kind, user_uid, "
                        "reference, created_at) VALUES (:n, :key, 'deposit', 'u1', :ref, "
                        "CURRENT_TIMESTAMP)"
                    ),
                    {"n": n, "key": f"deposit:r{n}", "ref": f"r{n}"},
                )
                for name, kind, delta in (
                    ("house:cash", "house", -(10**17)),
                    ("user:u1", "available", 10**17),
                ):
                    connection.execute(
                        text(
                            "INSERT INTO accounts (name, currency, kind, balance) "
                            "VALUES (:name, 'EUR', :kind, :delta) ON CONFLICT (name, currency) "
                            "DO UPDATE SET balance = accounts.balance + excluded.balance"
                        ),
                        {"name": name, "kind": kind, "delta": delta},
                    )
            if sqlite:
                kinds = connection.execute(text("SELECT typeof(balance) FROM accounts")).all()
                assert {kind for (kind,) in kinds} == {"real"}  # what the old code left
            else:
                connection.execute(text(f"SELECT setval('transaction_ids', {deposits})"))
    finally:
        engine.dispose()
    with ledger.open_ledger(empty_url, migrate=True) as book:
        total = deposits * 10**17
        assert book.balance("u1")[0].available == Decimal(total).scaleb(-2)
        report = book.check()
        assert report.ok, report.problems
        assert report.transactions == deposits
        assert book.withdraw("u1", "EUR", "1.00", reference="after").applied
        assert book.balance("u1")[0].available == Decimal(total - 100).scaleb(-2)
        assert book.check().ok
    if sqlite:
        engine = create_engine(empty_url)
        try:
            with engine.connect() as connection:
                kinds = connection.execute(text("SELECT typeof(balance) FROM accounts")).all()
        finally:
            engine.dispose()
        assert {kind for (kind,) in kinds} == {"text"}  # 9.3e18 is beyond 64 bits: exact text


# A bet row as the older revisions' tests write it by hand (uid, user, tournament, state and
# times added by each test).
BET_ROW: dict[str, Any] = {
    "currency": "EUR",
    "amount": 1000,
    "rake": 100,
    "funding": "cash",
    "payout": None,
    "payout_currency": None,
    "ticket": None,
    "request_uuid": None,
    "secrets": {},
}


def test_upgrade_to_0004_backfills_tournaments_and_users_from_the_bets(empty_url: str) -> None:
    placed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    closed = datetime(2026, 1, 9, tzinfo=UTC)
    engine = create_engine(normalize_url(empty_url))
    row = {**BET_ROW, "closed_at": None}
    try:
        with engine.begin() as connection:
            upgrade(connection, "0002")
            connection.execute(
                bets.insert(),
                [
                    {
                        **row,
                        "uid": 1,
                        "user_uid": "u1",
                        "pool_uid": 7,
                        "state": "placed",
                        "placed_at": placed,
                    },
                    {
                        **row,
                        "uid": 2,
                        "user_uid": "u2",
                        "pool_uid": 7,
                        "state": "refunded",
                        "placed_at": placed + timedelta(days=1),
                        "closed_at": closed,
                    },
                ],
            )
    finally:
        engine.dispose()
    with ledger.open_ledger(empty_url, migrate=True) as book:
        tournament = book.tournament(7)
        assert tournament is not None
        assert (tournament.name, utc(tournament.first_seen)) == (None, placed)
        assert utc(tournament.last_seen) == closed
        assert tournament.entries == {"placed": 1, "refunded": 1}
        assert sorted(user.uid for user in book.users().items) == ["u1", "u2"]
        first = book.user("u1")
        assert first is not None
        assert first.last_seen is not None
        assert utc(first.last_seen) == placed


def utc(moment: datetime) -> datetime:
    """An aware datetime (SQLite hands back naive UTC)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_upgrade_to_0005_backfills_running_balances_and_restores_the_append_only_guard(
    empty_url: str,
) -> None:
    # On SQLite, the store's own engine: the balancing trigger adds with ledger_sum.
    engine = (
        SqliteStore(empty_url, migrate=False).engine
        if empty_url.startswith("sqlite")
        else create_engine(normalize_url(empty_url))
    )
    legs = [(1, 10_000), (2, 25_000), (3, -5_000)]  # two deposits and a withdrawal, in cents
    try:
        with engine.begin() as connection:
            upgrade(connection, "0002")
            for txn, amount in legs:
                connection.execute(
                    text(
                        "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                        "(:n, 'house:cash', 'EUR', :minus), (:n, 'user:u1', 'EUR', :amount)"
                    ),
                    {"n": txn, "amount": amount, "minus": -amount},
                )
                connection.execute(
                    text(
                        "INSERT INTO transactions (id, idempotency_key, kind, user_uid, "
                        "reference, created_at) VALUES (:n, :key, :kind, 'u1', :ref, "
                        "CURRENT_TIMESTAMP)"
                    ),
                    {
                        "n": txn,
                        "key": f"m:{txn}",
                        "kind": "deposit" if amount > 0 else "withdrawal",
                        "ref": f"r{txn}",
                    },
                )
            for name, kind, total in (
                ("house:cash", "house", -30_000),
                ("user:u1", "available", 30_000),
            ):
                connection.execute(
                    text(
                        "INSERT INTO accounts (name, currency, kind, balance) "
                        "VALUES (:name, 'EUR', :kind, :total)"
                    ),
                    {"name": name, "kind": kind, "total": total},
                )
            if not empty_url.startswith("sqlite"):
                connection.execute(text("SELECT setval('transaction_ids', 3)"))
        with engine.begin() as connection:
            upgrade(connection)
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT account, balance_after FROM postings ORDER BY id")
            ).all()
            assert [(account, int(after)) for account, after in rows] == [
                ("house:cash", -10_000),
                ("user:u1", 10_000),
                ("house:cash", -35_000),
                ("user:u1", 35_000),
                ("house:cash", -30_000),
                ("user:u1", 30_000),
            ]
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
            connection.execute(text("UPDATE postings SET balance_after = 0"))
    finally:
        engine.dispose()
    with ledger.open_ledger(empty_url, migrate=True) as book:
        assert book.check().ok
        assert book.statement("u1")[0].balance_after == Decimal("300.00")


def test_postgres_keeps_room_on_every_page_of_the_tables_updated_in_place(
    postgres_url: str,
) -> None:
    """Balances and user rows are updated far more than they grow, and every bet is closed once:
    half of each page stays free for their next versions (migrations 0012, 0014), so that an
    update leaves the indexes alone."""
    ledger.open_ledger(postgres_url, migrate=True).close()
    engine = create_engine(normalize_url(postgres_url))
    try:
        with engine.connect() as connection:
            options: dict[str, list[str] | None] = dict(
                connection.execute(
                    text(
                        "SELECT relname, reloptions FROM pg_class "
                        "WHERE relname IN ('accounts', 'users', 'bets', 'postings')"
                    )
                ).all()
            )
    finally:
        engine.dispose()
    assert options == {
        "accounts": ["fillfactor=50"],
        "users": ["fillfactor=50"],
        "bets": ["fillfactor=50"],
        "postings": None,
    }


def test_no_index_of_the_bets_names_a_column_their_close_changes(store_url: str) -> None:
    """A close changes state, payout, payout_currency and closed_at: with no index naming them
    (not even in a partial index's predicate), a Postgres close is a heap-only update."""
    ledger.open_ledger(store_url, migrate=True).close()
    engine = create_engine(normalize_url(store_url))
    try:
        indexes = inspect(engine).get_indexes("bets")
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                sql = "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'bets'"
            else:
                sql = "SELECT indexdef FROM pg_indexes WHERE tablename = 'bets'"
            definitions = " ".join(row[0] or "" for row in connection.exec_driver_sql(sql))
    finally:
        engine.dispose()
    closing = {"state", "payout", "payout_currency", "closed_at"}
    assert not any(closing & set(index["column_names"]) for index in indexes), indexes
    assert not any(column in definitions for column in closing), definitions


KEYS = {
    ("accounts", "name"),
    ("accounts", "currency"),
    ("postings", "account"),
    ("postings", "currency"),
    ("users", "uid"),
    ("bets", "user_uid"),
    # The responsible-gambling limits' keys (migration 0021): limited users are locked in
    # this order, as Python sorts them.
    ("limited_users", "user_uid"),
    ("limits", "user_uid"),
    ("limits", "currency"),
    ("limit_changes", "user_uid"),
    ("limit_changes", "currency"),
    ("exclusions", "user_uid"),
    ("limit_activity", "user_uid"),
    ("limit_activity", "currency"),
    ("limit_hours", "user_uid"),
    ("limit_hours", "currency"),
}


def test_text_keys_sort_as_python_sorts_them_whatever_the_servers_locale(store_url: str) -> None:
    """Account names, currencies and user uids compare byte by byte (migration 0015 on Postgres,
    SQLite's own rule): SQL's ORDER BY takes accounts in the order the Python writers' sorted()
    locks them, and no comparison goes through the server locale's strcoll."""
    names = ["user:b", "user:B", "user:é", "user:e", "user:Z", "user:10", "user:9", "user:_x"]
    with ledger.open_ledger(store_url, migrate=True) as book:
        for name in names:
            book.deposit(name.removeprefix("user:"), "EUR", "1.00", f"r-{name}")
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as connection:
            ordered = connection.execute(
                text("SELECT name FROM accounts WHERE kind = 'available' ORDER BY name")
            ).scalars()
            assert list(ordered) == sorted(names)
            if engine.dialect.name == "postgresql":
                collations = connection.exec_driver_sql(
                    "SELECT table_name, column_name, collation_name FROM information_schema.columns"
                    " WHERE table_schema = current_schema() AND collation_name = 'C'"
                ).all()
                assert {(table, column) for table, column, _ in collations} == KEYS
    finally:
        engine.dispose()


def test_upgrade_to_0014_lists_the_placed_bets_as_open_holds(empty_url: str) -> None:
    placed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(normalize_url(empty_url))
    row = {**BET_ROW, "user_uid": "u1", "pool_uid": 7}
    try:
        with engine.begin() as connection:
            upgrade(connection, "0013")
            connection.execute(
                bets.insert(),
                [
                    {**row, "uid": 1, "state": "placed", "placed_at": placed, "closed_at": None},
                    {
                        **row,
                        "uid": 2,
                        "state": "refunded",
                        "placed_at": placed,
                        "closed_at": placed + timedelta(days=1),
                    },
                    {
                        **row,
                        "uid": 3,
                        "state": "placed",
                        "placed_at": placed + timedelta(hours=1),
                        "closed_at": None,
                    },
                ],
            )
    finally:
        engine.dispose()
    with ledger.open_ledger(empty_url, migrate=True) as book:
        holds = book.holds().items
        assert [(hold.uid, utc(hold.placed_at)) for hold in holds] == [
            (1, placed),
            (3, placed + timedelta(hours=1)),
        ]


def test_postgres_replicates_the_sequence_of_its_unlogged_table_so_a_promoted_standby_writes(
    postgres_url: str,
) -> None:
    """journal_unsealed's rows are unlogged (migration 0017), its identity sequence is not
    (migration 0020): a promoted Postgres 15 standby rebuilt an unlogged sequence zeroed, and
    every write failed there (tests/topology runs the switchover itself)."""
    ledger.open_ledger(postgres_url, migrate=True).close()
    engine = create_engine(normalize_url(postgres_url))
    try:
        with engine.connect() as connection:
            persistence: dict[str, str] = dict(
                connection.execute(
                    text(
                        "SELECT relname, relpersistence FROM pg_class "
                        "WHERE relname IN ('journal_unsealed', 'journal_unsealed_id_seq')"
                    )
                ).all()
            )
    finally:
        engine.dispose()
    assert persistence == {"journal_unsealed": "u", "journal_unsealed_id_seq": "p"}


def test_ledgers_opened_at_once_in_one_process_each_migrate(tmp_path: Path) -> None:
    """Alembic keeps a running migration in a global: without taking turns, threads migrating
    at once (the server opens its ledger ahead of start-up) failed with KeyError: 'config'."""
    errors: list[BaseException] = []

    def open_one(path: Path) -> None:
        try:
            ledger.open_ledger(f"sqlite:///{path}", migrate=True).close()
        except BaseException as error:
            errors.append(error)

    for round_ in range(3):
        threads = [
            threading.Thread(target=open_one, args=(tmp_path / f"{round_}-{n}.db",))
            for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
