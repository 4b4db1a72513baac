"""CPU milliseconds per 1,000 events the webhook sender delivers, by batch size.

    .venv/bin/python benchmarks/webhook_sender.py [EVENTS]

A fresh SQLite ledger gets EVENTS deposits (default 3,000: one event each); a sender then
delivers the whole feed to one endpoint answered 200 in memory (httpx.MockTransport, so the
figure is the sender's own work: reading the feed, JSON, signing, the lease and cursor
transactions), once per batch size. Process CPU time, not wall time: the machine is shared.
Prints a table and writes benchmarks/results/webhook_sender.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

import ledger
from ledger.http.webhooks import WebhookSender
from ledger.stores.webhooks import WebhookTables
from ledger.webhooks import parse_config

BATCHES = (1, 10, 100, 1000)


def deliver(book: ledger.Ledger, batch_size: int, head: int) -> float:
    """CPU ms per 1,000 events to deliver the feed from the start at ``batch_size``."""
    name = f"bench-{batch_size}"
    config = parse_config(
        json.dumps(
            {
                "endpoints": [
                    {
                        "name": name,
                        "url": "http://receiver.invalid/hooks",
                        "secret": "s" * 32,
                        "batch_size": batch_size,
                    }
                ],
                "poll_seconds": 0.01,
            }
        )
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200))

    def position() -> int:
        rows = [row for row in WebhookTables(book.store).rows() if row.endpoint == name]
        return rows[0].position if rows else 0

    async def run() -> None:
        # Each batch size is its own endpoint, so each starts from the first event.
        async with WebhookSender(config, book, transport=transport):
            while position() < head:
                await anyio.sleep(0.05)

    started = time.process_time()
    anyio.run(run)
    return (time.process_time() - started) * 1000 * 1000 / head


def main() -> None:
    events = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000
    with (
        tempfile.TemporaryDirectory() as directory,
        ledger.open_ledger(f"sqlite:///{directory}/bench.db") as book,
    ):
        for n in range(events):
            book.deposit(f"u{n % 50}", "EUR", "1.00", reference=f"d{n}")
        head = book.last_event_id()
        results = {str(size): round(deliver(book, size, head), 1) for size in BATCHES}
    print(f"CPU ms per 1,000 events delivered ({events} events, SQLite, in-memory receiver)")
    print("batch_size  cpu_ms_per_1000_events")
    for size, value in results.items():
        print(f"{size:>10}  {value:>22}")
    out = Path(__file__).parent / "results" / "webhook_sender.json"
    out.write_text(json.dumps({"events": events, "cpu_ms_per_1000_events": results}, indent=2))


if __name__ == "__main__":
    main()
