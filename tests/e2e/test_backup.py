"""``ledger db backup DEST``: a checked copy of a live SQLite ledger, and a restore from it."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from support.httpkit import PLACE, dumps, headers, ledger_command, server_env
from support.killable import LedgerProcess
from support.operator_calls import OPERATOR_AUTH, deposit
from support.payloads import entry, place
from support.stored import ledger_check

USERS = [f"u{number}" for number in range(8)]


def backup(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    return subprocess.run(
        [*ledger_command(), "db", "backup", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def bets_in(database: Path) -> int:
    import sqlite3

    with sqlite3.connect(database) as connection:
        (count,) = connection.execute("SELECT count(*) FROM bets").fetchone()
    return int(count)


class PlaceBets:
    """A platform placing one-bet Place Bets for the users, one after another, until stopped."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.placed = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            uid = 1
            while not self.stopping.is_set():
                body = place(entry(uid, user=USERS[uid % len(USERS)], amount="1.00", rake="0.10"))
                answer = http.post("/bets", content=dumps(body), headers=headers(PLACE))
                assert answer.status_code == 200, answer.text
                self.placed += 1
                uid += 1

    def __enter__(self) -> PlaceBets:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=60)


def funded_server(tmp_path: Path) -> LedgerProcess:
    server = LedgerProcess(tmp_path, server_env(f"sqlite:///{tmp_path / 'ledger.db'}"))
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for user in USERS:
            deposit(http, user, "1000000.00")
    return server


def balances(url: str) -> dict[str, object]:
    with httpx.Client(base_url=url, timeout=30) as http:
        return {
            user: http.get(f"/admin/users/{user}/balances", headers=OPERATOR_AUTH).json()
            for user in USERS
        }


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_backup_taken_while_place_bets_are_written_passes_ledger_check(tmp_path: Path) -> None:
    server = funded_server(tmp_path)
    try:
        with PlaceBets(server.url) as platform:
            while platform.placed < 200:
                threading.Event().wait(0.05)
            before = platform.placed
            done = backup("copy.db", "--db", f"sqlite:///{tmp_path / 'ledger.db'}", cwd=tmp_path)
            while platform.placed < before + 200:  # the server kept answering after the copy
                threading.Event().wait(0.05)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"copied {tmp_path / 'ledger.db'} to copy.db ("), done.stdout
    assert "check: ok: " in done.stdout, done.stdout
    copied = bets_in(tmp_path / "copy.db")
    assert before <= copied < bets_in(tmp_path / "ledger.db")
    checked = ledger_check(f"sqlite:///{tmp_path / 'copy.db'}")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Nothing of the scratch file is left beside the copy.
    assert not [path.name for path in tmp_path.iterdir() if ".partial" in path.name]


def test_a_backup_never_overwrites_a_file(tmp_path: Path) -> None:
    subprocess.run(
        [*ledger_command(), "deposit", "u1", "EUR", "5.00", "--reference", "r1"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    (tmp_path / "copy.db").write_text("yesterday's backup")
    done = backup("copy.db", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: backup.exists: 'copy.db' exists"), done.stderr
    assert (tmp_path / "copy.db").read_text() == "yesterday's backup"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "copy.db",
        "ledger.db",
        "ledger.db-writer",
    ]


def test_a_postgres_url_is_refused_with_the_way_to_back_it_up(tmp_path: Path) -> None:
    done = backup("copy.db", "--db", "postgresql://wallet@127.0.0.1:1/wallet", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: backup.unsupported_store: "), done.stderr
    assert "pg_dump" in done.stderr
    assert "pg_basebackup" in done.stderr
    assert not (tmp_path / "copy.db").exists()


def test_a_missing_database_is_not_copied(tmp_path: Path) -> None:
    done = backup("copy.db", "--db", "sqlite:///nowhere.db", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: store.not_found: "), done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_restore_rehearsal_backup_stop_restore_in_place_serve_balances_identical(
    tmp_path: Path,
) -> None:
    server = funded_server(tmp_path)
    database = tmp_path / "ledger.db"
    try:
        with PlaceBets(server.url) as platform:
            while platform.placed < 100:
                threading.Event().wait(0.05)
        at_backup = balances(server.url)
        done = backup("copy.db", "--db", f"sqlite:///{database}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        # Work after the backup: what a restore from it loses.
        with httpx.Client(base_url=server.url, timeout=30) as http:
            late = place(entry(10**9, user="u1", amount="7.00", rake="0.70"))
            answer = http.post("/bets", content=dumps(late), headers=headers(PLACE))
            assert answer.status_code == 200, answer.text
        assert balances(server.url) != at_backup
    finally:
        server.stop()
    # Restore in place, as docs/operations/backup-and-restore.md says: the server stopped, the
    # database's log and shared-memory files removed with it, the copy put in its place.
    for side in ("ledger.db-wal", "ledger.db-shm"):
        (tmp_path / side).unlink(missing_ok=True)
    os.replace(tmp_path / "copy.db", database)
    checked = ledger_check(f"sqlite:///{database}")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    server.start()
    try:
        assert balances(server.url) == at_backup
    finally:
        server.stop()
