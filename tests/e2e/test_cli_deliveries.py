"""``ledger deliveries``: the journal from the command line, filtered, paged, as JSON and CSV,
bad filters refused with exit 1, and ``ledger deliveries prune``. On SQLite and Postgres."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner, Result

import ledger
from ledger.cli import main
from ledger.deliveries import Delivery, DeliveryRecord
from support.payloads import entry, place

NOW = datetime.now(UTC).replace(microsecond=0)


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env={"LEDGER_DATABASE_URL": None, **(env or {})})


def journalled(url: str, *rows: tuple[str, int, int, timedelta]) -> None:
    """Rows of (request id, status, bet uid, age)."""
    with ledger.open_ledger(url) as book:
        for request_id, status, bet, age in rows:
            record = DeliveryRecord(
                received_at=NOW - age,
                request_id=request_id,
                event="create:fantasy_team",
                path="/bets",
                client="acme",
                subject="platform",
                address="10.1.2.3",
                status=status,
                error=None if status == 200 else "user.insufficient_funds",
                bet_count=1,
                bet_uids=(bet,),
                duration_us=2250,
            )
            book.record_delivery(record).result()


def test_deliveries_lists_filters_and_pages_as_text_and_json(store_url: str) -> None:
    journalled(
        store_url,
        ("a", 200, 1, timedelta(minutes=3)),
        ("b", 402, 2, timedelta(minutes=2)),
        ("c", 200, 1, timedelta(minutes=1)),
    )
    text = run("deliveries", "--db", store_url, "--bet", "1")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert len(lines) == 2
    assert " c " in f" {lines[0]} "
    assert "2.250 ms" in lines[0]

    first = run("deliveries", "--db", store_url, "--limit", "2", "--json")
    page = json.loads(first.output)
    assert [d["request_id"] for d in page["deliveries"]] == ["c", "b"]
    second = run(
        "deliveries", "--db", store_url, "--limit", "2", "--before", page["next"], "--json"
    )
    assert [d["request_id"] for d in json.loads(second.output)["deliveries"]] == ["a"]
    assert json.loads(second.output)["next"] is None

    refused = run("deliveries", "--db", store_url, "--status", "402", "--json")
    [only] = json.loads(refused.output)["deliveries"]
    assert (only["request_id"], only["error"]) == ("b", "user.insufficient_funds")
    found = run("deliveries", "--db", store_url, "--request-id", "a", "--json")
    assert [d["request_id"] for d in json.loads(found.output)["deliveries"]] == ["a"]


def test_deliveries_csv_prints_every_matching_row(store_url: str) -> None:
    journalled(store_url, *((f"r{n}", 200, n, timedelta(seconds=n)) for n in range(5)))
    since = (NOW - timedelta(seconds=3)).isoformat()
    result = run("deliveries", "--db", store_url, "--since", since, "--csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [row["request_id"] for row in rows] == ["r0", "r1", "r2", "r3"]
    assert rows[0]["duration_ms"] == "2.25"


def test_a_bad_filter_exits_1_with_the_projects_error(store_url: str) -> None:
    for args in (["--status", "abc"], ["--since", "soon"], ["--event", "x"], ["--limit", "0"]):
        result = run("deliveries", "--db", store_url, *args)
        assert result.exit_code == 1, args
        assert result.output.startswith("error: request.invalid"), result.output


def test_prune_deletes_rows_past_the_retention_and_says_how_many(store_url: str) -> None:
    journalled(
        store_url,
        ("old", 200, 1, timedelta(days=40)),
        ("older", 200, 2, timedelta(days=200)),
        ("new", 200, 3, timedelta(days=1)),
    )
    by_default = run("deliveries", "prune", "--db", store_url)
    assert by_default.output == "pruned 1 deliveries received more than 120 days ago\n"
    from_env = run(
        "deliveries", "prune", "--db", store_url, env={"LEDGER_DELIVERY_RETENTION_DAYS": "30"}
    )
    assert from_env.output == "pruned 1 deliveries received more than 30 days ago\n"
    left = run("deliveries", "--db", store_url, "--json")
    assert [d["request_id"] for d in json.loads(left.output)["deliveries"]] == ["new"]


def test_ledger_bet_lists_the_deliveries_that_named_the_bet(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "50.00", "d1")
        arrived = Delivery(
            NOW, time.perf_counter(), "rq-77", "create:fantasy_team", "/bets", "acme", "platform"
        )
        book.submit_place_bets(place(entry(77)), delivery=arrived).result()
    text = run("bet", "77", "--db", store_url)
    assert text.exit_code == 0, text.output
    assert f"delivery rq-77 create:fantasy_team 200 at {NOW.isoformat()}" in text.output
    shown = json.loads(run("bet", "77", "--db", store_url, "--json").output)
    assert [(d["request_id"], d["status"]) for d in shown["deliveries"]] == [("rq-77", 200)]
