"""Operations: probes, Prometheus metrics, one JSON log line per delivery, error mapping."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from litestar import Litestar
from prometheus_client import CONTENT_TYPE_LATEST

from ledger.http.app import create_app
from ledger.settings import Settings
from support.httpkit import PLACE, Wallet, dumps, headers, serve
from support.payloads import entry, place


def test_health_answers_without_the_database(tmp_path: Path) -> None:
    with serve(tmp_path, database_url="postgresql+psycopg://x@127.0.0.1:9/x", db_timeout=1) as c:
        response = c.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_is_200_when_the_database_answers(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        assert client.get("/ready").json() == {"status": "ready"}


def test_ready_is_503_when_the_database_is_down(tmp_path: Path) -> None:
    with serve(tmp_path, database_url="postgresql+psycopg://x@127.0.0.1:9/x", db_timeout=1) as c:
        response = c.get("/ready")
    assert response.status_code == 503
    assert response.json()["error"] == "store.unavailable"


def test_metrics_count_deliveries_by_event_and_outcome(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        wallet = Wallet(client)
        wallet.place(place(entry(1, user="broke")))
        wallet.place(place(entry(2, amount="0", rake="0")))
        text = client.get("/metrics").text
    assert (
        'ledger_callback_deliveries_total{event="create:fantasy_team",'
        'outcome="user.insufficient_funds",status="402"} 1.0' in text
    )
    ok = 'event="create:fantasy_team",outcome="ok",status="200"} 1.0'
    assert "ledger_callback_deliveries_total{" + ok in text
    assert 'ledger_callback_duration_seconds_count{event="create:fantasy_team"} 2.0' in text


def test_each_app_has_its_own_metrics_registry(tmp_path: Path) -> None:
    first = create_app(Settings(database_url=f"sqlite:///{tmp_path}/a.db"))
    second = create_app(Settings(database_url=f"sqlite:///{tmp_path}/b.db"))
    assert first.state.runtime.metrics.registry is not second.state.runtime.metrics.registry


def test_creating_an_app_opens_no_database(tmp_path: Path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/never.db"))
    assert isinstance(app, Litestar)
    assert not (tmp_path / "never.db").exists()


def test_one_json_log_line_per_delivery_with_request_id_event_and_bet_uids(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(tmp_path) as client:
        wallet = Wallet(client)
        with caplog.at_level(logging.INFO, logger="ledger.http"):
            wallet.place(place(entry(11, amount="0", rake="0"), entry(12, amount="0", rake="0")))
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ledger.http"]
    assert len(lines) == 1
    (line,) = lines
    assert line["request_id"] == "00000000-0000-4000-8000-000000000001"
    assert line["event"] == PLACE
    assert line["path"] == "/bets"
    assert line["status"] == 200
    assert line["outcome"] == "ok"
    assert line["bet_uids"] == [11, 12]
    assert line["duration_ms"] >= 0


def test_failed_delivery_is_logged_with_its_error_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(tmp_path) as client, caplog.at_level(logging.INFO, logger="ledger.http"):
        client.post("/bets", content=dumps(place(entry(1))), headers=headers("bad:event"))
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "ledger.http"]
    assert (line["status"], line["outcome"]) == (400, "request.wrong_event")


def test_unknown_route_is_404_json(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        response = client.get("/nope")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_wrong_method_is_405_json(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        response = client.get("/bets")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_unexpected_bug_is_500_internal_without_details(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(tmp_path) as client:
        book = client.app.state.runtime.ledger()

        def explode(_: object) -> None:
            raise ZeroDivisionError("secret detail")

        book.place_bets = explode
        book.submit_place_bets = explode  # the group-commit path  # type: ignore[method-assign]
        response = client.post(
            "/bets", content=dumps(place(entry(1, amount="0", rake="0"))), headers=headers(PLACE)
        )
    assert response.status_code == 500
    assert response.json() == {"error": "internal", "message": "internal error"}
    assert "secret detail" not in response.text


def test_a_delivery_stuck_past_its_deadline_is_503_and_its_resend_lands_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.http import callbacks
    from support.books import Hold

    monkeypatch.setitem(callbacks.DEADLINES, PLACE, 0.5)
    with serve(tmp_path) as client:
        book = client.app.state.runtime.ledger()
        freeze = Hold()  # the database stops answering
        frozen = book.writer.submit(freeze)
        assert freeze.started.wait(5)
        body = dumps(place(entry(1, amount="0", rake="0")))
        stuck = client.post("/bets", content=body, headers=headers(PLACE))
        assert stuck.status_code == 503
        assert stuck.json()["error"] == "request.timeout"
        freeze.release.set()
        frozen.result(5)
        # The abandoned delivery may or may not have landed; the platform's re-send is safe.
        resent = client.post("/bets", content=body, headers=headers(PLACE))
        assert resent.status_code == 200
        assert book.bet(1) is not None
        assert book.check().ok


def test_metrics_content_type_names_its_charset_once(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    content_type = response.headers["content-type"]
    # Exactly prometheus_client's own type: a repeated parameter confuses strict scrapers.
    assert content_type.count("charset") == 1, content_type
    assert content_type == CONTENT_TYPE_LATEST
