"""The delivery log line and the metrics tell the same story, with a UTC timestamp."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from support.httpkit import dumps, headers, serve
from support.payloads import entry, place


def test_a_delivery_without_its_event_header_is_logged_and_counted_as_the_same_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(tmp_path) as client, caplog.at_level(logging.INFO, logger="ledger.http"):
        answer = client.post(
            "/bets", content=dumps(place(entry(1, amount="0", rake="0"))), headers=headers(None)
        )
        metrics = client.get("/metrics").text
    assert answer.status_code == 200
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ledger.http"]
    # The log said null while the metrics said create:fantasy_team: now both name the event the
    # delivery was taken as.
    assert line["event"] == "create:fantasy_team"
    assert (
        'ledger_callback_deliveries_total{event="create:fantasy_team",outcome="ok",status="200"}'
        in metrics
    )
    stamp = datetime.fromisoformat(line["ts"])
    assert stamp.utcoffset() is not None
    assert stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
