"""The operator's books from the command line, on both stores: balances at a moment, statements
with running balances (cursor, CSV), open and stale holds, house summaries, and docs/questions.md's
"Answering an operator's questions" block as written."""

from __future__ import annotations

import csv
import io
import json
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import ledger
from ledger.cli import main
from support.payloads import entry, place, settle
from support.readme import marked_block

QUESTIONS = "<!-- tested by tests/e2e/test_cli_books.py: balances, house, holds -->"


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def seeded(url: str) -> datetime:
    """u1 deposits 100.00 and enters tournaments 7 (bet 1, settled for 4.00) and 8 (bet 2, open);
    returns a moment between the deposit and the entries."""
    with ledger.open_ledger(url) as book:
        book.deposit("u1", "EUR", "100.00", reference="seed")
        moment = datetime.now(UTC)
        book.place_bets(place(entry(1, pool=7), entry(2, pool=8)))
        book.settle(settle(7, (1, "4.00")))
    return moment


def test_balance_at_a_moment(store_url: str) -> None:
    moment = seeded(store_url)
    result = run("balance", "u1", "--at", moment.isoformat(), "--json", "--db", store_url)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "user": "u1",
        "at": moment.isoformat(),
        "balances": [{"currency": "EUR", "available": "100.00", "held": "0.00"}],
    }
    text = run("balance", "u1", "--at", moment.isoformat(), "--db", store_url)
    assert text.output.splitlines() == [
        f"u1 at {moment.isoformat()}",
        "EUR  available 100.00  held 0.00",
    ]
    now = run("balance", "u1", "--json", "--db", store_url)
    assert json.loads(now.output)["balances"][0]["available"] == "82.00"


def test_balance_at_a_time_without_a_zone_exits_1(store_url: str) -> None:
    seeded(store_url)
    result = run("balance", "u1", "--at", "2026-11-20T00:00:00", "--db", store_url)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: request.invalid: --at: ")
    assert "has no zone" in result.stderr


def test_statement_shows_running_balances_and_exports_every_page_as_csv(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(store_url)
    page = json.loads(run("statement", "u1", "--json", "--limit", "2", "--db", store_url).output)
    # The settle's two legs: the prize on available, the release of held.
    assert {line["balance_after"] for line in page["lines"]} == {"82.00", "11.00"}
    assert page["next"] is not None
    rest = run("statement", "u1", "--json", "--before", page["next"], "--db", store_url)
    assert len(json.loads(rest.output)["lines"]) == 5
    monkeypatch.setattr("ledger.cli.books.EXPORT_PAGE", 2)  # the export reads several pages
    exported = run("statement", "u1", "--csv", "--db", store_url)
    assert exported.exit_code == 0, exported.output
    rows = list(csv.DictReader(io.StringIO(exported.output)))
    assert len(rows) == 7
    assert rows[-1]["kind"] == "deposit"
    assert rows[-1]["balance_after"] == "100.00"
    assert {row["pool_uid"] for row in rows} == {"", "7", "8"}
    text = run("statement", "u1", "--db", store_url).output
    assert "-> " in text
    assert "pool 8" in text


def test_holds_lists_open_bets_and_the_stale_ones(store_url: str) -> None:
    seeded(store_url)
    listed = run("holds", "--json", "--db", store_url)
    assert listed.exit_code == 0, listed.output
    holds = json.loads(listed.output)
    assert [(hold["uid"], hold["stale"]) for hold in holds["holds"]] == [(2, False)]
    assert holds["next"] is None
    assert run("holds", "--stale", "--db", store_url).output == "no stale holds\n"
    strict = {"LEDGER_STALE_HOLD_DAYS": "0.000000000001"}
    stale = run("holds", "--stale", "--db", store_url, env=strict)
    assert stale.exit_code == 0, stale.output
    assert "bet 2  user u1  pool 8" in stale.output
    assert stale.output.rstrip().endswith("STALE")
    exported = run("holds", "--csv", "--user", "u1", "--pool", "8", "--db", store_url)
    assert [row["uid"] for row in csv.DictReader(io.StringIO(exported.output))] == ["2"]


def test_holds_with_a_malformed_setting_exits_1(store_url: str) -> None:
    result = run("holds", "--db", store_url, env={"LEDGER_STALE_HOLD_GRACE": "soon"})
    assert result.exit_code == 1
    assert "LEDGER_STALE_HOLD_GRACE" in result.stderr


def test_house_summarises_a_period(store_url: str) -> None:
    moment = seeded(store_url)
    result = run("house", "--since", moment.isoformat(), "--json", "--db", store_url)
    assert result.exit_code == 0, result.output
    (eur,) = json.loads(result.output)["currencies"]
    assert eur["deposits"] == "0.00"  # the deposit came before the period
    assert (eur["rake_earned"], eur["prizes_paid"], eur["entries"]) == ("1.00", "4.00", 2)
    text = run("house", "--currency", "EUR", "--db", store_url).output.splitlines()
    assert text[0] == "house from the beginning until now"
    assert "  deposits         100.00" in text
    assert "  house:rake       1.00" in text


# --- docs/questions.md's block, as written ------------------------------------------------------


def test_the_readme_operator_questions_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the page relies on the default database, ./ledger.db
    seeded("sqlite:///ledger.db")
    block = marked_block(QUESTIONS, path="docs/questions.md")
    commands = [line for line in block.splitlines() if line.startswith(".venv/bin/ledger ")]
    assert len(commands) == 6
    for line in commands:
        args = shlex.split(line.partition("#")[0])[1:]
        result = CliRunner().invoke(main, args, env={"LEDGER_DATABASE_URL": None})
        assert result.exit_code == 0, (line, result.output)
        assert result.output, line
