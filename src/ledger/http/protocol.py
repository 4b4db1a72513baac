"""uvicorn's httptools protocol, writing each response's head together with its body.

uvicorn writes an ASGI response's ``http.response.start`` (the status line and headers) as soon
as it is sent, and its ``http.response.body`` with a write of its own; uvloop sends each write
at once, so every answer cost two ``send`` syscalls, two TCP segments over the loopback and, for
a client like the platform's, two wake-ups to read one answer. Under benchmark (a) uvicorn's
``send`` was a fifth of the event loop's samples (``py-spy record --gil``), most of it those
writes. Here the head waits for the body's first write, which takes it along; a head with no
body in the same turn of the event loop (a streamed or long-polled answer, a 100 Continue)
goes out alone at the end of that turn, as before. Nothing else of uvicorn's changes.

Invariant: the bytes on the wire, and their order, are uvicorn's; only how many writes carry
them changes. Tested by tests/http/test_http_protocol.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttpToolsProtocol"]


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol whose request cycles write head and body at once."""

    def on_headers_complete(self) -> None:
        previous = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        # A new cycle for this request (an upgrade keeps the old one): its task is scheduled,
        # not started, so it writes through the wrapper from its first message on.
        if cycle is not None and cycle is not previous:
            cycle.transport = HeadWithBody(cycle.transport, self.loop)  # type: ignore[assignment]


class HeadWithBody:
    """One response's view of the connection's transport: its first write (the head) is held
    until the next write, which carries it, or until the end of the event loop's turn."""

    __slots__ = ("_held", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif not self._started:
            self._started = True
            self._held = data
            self._loop.call_soon(self.flush)  # once: only the first write is held
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Write what is held, if anything (the head of an answer whose body is not ready)."""
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        # Whatever else a cycle may use of its transport, as it is.
        return getattr(self._transport, name)
