"""``ledger webhooks status``: each configured endpoint's cursor and lag, from any machine that
reaches the database; refused with a clear error without a valid LEDGER_WEBHOOKS."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

import ledger
from ledger.cli import main
from ledger.stores.webhooks import WebhookTables

SECRET = "whsec-" + "0123456789abcdef" * 2
CONFIG = json.dumps(
    {
        "endpoints": [
            {"name": "crm", "url": "https://crm.example/hooks", "secret": SECRET},
            {"name": "bonus", "url": "https://bonus.example/hooks", "secret": SECRET},
        ]
    }
)


def test_status_shows_each_endpoints_cursor_lag_and_sender(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        for n in range(5):
            book.deposit("u1", "EUR", "1.00", reference=f"d{n}")
        tables = WebhookTables(book.store)
        tables.ensure(["crm"])
        now = datetime.now(UTC)
        tables.claim("crm", "host:42:beef", now, now + timedelta(seconds=30))
        tables.advance("crm", "host:42:beef", 0, 3, now, delivered=True)
    runner = CliRunner()
    env = {"LEDGER_WEBHOOKS": CONFIG}
    result = runner.invoke(main, ["webhooks", "status", "--db", store_url, "--json"], env=env)
    assert result.exit_code == 0, result.output
    found = {item["name"]: item for item in json.loads(result.output)["endpoints"]}
    assert (found["crm"]["cursor"], found["crm"]["lag_events"]) == (3, 2)
    assert found["crm"]["holder"] == "host:42:beef"
    assert (found["bonus"]["cursor"], found["bonus"]["lag_events"]) == (0, 5)  # never started
    text = runner.invoke(main, ["webhooks", "status", "--db", store_url], env=env).output
    assert "crm  cursor=3 head=5 lag=2 events" in text
    assert "holder=host:42:beef" in text


def test_status_without_a_valid_configuration_says_what_is_wrong(store_url: str) -> None:
    runner = CliRunner()
    unset = runner.invoke(
        main, ["webhooks", "status", "--db", store_url], env={"LEDGER_WEBHOOKS": None}
    )
    assert unset.exit_code == 1
    assert "config.invalid: LEDGER_WEBHOOKS is not set" in unset.output
    bad = runner.invoke(
        main, ["webhooks", "status", "--db", store_url], env={"LEDGER_WEBHOOKS": "{"}
    )
    assert bad.exit_code == 1
    assert "LEDGER_WEBHOOKS: not JSON" in bad.output


def test_events_prune_keeps_what_an_endpoint_has_not_received_until_it_is_forgotten(
    store_url: str,
) -> None:
    with ledger.open_ledger(store_url) as book:
        book.deposit("u1", "EUR", "1.00", reference="d")
        WebhookTables(book.store).ensure(["crm"])
    runner = CliRunner()
    # --days 1 with a fresh event prunes nothing either way; what the command says is the point.
    kept = runner.invoke(main, ["events", "prune", "--db", store_url, "--days", "1"])
    assert kept.exit_code == 0, kept.output
    assert "webhook endpoint 'crm' has not received them" in kept.output
    assert "ledger webhooks forget crm" in kept.output
    forgot = runner.invoke(main, ["webhooks", "forget", "crm", "--db", store_url])
    assert forgot.exit_code == 0, forgot.output
    again = runner.invoke(main, ["webhooks", "forget", "crm", "--db", store_url])
    assert again.exit_code == 1
    assert "webhook.not_found" in again.output
    quiet = runner.invoke(main, ["events", "prune", "--db", store_url, "--days", "1"])
    assert "webhook endpoint" not in quiet.output
    ignoring = runner.invoke(
        main, ["events", "prune", "--db", store_url, "--days", "1", "--ignore-webhooks"]
    )
    assert ignoring.exit_code == 0, ignoring.output
