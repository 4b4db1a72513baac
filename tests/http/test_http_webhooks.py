"""The server's webhooks: started with the app when LEDGER_WEBHOOKS is set, posting the
ledger's own feed (a deposit, a Place Bet, a settle) as the feed publishes it, with its status
on GET /admin/webhooks and its metrics on GET /metrics. On every store."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from ledger.events import event_dict
from ledger.http.app import create_app
from ledger.webhooks import parse_config
from support import payloads as P
from support.httpkit import OPERATOR_HEADERS, Wallet, settings_for
from support.receiver import Receiver

SECRET = "whsec-" + "0123456789abcdef" * 2


def test_the_server_posts_its_feed_and_reports_where_each_endpoint_stands(
    tmp_path: Path, store_url: str
) -> None:
    with Receiver(SECRET) as receiver:
        config = parse_config(
            json.dumps(
                {
                    "endpoints": [
                        {
                            "name": "crm",
                            "url": f"{receiver.base}/crm",
                            "secret": SECRET,
                            "timeout": 1,
                        },
                        {
                            "name": "payments",
                            "url": f"{receiver.base}/payments",
                            "secret": SECRET,
                            "events": ["deposit", "withdrawal"],
                            "timeout": 1,
                        },
                    ],
                    "poll_seconds": 0.05,
                    "lease_seconds": 5,
                }
            )
        )
        settings = replace(settings_for(tmp_path), database_url=store_url, webhooks=config)
        with TestClient(create_app(settings), raise_server_exceptions=False) as client:
            wallet = Wallet(client)
            wallet.deposit("u1", "100.00")
            assert wallet.place(P.place(P.entry(1))).status_code == 200
            assert wallet.settle(P.settle(7, (1, "25.00"))).status_code == 200
            receiver.wait_for({1, 2, 3})
            deadline = time.monotonic() + 20
            while True:
                answer = client.get("/admin/webhooks", headers=OPERATOR_HEADERS)
                found = {item["name"]: item for item in answer.json()["endpoints"]}
                metrics = client.get("/metrics").text
                # The gauge is set by the sender's coroutine just after its cursor commits, so
                # a reader can see the cursor a moment before the gauge: wait for both.
                caught_up = all(
                    f'ledger_webhook_lag_events{{endpoint="{name}"}} 0.0' in metrics
                    for name in ("crm", "payments")
                )
                if found["crm"]["cursor"] == 3 and found["payments"]["cursor"] == 3 and caught_up:
                    break
                assert time.monotonic() < deadline, (found, metrics)
                time.sleep(0.05)
            refused = client.get("/admin/webhooks")
    posted: dict[str, list[dict[str, Any]]] = {"crm": [], "payments": []}
    for item in receiver.delivered():
        posted[item.path.lstrip("/")].extend(item.events)
    assert [event["type"] for event in posted["crm"]] == ["deposit", "bet.placed", "bet.settled"]
    assert [event["id"] for event in posted["payments"]] == [1]
    settled = posted["crm"][2]
    assert (settled["amount"], settled["rake"], settled["payout"]) == ("10.00", "1.00", "25.00")
    with TestClient(create_app(settings)) as reader:
        book = reader.app.state.runtime.ledger()
        assert posted["crm"] == [event_dict(e) for e in book.events(0).events]
    assert all(item.signed for item in receiver.received)
    crm = found["crm"]
    assert (crm["head"], crm["lag_events"], crm["attempts"], crm["last_error"]) == (3, 0, 0, None)
    assert crm["holder"] is not None
    assert crm["last_success_at"] is not None
    assert 'ledger_webhook_deliveries_total{endpoint="crm",outcome="ok"}' in metrics
    assert 'ledger_webhook_lag_events{endpoint="payments"} 0.0' in metrics
    assert refused.status_code == 401
