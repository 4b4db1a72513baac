"""The probes anyone can call say whether the server is ready, never where its database is."""

from __future__ import annotations

from pathlib import Path

from support.httpkit import serve


def test_ready_says_the_database_is_unavailable_without_its_host_or_port(tmp_path: Path) -> None:
    url = "postgresql+psycopg://ledger:pw@127.0.0.1:1/wallet"
    with serve(tmp_path, database_url=url, db_timeout=1.0) as client:
        answer = client.get("/ready")
    assert answer.status_code == 503
    assert answer.json() == {
        "error": "store.unavailable",
        "message": "the database is not available",
    }
    assert "127.0.0.1" not in answer.text
