"""``ledger events``: the feed from the command line as text and JSON lines, ``--follow`` until
interrupted, bad input refused with exit 1, and ``ledger events prune``. On SQLite and Postgres
(``--follow`` runs as a real process on SQLite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

import ledger
from ledger.cli import main
from ledger.stores.postgres import normalize_url
from support.httpkit import ledger_command
from support.payloads import entry, place


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"LEDGER_DATABASE_URL": None, **(env or {})})


def test_events_prints_the_feed_as_text_and_as_json_lines(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "100.00", "d1")
        book.place_bets(place(entry(11, amount="12.34", rake="0.66"), entry(12)))

    shown = run("events", "--db", store_url)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert len(lines) == 3
    # The id, the commit time, then what the event says.
    ids, _, said = zip(*(line.split(" ", 2) for line in lines), strict=True)
    assert ids == ("1", "2", "3")
    assert said[0] == "deposit user=u1 amount=100.00 EUR reference=d1"
    assert said[1] == "bet.placed user=u1 pool=7 bet=11 amount=12.34 EUR rake=0.66"

    as_json = run("events", "--db", store_url, "--json", "--after", "1", "--limit", "1")
    assert as_json.exit_code == 0, as_json.output
    [line] = as_json.output.splitlines()
    event = json.loads(line)
    assert (event["id"], event["type"], event["bet"]) == (2, "bet.placed", 11)
    assert (event["amount"], event["rake"], event["currency"]) == ("12.34", "0.66", "EUR")

    more = run("events", "--db", store_url, "--limit", "2")
    assert more.output.splitlines()[-1] == "more: --after 2"

    placed = run("events", "--db", store_url, "--json", "--types", "deposit")
    assert [json.loads(line)["type"] for line in placed.output.splitlines()] == ["deposit"]


def test_bad_input_exits_1_naming_the_problem(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "1.00", "d1")
    refused = run("events", "--db", store_url, "--types", "bet.lost")
    assert refused.exit_code == 1
    assert "error: request.invalid: types" in refused.output
    negative = run("events", "--db", store_url, "--after", "-3")
    assert negative.exit_code == 1
    assert "error: request.invalid: after" in negative.output


def test_prune_deletes_events_past_the_retention(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "1.00", "old")
        book.deposit("u1", "EUR", "1.00", "new")
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.begin() as connection:
            connection.execute(
                text("UPDATE event_commits SET committed_at = :at WHERE first_id = 1"),
                {"at": datetime.now(UTC) - timedelta(days=40)},
            )
    finally:
        engine.dispose()
    kept = run("events", "prune", "--db", store_url)  # 120 days by default
    assert kept.output == "pruned 0 events committed more than 120 days ago\n"
    pruned = run("events", "prune", "--db", store_url, env={"LEDGER_EVENT_RETENTION_DAYS": "30"})
    assert pruned.exit_code == 0, pruned.output
    assert pruned.output == "pruned 1 events committed more than 30 days ago\n"
    left = run("events", "--db", store_url, "--json")
    assert [json.loads(line)["reference"] for line in left.output.splitlines()] == ["new"]


def test_follow_prints_events_as_they_commit_until_interrupted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with ledger.open_ledger(url) as book:
        book.deposit("u1", "EUR", "1.00", "before")
        follower = subprocess.Popen(
            [*ledger_command(), "events", "--db", url, "--follow", "--json"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        # A hung follower is killed, so the readline below fails instead of waiting forever.
        guard = threading.Timer(60, follower.kill)
        guard.start()
        try:
            assert follower.stdout is not None
            first = json.loads(follower.stdout.readline())
            assert first["reference"] == "before"
            book.deposit("u1", "EUR", "2.00", "after")
            second = json.loads(follower.stdout.readline())
            assert (second["id"], second["reference"]) == (2, "after")
        finally:
            follower.send_signal(signal.SIGINT)
            code = follower.wait(30)
            guard.cancel()
    assert code == 0
