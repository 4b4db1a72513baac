"""A webhook receiver for tests: plain asyncio HTTP/1.1 on 127.0.0.1, in a thread of its own.

It answers each request as its script says (``ok``, ``500``, ``timeout``: hold the request
until the sender gives up, ``drop``: close the connection without an answer), records every
request (headers, body, whether its signature verified, its outcome), counts how many requests
were in progress at once, and can be stopped and restarted on the same port (a receiver that
goes away). A thread of its own, not the test's event loop: a sender in another process posts to
it as readily as one in this process.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger.webhooks import verify


@dataclass
class Received:
    """One request as it arrived, and what the receiver did with it."""

    path: str
    headers: dict[str, str]
    body: bytes
    signed: bool
    outcome: str
    at: float = field(default_factory=time.monotonic)

    @property
    def ids(self) -> list[int]:
        return [event["id"] for event in json.loads(self.body)["events"]]

    @property
    def events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = json.loads(self.body)["events"]
        return events


class Receiver:
    """See the module's docstring. Use as a context manager; ``url`` is where to post."""

    def __init__(self, secret: str, *, hold: float = 0.0, timeout_hold: float = 30.0) -> None:
        self.secret = secret
        self.hold = hold  # seconds an "ok" request is held before its answer
        self.timeout_hold = timeout_hold
        self.script: deque[str] = deque()
        self.received: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self.port = 0

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Receiver:
        self._thread.start()
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"{self.base}/hooks"

    @property
    def base(self) -> str:
        """Post to any path under it; each request records its path."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (again, on the same port after a stop)."""

        async def listen() -> asyncio.Server:
            return await asyncio.start_server(self._serve, "127.0.0.1", self.port)

        self._server = asyncio.run_coroutine_threadsafe(listen(), self._loop).result(5)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop listening and cut every open connection (a receiver that went away)."""
        server, self._server = self._server, None
        if server is None:
            return

        async def close() -> None:
            server.close()
            for task in list(self._connections):
                task.cancel()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)

    def answer(self, outcomes: Iterable[str]) -> None:
        """Answer the next requests so, in turn; ``ok`` after the script runs out."""
        with self._lock:
            self.script.extend(outcomes)

    # --- reading what arrived -------------------------------------------------------------------

    def delivered(self) -> list[Received]:
        """The requests answered 2xx, in arrival order."""
        with self._lock:
            return [item for item in self.received if item.outcome == "ok"]

    def delivered_ids(self) -> list[int]:
        return [event_id for item in self.delivered() for event_id in item.ids]

    def wait_for(self, ids: set[int], timeout: float = 20.0) -> None:
        """Block until every one of ``ids`` was answered 2xx (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not ids <= set(self.delivered_ids()):
            if time.monotonic() > deadline:
                missing = sorted(ids - set(self.delivered_ids()))
                raise AssertionError(f"never delivered: {missing[:20]} ({len(missing)})")
            time.sleep(0.02)

    # --- serving --------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
                if not await self._answer(path, headers, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(
        self, path: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        with self._lock:
            outcome = self.script.popleft() if self.script else "ok"
            signed = verify(self.secret, body, headers.get("x-ledger-signature"))
            self.received.append(Received(path, headers, body, signed, outcome))
        if outcome == "drop":
            return False
        if outcome == "timeout":
            # Held past the sender's timeout, which abandons it: not counted as in progress.
            await asyncio.sleep(self.timeout_hold)
            return False
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.hold)
            status = "200 OK" if outcome == "ok" else f"{outcome} Error"
            text = b"" if outcome == "ok" else b"receiver says no"
            writer.write(
                f"HTTP/1.1 {status}\r\ncontent-length: {len(text)}\r\n\r\n".encode() + text
            )
            await writer.drain()
            return True
        finally:
            with self._lock:
                self.in_flight -= 1
