"""Postgres URLs in every form an operator writes, and the settings a connection pooler needs.

- libpq's host list (``postgresql://user@h1:5432,h2:5432/db``) and SQLAlchemy's multi-host form
  (``?host=h1:5432&host=h2:5432``) open the same ledger, from the library and from the CLI;
- a primary URL naming several hosts connects only to the one that accepts writes
  (``target_session_attrs=read-write`` unless the URL says otherwise); a replica URL does not;
- ``prepare_threshold=none`` (pgbouncer in transaction mode) leaves no server-side prepared
  statement behind, where psycopg's default prepares the statements it repeats.
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

import ledger
from ledger.settings import Settings, SettingsError
from ledger.stores.postgres import (
    PostgresStore,
    connection_url,
    normalize_url,
    parse_prepare_threshold,
)
from support import payloads as P
from support.httpkit import free_port, ledger_command

D = Decimal

# A port on which nothing listens: the "dead primary" at the head of a host list.
DEAD = f"127.0.0.1:{free_port()}"


def with_dead_host_first(url: str) -> str:
    """``url`` (the session server, on a socket directory) behind a host that refuses."""
    parsed = make_url(url)
    socket_dir = parsed.query["host"]
    assert isinstance(socket_dir, str)
    return parsed.update_query_pairs(
        [("host", DEAD), ("host", socket_dir)], append=False
    ).render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            "postgresql://u:pw@h1:5432,h2:5433/db?sslmode=require",
            "postgresql+psycopg://u:pw@/db?host=h1:5432&host=h2:5433&sslmode=require",
        ),
        ("postgres://u@h1,h2:6432/db", "postgresql+psycopg://u@/db?host=h1&host=h2:6432"),
        (
            "postgresql+psycopg://u@/db?host=h1:5432&host=h2:5432",
            "postgresql+psycopg://u@/db?host=h1:5432&host=h2:5432",
        ),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        (
            "postgresql://u@/db?host=h1,h2&port=5432,5433",
            "postgresql+psycopg://u@/db?host=h1,h2&port=5432,5433",
        ),
    ],
)
def test_libpq_host_lists_become_sqlalchemy_multi_host_urls(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


def test_a_primary_url_with_several_hosts_connects_only_where_writes_are_accepted() -> None:
    primary, _ = connection_url("postgresql://u@h1,h2/db", primary=True)
    replica, _ = connection_url("postgresql://u@h1,h2/db", primary=False)
    single, _ = connection_url("postgresql://u@h1/db", primary=True)
    chosen, _ = connection_url("postgresql://u@h1,h2/db?target_session_attrs=any", primary=True)
    assert primary.query["target_session_attrs"] == "read-write"
    assert "target_session_attrs" not in replica.query
    assert "target_session_attrs" not in single.query
    assert chosen.query["target_session_attrs"] == "any"


def test_the_library_opens_a_multi_host_url_and_skips_a_dead_host(postgres_url: str) -> None:
    with ledger.open_ledger(with_dead_host_first(postgres_url), migrate=True) as book:
        book.deposit("u1", "EUR", "10.00", reference="r1")
        book.place_bets(P.place(P.entry(1, user="u1", amount=D("2.00"), rake=D("0.20"))))
        assert book.balance("u1", "EUR")[0].available == D("7.80")


def test_db_upgrade_and_check_accept_libpq_host_lists(postgres_url: str) -> None:
    parsed = make_url(postgres_url)
    socket_dir = parsed.query["host"]
    assert isinstance(socket_dir, str)
    # libpq's own form: hosts (here a refusing one, then the live socket directory) and ports
    # as comma-separated lists in the query, the shape many managed services hand out.
    dead_port = DEAD.split(":")[1]
    url = (
        f"postgresql://{parsed.username}@/{parsed.database}"
        f"?host=127.0.0.1,{socket_dir}&port={dead_port},{parsed.port or 5432}"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    for command in (["db", "upgrade"], ["check"]):
        done = subprocess.run(
            [*ledger_command(), *command, "--db", url],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    with psycopg.connect(normalize_url(postgres_url).replace("+psycopg", "")) as connection:
        assert connection.execute(b"SELECT count(*) FROM alembic_version").fetchone() == (1,)


@pytest.mark.parametrize(("threshold", "prepares"), [("none", False), ("5", True)])
def test_prepare_threshold_none_leaves_no_server_side_prepared_statement(
    postgres_url: str, threshold: str, prepares: bool
) -> None:
    # "5" is psycopg's default, spelled out so that a run-wide setting cannot change it.
    url = f"{postgres_url}&prepare_threshold={threshold}"
    with ledger.open_ledger(url, migrate=True) as book:
        book.deposit("u1", "EUR", "100.00", reference="seed")
        book.place_bets(P.place(P.entry(1, user="u1", amount=D("1.00"), rake=D("0.10"))))
        store = book.store
        assert isinstance(store, PostgresStore)
        # psycopg prepares a statement on its 5th run in one session and forgets them all at a
        # rollback, so the repeats happen in one transaction, as in a large settle or a batch.
        # (Key lookups such as select_bets are never prepared: the upsert of balances is.)
        with store.engine.connect() as connection, connection.begin():
            for _ in range(8):
                store.dialect.upsert_balances(connection, [("house:cash", "EUR", "house", 0)])
            found = connection.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements")
            assert (found.scalar_one() > 0) is prepares


def test_the_setting_maps_none_to_no_prepared_statements_and_refuses_nonsense() -> None:
    env = {"LEDGER_DATABASE_URL": "postgresql://u@h/db", "LEDGER_PG_PREPARE_THRESHOLD": "none"}
    assert Settings.from_env(env).store_options()["prepare_threshold"] == "none"
    with pytest.raises(SettingsError, match="LEDGER_PG_PREPARE_THRESHOLD"):
        Settings.from_env({**env, "LEDGER_PG_PREPARE_THRESHOLD": "sometimes"})
    with pytest.raises(SettingsError, match="LEDGER_READ_DATABASE_URL"):
        Settings.from_env({**env, "LEDGER_READ_DATABASE_URL": "sqlite:///x.db"})


@pytest.mark.slow
def test_the_store_suite_passes_with_no_server_side_prepared_statements() -> None:
    """pgbouncer in transaction mode: the store suite with every URL at prepare_threshold=none."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-k",
            "postgres",
            "tests/stores",
        ],
        cwd=root,
        env={**os.environ, "LEDGER_TEST_PG_PREPARE_THRESHOLD": "none"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_every_connection_of_the_run_gets_the_run_wide_prepare_threshold(postgres_url: str) -> None:
    """With ``LEDGER_TEST_PG_PREPARE_THRESHOLD`` (conftest) the whole run prepares that way."""
    given = os.environ.get("LEDGER_TEST_PG_PREPARE_THRESHOLD")
    expected = 5 if not given else parse_prepare_threshold(given)
    with ledger.open_ledger(postgres_url, migrate=True) as book:
        store = book.store
        assert isinstance(store, PostgresStore)
        with store.engine.connect() as connection:
            assert connection.connection.dbapi_connection is not None
            assert connection.connection.dbapi_connection.prepare_threshold == expected
