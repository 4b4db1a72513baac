"""A request read straight from the ASGI scope and ``receive``: the callbacks' hot path.

Litestar's ``Request.headers`` builds a case-insensitive multidict of every header on each access
and ``Request.body`` runs a generator per chunk, together a sixth of a Place Bet's time on the
event loop. Invariant: headers are found by lower-case name, the first of repeated ones counting
(as Litestar's); a body is read whole, refused 413 past its limit whether announced or only
received, and 400 ``request.incomplete`` when the client hangs up. Proved by
``tests/http/test_hot_path.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.exceptions import ClientException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.types import Receive

from ..errors import InvalidRequest

__all__ = ["ONE_BUFFER", "header_text", "headers_of", "read_body"]

# A body announced larger than this is received into one buffer of its size rather than kept as
# chunks and joined: a million-participant settle (288 MB) was held twice, 70,000 more pages that
# the kernel had to fault in and clear (0.5 to 1 s of a Postgres million's server CPU).
ONE_BUFFER = 1 << 20


def headers_of(raw: Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The request's headers by lower-case name; the first of repeated ones, as Litestar's."""
    headers: dict[bytes, bytes] = {}
    for name, value in raw:
        headers.setdefault(name.lower(), value)
    return headers


def header_text(headers: dict[bytes, bytes], name: bytes) -> str | None:
    """The header ``name`` (lower case) as text, as HTTP/1.1 encodes it; ``None`` if absent."""
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


async def read_body(receive: Receive, announced: bytes | None, limit: int) -> bytes | bytearray:
    """The whole body: 413 over ``limit`` (announced or received), 400 when the client leaves."""
    if announced is not None:
        try:
            length = int(announced)
        except ValueError:
            raise ClientException(f"Invalid content-length: {announced!r}") from None
        if length > limit:
            raise RequestEntityTooLarge
        if length > ONE_BUFFER:
            return await _body_into(receive, length)
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                received += len(chunk)
                if received > limit:
                    raise RequestEntityTooLarge
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise _incomplete()


async def _body_into(receive: Receive, length: int) -> bytearray:
    """A large body of announced ``length``, received into one buffer of that size (the server
    delivers no more than the announced length; more would be refused as too large)."""
    buffer = bytearray(length)
    filled = 0
    with memoryview(buffer) as view:
        while True:
            message = await receive()
            if message["type"] == "http.request":
                chunk = message.get("body", b"")
                end = filled + len(chunk)
                if end > length:
                    raise RequestEntityTooLarge
                view[filled:end] = chunk
                filled = end
                if not message.get("more_body", False):
                    break
            elif message["type"] == "http.disconnect":
                raise _incomplete()
    del buffer[filled:]
    return buffer


def _incomplete() -> InvalidRequest:
    # The client hung up mid-body: bad input, not our fault.
    return InvalidRequest(
        "the client disconnected before sending the whole body", key="request.incomplete"
    )
