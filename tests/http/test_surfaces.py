"""Each surface answers only where it should: with LEDGER_OPERATOR_LISTEN the public listener
serves the callbacks and the probes, the operator's the console, /admin and /metrics; and
LEDGER_OPERATOR_ALLOWED_IPS keeps every other address off the operator's side."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from ledger.http.app import create_app
from ledger.settings import Settings, SettingsError
from support.httpkit import (
    OPERATOR_HEADERS,
    PLACE,
    dumps,
    free_port,
    headers,
    server_env,
    settings_for,
)
from support.killable import LedgerProcess
from support.payloads import entry, place

OPERATOR_SIDE = ["/console/sign-in", "/admin/users", "/metrics", "/schema/swagger"]
PROBES = ["/health", "/ready"]


class Arriving:
    """The app, as if every request arrived on ``server`` from ``client``."""

    def __init__(self, app: Any, server: tuple[str, int], client: str) -> None:
        self.app, self.server, self.client = app, server, client

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope["server"], scope["client"] = self.server, (self.client, 50000)
        await self.app(scope, receive, send)


@contextmanager
def arriving(
    tmp_path: Path, server: tuple[str, int], client: str = "127.0.0.1", **overrides: Any
) -> Iterator[TestClient[Any]]:
    app = create_app(settings_for(tmp_path, **overrides))
    with TestClient(Arriving(app, server, client), raise_server_exceptions=False) as found:
        yield found


def status(client: TestClient[Any], path: str) -> int:
    return client.get(path, headers=OPERATOR_HEADERS).status_code


def test_with_an_operator_listener_each_surface_answers_only_on_its_own(tmp_path: Path) -> None:
    listen = ("127.0.0.1", 8001)
    with arriving(tmp_path, ("127.0.0.1", 8000), operator_listen=listen) as public:
        assert [status(public, path) for path in PROBES] == [200, 200]
        assert [status(public, path) for path in OPERATOR_SIDE] == [404] * len(OPERATOR_SIDE)
        body = dumps(place(entry(1)))
        # Refused for want of funds, so it reached the ledger: the callback is served here.
        placed = public.post("/bets", content=body, headers=headers(PLACE))
        assert placed.json()["error"] == "user.insufficient_funds"
    with arriving(tmp_path, listen, operator_listen=listen) as operator:
        assert [status(operator, path) for path in PROBES] == [200, 200]
        assert [status(operator, path) for path in OPERATOR_SIDE] == [200] * len(OPERATOR_SIDE)
        refused = operator.post("/bets", content=dumps(place(entry(2))), headers=headers(PLACE))
        assert refused.status_code == 404


def test_the_operator_allowlist_keeps_other_addresses_off_the_operator_side(
    tmp_path: Path,
) -> None:
    allowed = (ip_network("10.1.0.0/16"),)
    server = ("127.0.0.1", 8000)
    with arriving(tmp_path, server, "10.1.2.3", operator_allowed_ips=allowed) as inside:
        assert [status(inside, path) for path in OPERATOR_SIDE] == [200] * len(OPERATOR_SIDE)
    with arriving(tmp_path, server, "203.0.113.9", operator_allowed_ips=allowed) as outside:
        answers = [outside.get(path, headers=OPERATOR_HEADERS) for path in OPERATOR_SIDE]
        assert {answer.status_code for answer in answers} == {403}
        assert {answer.json()["error"] for answer in answers} == {"auth.ip_forbidden"}
        # The platform's side and the probes are not the allowlist's business.
        assert [status(outside, path) for path in PROBES] == [200, 200]
        placed = outside.post("/bets", content=dumps(place(entry(3))), headers=headers(PLACE))
        assert placed.json()["error"] == "user.insufficient_funds"


def test_the_operator_listener_setting_is_read_and_checked() -> None:
    found = Settings.from_env(
        {
            "LEDGER_OPERATOR_LISTEN": "10.0.0.5:8001",
            "LEDGER_OPERATOR_ALLOWED_IPS": "10.1.0.0/16",
        }
    )
    assert found.operator_listen == ("10.0.0.5", 8001)
    assert found.operator_allowed_ips == (ip_network("10.1.0.0/16"),)
    assert Settings.from_env({"LEDGER_OPERATOR_LISTEN": "[::1]:9"}).operator_listen == ("::1", 9)
    for bad in ("8001", "host:", "host:99999", ":80"):
        with pytest.raises(SettingsError, match="LEDGER_OPERATOR_LISTEN"):
            Settings.from_env({"LEDGER_OPERATOR_LISTEN": bad})


def test_ledger_serve_listens_for_the_operator_side_on_its_own_address(tmp_path: Path) -> None:
    port = free_port()
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_OPERATOR_LISTEN=f"127.0.0.1:{port}")
    with LedgerProcess(tmp_path, env) as process:
        operator_url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=process.url) as public:
            assert public.get("/ready").status_code == 200
            assert public.get("/admin/users", headers=OPERATOR_HEADERS).status_code == 404
            assert public.get("/console/sign-in").status_code == 404
            assert public.get("/metrics").status_code == 404
            placed = public.post("/bets", content=dumps(place(entry(1))), headers=headers(PLACE))
            assert placed.json()["error"] == "user.insufficient_funds"
        with httpx.Client(base_url=operator_url) as operator:
            assert operator.get("/ready").status_code == 200
            assert operator.get("/admin/users", headers=OPERATOR_HEADERS).status_code == 200
            assert operator.get("/console/sign-in").status_code == 200
            assert operator.get("/metrics").status_code == 200
            refused = operator.post("/bets", content=dumps(place(entry(2))), headers=headers(PLACE))
            assert refused.status_code == 404
