"""``ledger db copy TARGET``: a SQLite ledger moved whole into an empty Postgres database, as
docs/operations/choosing-a-store.md describes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

import ledger
from ledger.events import event_dict
from support.httpkit import PLACE, REFUND_BET, SETTLE, dumps, headers, ledger_command, server_env
from support.killable import LedgerProcess
from support.operator_calls import OPERATOR_AUTH, deposit
from support.payloads import entry, place, refund, settle
from support.readme import marked_block, run_block

USERS = ["u1", "u2", "u3"]


def cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    return subprocess.run(
        [*ledger_command(), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
        input=stdin,
    )


def a_sqlite_ledger_with_a_day_in_it(tmp_path: Path) -> str:
    """Deposits, Place Bets, a settle and a refund through a real server (so the delivery
    journal, the events and the directory hold rows), a withdrawal, and a console operator."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with (
        LedgerProcess(tmp_path, server_env(url)) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        for user in USERS:
            deposit(http, user, "100.00")
        bets = [entry(10 + number, user=user, pool=7) for number, user in enumerate(USERS)]
        bets.append(entry(20, user="u1", pool=8))
        answer = http.post("/bets", content=dumps(place(*bets)), headers=headers(PLACE))
        assert answer.status_code == 200, answer.text
        paid = settle(7, (10, "25.00", "u1"), (11, "0.00", "u2"), (12, "3.00", "u3"))
        answer = http.post("/winners", content=dumps(paid), headers=headers(SETTLE))
        assert answer.status_code == 200, answer.text
        answer = http.post(
            "/bets/cancel", content=dumps(refund(8, 20)), headers=headers(REFUND_BET)
        )
        assert answer.status_code == 200, answer.text
        body = {"user": "u2", "currency": "EUR", "amount": "5.00", "reference": "out-1"}
        answer = http.post("/admin/withdrawals", json=body, headers=OPERATOR_AUTH)
        assert answer.status_code == 200, answer.text
    added = cli(
        "operators", "add", "alice", "--role", "admin", "--password-stdin", "--db", url,
        cwd=tmp_path, stdin="a long passphrase of the admin\n",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    return url


def books(url: str) -> dict[str, Any]:
    with ledger.open_ledger(url, migrate=False) as book:
        return {
            "balances": {user: [b.to_dict() for b in book.balance(user)] for user in USERS},
            "bets": [(bet.uid, bet.state, bet.payout) for bet in book.bets(limit=100).items],
            "events": [event_dict(event) for event in book.events(0, limit=1000).events],
            "deliveries": len(book.deliveries(limit=100).items),
            "check": book.check().ok,
        }


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_sqlite_ledger_moves_whole_into_postgres_and_takes_new_writes(
    tmp_path: Path, postgres_url: str
) -> None:
    source = a_sqlite_ledger_with_a_day_in_it(tmp_path)
    upgraded = cli("db", "upgrade", "--db", postgres_url, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    copied = cli("db", "copy", postgres_url, "--db", source, cwd=tmp_path)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert copied.stdout.startswith("copied "), copied.stdout
    assert "check: ok: " in copied.stdout, copied.stdout

    before, after = books(source), books(postgres_url)
    assert after == before
    assert before["deliveries"] == 3  # the three callbacks
    assert len(before["events"]) >= 10

    # The copy is a working ledger: new ids follow the copied ones.
    with ledger.open_ledger(postgres_url) as book:
        book.deposit("u4", "EUR", "50.00", reference="after-the-move")
        book.place_bets(place(entry(30, user="u4", pool=9)))
        assert book.check().ok
        assert book.events(0, limit=1000).events[-1].id == before["events"][-1]["id"] + 2
    checked = cli("check", "--db", postgres_url, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The journal's chain came along, and the new commits extend it.
    verified = cli("verify", "--db", postgres_url, cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed = cli("operators", "list", "--db", postgres_url, cwd=tmp_path)
    assert "alice" in listed.stdout, listed.stdout + listed.stderr


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_copy_into_a_database_that_holds_a_ledger_is_refused_whole(
    tmp_path: Path, postgres_url: str
) -> None:
    source = a_sqlite_ledger_with_a_day_in_it(tmp_path)
    assert cli("db", "upgrade", "--db", postgres_url, cwd=tmp_path).returncode == 0
    with ledger.open_ledger(postgres_url) as book:
        book.deposit("someone", "EUR", "1.00", reference="already-here")
    copied = cli("db", "copy", postgres_url, "--db", source, cwd=tmp_path)
    assert copied.returncode == 1
    assert copied.stderr.startswith("error: copy.target_not_empty: "), copied.stderr
    with ledger.open_ledger(postgres_url) as book:
        assert book.balance("u1") == []


def test_the_urls_must_be_of_their_kinds(tmp_path: Path) -> None:
    done = cli("db", "copy", "sqlite:///other.db", "--db", "sqlite:///ledger.db", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: usage: the target must be a Postgres database"), (
        done.stderr
    )


def test_the_move_block_of_the_page_runs_as_written(tmp_path: Path, postgres_url: str) -> None:
    block = marked_block(
        "<!-- tested by tests/e2e/test_store_copy.py: the move -->",
        path="docs/operations/choosing-a-store.md",
    )
    assert cli("deposit", "u1", "EUR", "100.00", "--reference", "r1", cwd=tmp_path).returncode == 0
    script = block.replace("postgresql+psycopg://wallet@db.internal/wallet", postgres_url)
    code, stdout, stderr = run_block(script, tmp_path)
    assert code == 0, stdout + stderr
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines[0] == "schema is up to date", stdout
    assert lines[1].startswith("copied "), stdout
    assert lines[-1] == "ok: 1 transactions, 2 postings, 2 accounts, 0 bets", stdout
