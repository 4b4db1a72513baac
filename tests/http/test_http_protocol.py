"""The server's HTTP protocol (ledger.http.protocol): uvicorn's, with each answer in one write.

Driven as uvicorn drives it, on a transport that records what is written: the bytes on the
wire are uvicorn's own, only how many writes carry them changes.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner
from uvicorn.server import ServerState

from ledger.cli import main
from ledger.http.protocol import OneWriteHttpToolsProtocol
from support.httpkit import SECRET
from support.logs import served_logging

REQUEST = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}"


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def answer(app: Any, request: bytes = REQUEST) -> list[bytes]:
    """What the protocol writes, write by write, for one request to ``app``."""
    config = uvicorn.Config(app, lifespan="off", log_config=None)
    config.load()
    transport = RecordingTransport()
    protocol = OneWriteHttpToolsProtocol(config, ServerState(), app_state={})
    protocol.connection_made(transport)
    protocol.data_received(request)
    for _ in range(50):  # until the answer's task has run and its writes have gone out
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return transport.writes


async def two_messages(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


def test_an_answer_of_head_and_body_goes_out_in_one_write() -> None:
    writes = asyncio.run(answer(two_messages))
    assert len(writes) == 1
    head, body = writes[0].split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length: 11" in head
    assert body == b'{"ok":true}'


def test_a_head_whose_body_is_not_ready_goes_out_alone_at_the_end_of_the_loops_turn() -> None:
    seen_before_body: list[list[bytes]] = []
    transport_writes: list[bytes] = []

    async def streamed(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"transfer-encoding", b"chunked")],
            }
        )
        for _ in range(3):  # the body comes turns later (a stream, a long poll)
            await asyncio.sleep(0)
        seen_before_body.append(list(transport_writes))
        await send({"type": "http.response.body", "body": b"late", "more_body": False})

    async def run() -> list[bytes]:
        original = RecordingTransport.write

        def spy(self: RecordingTransport, data: Any) -> None:
            original(self, data)
            transport_writes.append(bytes(data))

        RecordingTransport.write = spy  # type: ignore[method-assign]
        try:
            return await answer(streamed)
        finally:
            RecordingTransport.write = original  # type: ignore[method-assign]

    writes = asyncio.run(run())
    # The client had the head before the body was sent, and then the body.
    assert len(seen_before_body[0]) == 1
    assert seen_before_body[0][0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert writes == [seen_before_body[0][0], b"4\r\nlate\r\n0\r\n\r\n"]


def test_an_answer_that_closes_the_connection_writes_everything_before_closing() -> None:
    request = b"POST /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    writes = asyncio.run(answer(two_messages, request))
    assert len(writes) == 1
    assert writes[0].endswith(b'{"ok":true}')
    assert b"connection: close" in writes[0]


def test_ledger_serve_runs_uvicorn_with_the_one_write_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocols: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: protocols.append(self.config.http))
    with served_logging(io.StringIO()):
        result = CliRunner().invoke(
            main,
            ["serve", "--db", f"sqlite:///{tmp_path / 'ledger.db'}"],
            env={"LEDGER_JWT_SECRET": SECRET},
        )
    assert result.exit_code == 0, result.output
    assert protocols == [OneWriteHttpToolsProtocol]
