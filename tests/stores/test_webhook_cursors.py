"""The webhooks' table (ledger.stores.webhooks): one lease holder at a time, a cursor that only
the holder moves and only forward from where it stood, on every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import ledger
from ledger.stores.webhooks import WebhookTables

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def test_a_new_endpoint_starts_at_cursor_zero_and_ensure_keeps_an_existing_cursor(
    book: ledger.Ledger,
) -> None:
    tables = WebhookTables(book.store)
    tables.ensure(["crm", "bonus"])
    assert tables.claim("crm", "a", T0, T0 + LEASE) is not None
    assert tables.advance("crm", "a", 0, 7, T0, delivered=True)
    tables.ensure(["crm", "bonus", "audit"])
    rows = {row.endpoint: row for row in tables.rows()}
    assert {name: row.position for name, row in rows.items()} == {"audit": 0, "bonus": 0, "crm": 7}
    assert rows["crm"].last_success_at == T0


def test_only_one_holder_has_the_lease_until_it_lapses_or_is_released(
    book: ledger.Ledger,
) -> None:
    tables = WebhookTables(book.store)
    tables.ensure(["crm"])
    assert tables.claim("crm", "a", T0, T0 + LEASE) is not None
    assert tables.claim("crm", "b", T0 + timedelta(seconds=29), T0 + 2 * LEASE) is None
    renewed = tables.claim("crm", "a", T0 + timedelta(seconds=20), T0 + 2 * LEASE)
    assert renewed is not None
    assert renewed.lease_until == T0 + 2 * LEASE
    # Lapsed: another sender takes over.
    taken = tables.claim("crm", "b", T0 + 2 * LEASE + timedelta(seconds=1), T0 + 3 * LEASE)
    assert taken is not None
    assert taken.holder == "b"
    tables.release(["crm"], "b")
    assert tables.claim("crm", "a", T0 + 2 * LEASE, T0 + 3 * LEASE) is not None


def test_the_cursor_moves_only_for_the_holder_and_only_from_where_it_stands(
    book: ledger.Ledger,
) -> None:
    tables = WebhookTables(book.store)
    tables.ensure(["crm"])
    tables.claim("crm", "a", T0, T0 + LEASE)
    assert not tables.advance("crm", "b", 0, 5, T0, delivered=True)  # not the holder
    assert tables.advance("crm", "a", 0, 5, T0, delivered=False)
    assert not tables.advance("crm", "a", 0, 9, T0, delivered=True)  # stale start
    (row,) = tables.rows()
    assert row.position == 5
    assert row.last_success_at is None  # passing over unwanted events is no delivery


def test_a_failed_post_counts_attempts_until_the_next_success(book: ledger.Ledger) -> None:
    tables = WebhookTables(book.store)
    tables.ensure(["crm"])
    tables.claim("crm", "a", T0, T0 + LEASE)
    tables.failed("crm", "a", "HTTP 500: " + "x" * 2000, T0)
    tables.failed("crm", "a", "timed out after 10 s", T0 + timedelta(seconds=2))
    (row,) = tables.rows()
    assert (row.attempts, row.last_error, row.last_error_at) == (
        2,
        "timed out after 10 s",
        T0 + timedelta(seconds=2),
    )
    tables.advance("crm", "a", 0, 3, T0 + timedelta(seconds=5), delivered=True)
    (row,) = tables.rows()
    assert (row.attempts, row.position) == (0, 3)
    assert row.last_error == "timed out after 10 s"  # kept: the last error, and when
