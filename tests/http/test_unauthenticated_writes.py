"""What a caller without credentials can make the server write: log lines and journal rows of
bounded size, and journal rows at a bounded rate (every refusal still counted in the metrics)."""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from pathlib import Path

import pytest

from ledger.http.limits import UNAUTHENTICATED_JOURNAL_RATE
from support.httpkit import OPERATOR_HEADERS, PLACE, headers, serve

NO_CREDENTIALS = {
    "content-type": "application/json",
    "x-callback-event": PLACE,
    "authorization": "Bearer not-a-token",
}


def journalled(tmp_path: Path, status: int, expected_at_least: int = 0) -> list[str | None]:
    """The request ids of the journal's rows of ``status``, once the writer has them."""
    deadline = time.monotonic() + 10
    while True:
        with sqlite3.connect(tmp_path / "ledger.db") as db:
            ids = [
                row[0]
                for row in db.execute(
                    "SELECT request_id FROM deliveries WHERE status = ?", (status,)
                )
            ]
        if len(ids) >= expected_at_least or time.monotonic() > deadline:
            return ids
        time.sleep(0.05)


def test_a_huge_request_id_is_cut_in_the_log_line_and_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    huge = "r" * 1_000_000
    with caplog.at_level(logging.INFO, logger="ledger.http"), serve(tmp_path) as client:
        answer = client.post(
            "/bets", content=b"{}", headers={**NO_CREDENTIALS, "x-request-id": huge}
        )
        assert answer.status_code == 401
        deposit = client.post(
            "/admin/deposits",
            json={"user": "u1", "currency": "EUR", "amount": "1", "reference": "d1"},
            headers={**OPERATOR_HEADERS, "x-request-id": huge},
        )
        assert deposit.status_code == 200
        (row,) = journalled(tmp_path, 401, 1)
        with sqlite3.connect(tmp_path / "ledger.db") as db:
            (event_id,) = db.execute("SELECT request_id FROM events").fetchone()
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ledger.http"]
    assert lines
    assert all(len(json.dumps(line)) < 2000 for line in lines)
    assert lines[0]["request_id"] == "r" * 255
    assert row == "r" * 255
    assert event_id == "r" * 255


def test_refusals_without_credentials_are_all_counted_but_journalled_at_a_bounded_rate(
    tmp_path: Path,
) -> None:
    sent = 150
    with serve(tmp_path) as client:
        started = time.monotonic()
        for n in range(sent):
            answer = client.post(
                "/bets", content=b"{}", headers={**NO_CREDENTIALS, "x-request-id": f"r{n}"}
            )
            assert answer.status_code == 401
        elapsed = time.monotonic() - started
        # A refusal of a caller with valid credentials is journalled whatever the rate.
        assert client.post("/bets", content=b"{", headers=headers(PLACE)).status_code == 400
        metrics = client.get("/metrics").text
        assert len(journalled(tmp_path, 400, 1)) == 1
        rows = journalled(tmp_path, 401)
    per_second = int(UNAUTHENTICATED_JOURNAL_RATE.split("/")[0])
    assert 0 < len(rows) <= per_second * (math.ceil(elapsed) + 1) < sent
    skipped = next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("ledger_unauthenticated_refusals_not_journalled_total")
    )
    assert skipped + len(rows) == sent
    counted = sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("ledger_callback_deliveries_total") and 'status="401"' in line
    )
    assert counted == sent
