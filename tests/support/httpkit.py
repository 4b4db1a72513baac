"""Helpers for the callback server's tests: exact JSON bodies, tokens, configured apps."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import jwt
from litestar.testing import TestClient

from ledger.http.app import create_app
from ledger.settings import Settings
from support.processes import end_group, waited_too_long

SECRET = "test-secret-" + "0123456789abcdef" * 4
OLD_SECRET = "old-secret-" + "0123456789abcdef" * 4
OPERATOR = "operator-token-0123456789"
CLIENT = "acme"

PLACE = "create:fantasy_team"
REFUND_BET = "destroy:fantasy_team"
REFUND_TOURNAMENT = "cancel:tournament"
SETTLE = "winners:tournament"


def dumps(payload: Any) -> bytes:
    """JSON with every ``Decimal`` written as the exact number it is (never through float)."""
    marks: dict[str, str] = {}

    def mark(value: Any) -> Any:
        if isinstance(value, Decimal):
            key = f"@@dec{len(marks)}@@"
            marks[key] = str(value)
            return key
        raise TypeError(type(value))

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item) for item in value]
        if isinstance(value, Decimal):
            return mark(value)
        return value

    text = json.dumps(walk(payload))
    for key, number in marks.items():
        text = text.replace(f'"{key}"', number)
    return text.encode()


def token(
    role: str | None = "admin",
    *,
    secret: str = SECRET,
    algorithm: str = "HS256",
    ttl: int = 300,
    **claims: Any,
) -> str:
    """A platform JWT; admin tokens get ``sub`` unless a subject claim is given (or ``None``)."""
    body: dict[str, Any] = {"exp": int(time.time()) + ttl}
    if role is not None:
        body["role"] = role
    if role == "admin" and not {"id", "uid", "sub"} & claims.keys():
        body["sub"] = "platform"
    body.update({key: value for key, value in claims.items() if value is not None})
    return jwt.encode(body, secret, algorithm=algorithm)


def bearer(jwt_token: str | None = None, client: str = CLIENT) -> str:
    return f"Bearer {client} {jwt_token or token()}"


def headers(event: str | None, role: str = "admin", **extra: str) -> dict[str, str]:
    """The headers of a platform delivery of ``event``."""
    result = {
        "Content-Type": "application/json",
        "Authorization": bearer(token(role)),
        "X-Request-Id": "00000000-0000-4000-8000-000000000001",
    }
    if event is not None:
        result["X-Callback-Event"] = event
    result.update(extra)
    return result


OPERATOR_HEADERS = {"Authorization": f"Bearer {OPERATOR}"}


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    base = Settings(
        database_url=f"sqlite:///{tmp_path}/ledger.db",
        client_name=CLIENT,
        jwt_secrets=(SECRET,),
        operator_token=OPERATOR,
    )
    return replace(base, **overrides)


@contextmanager
def serve(tmp_path: Path, **overrides: Any) -> Iterator[TestClient[Any]]:
    """A test client on a fresh app over a fresh SQLite file in ``tmp_path``."""
    app = create_app(settings_for(tmp_path, **overrides))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


class Wallet:
    """A test client wrapper that speaks the platform's and the operator's side."""

    def __init__(self, client: TestClient[Any]) -> None:
        self.client = client

    def post(self, path: str, body: Any, event: str | None, role: str = "admin") -> Any:
        return self.client.post(path, content=dumps(body), headers=headers(event, role))

    def place(self, body: Any, role: str = "admin") -> Any:
        return self.post("/bets", body, PLACE, role)

    def refund(self, body: Any, event: str = REFUND_BET) -> Any:
        return self.post("/bets/cancel", body, event)

    def settle(self, body: Any) -> Any:
        return self.post("/winners", body, SETTLE)

    def deposit(self, user: str, amount: str, currency: str = "EUR", ref: str = "") -> Any:
        body = {
            "user": user,
            "currency": currency,
            "amount": amount,
            "reference": ref or f"dep-{user}-{amount}",
        }
        response = self.client.post("/admin/deposits", json=body, headers=OPERATOR_HEADERS)
        assert response.status_code == 200, response.text
        return response

    def balance(self, user: str, currency: str = "EUR") -> tuple[str, str]:
        """``(available, held)`` as decimal strings."""
        response = self.client.get(f"/admin/users/{user}/balances", headers=OPERATOR_HEADERS)
        if response.status_code == 404 and response.json()["error"] == "user.not_found":
            return "0.00", "0.00"  # a user the ledger never saw holds nothing
        assert response.status_code == 200, response.text
        for item in response.json()["balances"]:
            if item["currency"] == currency:
                return item["available"], item["held"]
        return "0.00", "0.00"


# --- a real `ledger serve` process ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ledger_command() -> list[str]:
    """The installed ``ledger`` script next to this interpreter, else the module itself."""
    script = Path(sys.executable).parent / "ledger"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from ledger.cli import main; main()"]


class Server:
    """A ``ledger serve`` subprocess; ``url`` is its base URL once it answers ``/health``."""

    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a production-like server on ``database_url``."""
    return {
        "LEDGER_DATABASE_URL": database_url,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        **extra,
    }


@contextmanager
def run_server(
    tmp_path: Path,
    env: dict[str, str],
    *args: str,
    scheme: str = "http",
    verify: Any = True,
    stdout: Any = None,
) -> Iterator[Server]:
    """Start ``ledger serve --port <free>`` with ``env`` added to a clean LEDGER_* environment."""
    port = free_port()
    clean = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    log = tmp_path / f"server-{port}.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*ledger_command(), "serve", "--port", str(port), *args],
            env={**clean, **env},
            stdout=stdout if stdout is not None else sink,
            stderr=sink,
            text=True,
            start_new_session=True,  # ended whole, workers and writer process included
        )
    server = Server(process, f"{scheme}://127.0.0.1:{port}", log)
    try:
        started = time.monotonic()
        while True:
            if process.poll() is not None:
                raise AssertionError(f"ledger serve exited early:\n{server.output()}")
            try:
                if httpx.get(f"{server.url}/health", verify=verify, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if waited_too_long(started):
                raise AssertionError(f"ledger serve did not answer:\n{server.output()}")
            time.sleep(0.1)
        yield server
    finally:
        end_group(process)
