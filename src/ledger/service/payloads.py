"""How a request's body reaches its command: decoded on the caller's thread, with the garbage
collector paused for a huge one until it is answered.

Which thread that is belongs to the caller: the HTTP server hands a huge body to one of its
worker threads (``ledger.http.callbacks``), so that its event loop keeps answering. A pool of
decoding threads here, chosen by the body's size, was measured to gain nothing on the settle
itself (100,000 participants over HTTP, 2 rounds alternated: SQLite 2.84 and 3.58 s with it,
3.30 and 2.42 s without; Postgres 3.53 and 4.96 against 3.94 and 4.41 s; the server's CPU 11%
and 20% lower without), and was removed.

Invariant: a pause taken for a body ends with its answer, or at once when the body is refused,
and the command and its answer are the same paused or not. Tested by
``tests/service/test_group_commit.py`` (a huge body settled and refused, the collector running
again after either; a huge command freed after its answer, still paused) and
``tests/stores/test_set_based_threshold.py`` (the collector paused and resumed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import ExitStack
from typing import Any, TypeVar

from .._process import BULK, paused_gc
from ..contract import (
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
)
from ..errors import LedgerError
from ..writer import Command, Writer

__all__ = ["BYTES_PER_BET", "run_paused", "submit_paused"]

R = TypeVar("R")

# The fewest bytes a bet takes in a body (`{"user":{"uid":"u"},"bet":{"uid":1,"payout":0}}`):
# a body's length over this bounds how many bets it can carry.
BYTES_PER_BET = 48


def submit_paused(writer: Writer, payload: Any, command: Callable[[Any], Command[R]]) -> Future[R]:
    """Build the command of ``payload`` on the calling thread and submit it to ``writer``: a
    future of its result; bad input fails the future with its 4xx. For a huge body the
    collector stays paused from the decoding until the answer (see :func:`answer_paused`)."""
    if bets_in(payload) <= BULK:
        # Every Place Bet of benchmark (a) comes this way: no pause, nothing to undo.
        return _submitted(writer, payload, command)
    pause = ExitStack()
    pause.enter_context(paused_gc(bets_in(payload)))
    try:
        answer = _submitted(writer, payload, command)
    except BaseException:
        pause.close()
        raise
    answer.add_done_callback(lambda _: pause.close())
    return answer


def _submitted(writer: Writer, payload: Any, command: Callable[[Any], Command[R]]) -> Future[R]:
    try:
        return writer.submit(command(payload))
    except LedgerError as error:
        failed: Future[R] = Future()
        failed.set_exception(error)
        return failed


def bets_in(payload: Any) -> int:
    """How many bets ``payload`` carries, at most: a raw body's length over
    :data:`BYTES_PER_BET`, a parsed body's or a model's lists; 0 for a shape that validation
    will refuse."""
    if isinstance(payload, bytes | bytearray | str):
        return len(payload) // BYTES_PER_BET
    if isinstance(payload, Mapping):
        pools = payload.get("pools")
        parts = pools if isinstance(pools, list) else [payload]
        return sum(
            len(bets)
            for part in parts
            if isinstance(part, Mapping) and isinstance(bets := part.get("bets"), list)
        )
    if isinstance(payload, PlaceBetsRequest):
        return len(payload.bets)
    if isinstance(payload, RefundRequest | SettleRequest):
        return sum(len(pool.bets) for pool in payload.pools)
    return 0


def run_paused(writer: Writer, payload: Any, command: Callable[[Any], Command[R]]) -> R:
    """Build the command of ``payload`` and run it, in the calling thread: :func:`answer_paused`
    with the caller waiting for the answer."""
    answer: Future[R] = Future()
    answer_paused(answer, writer, payload, command)
    return answer.result()


def answer_paused(
    answer: Future[R], writer: Writer, payload: Any, command: Callable[[Any], Command[R]]
) -> None:
    """Build the command of ``payload``, run it and answer, the garbage collector paused for a
    huge body: decoding a million-participant settle and building its command allocate
    millions of objects (none in cycles), and the collector's passes over them were 45% of that
    time. The writer pauses it again while it applies; one pause across both leaves no gap.

    The command's objects (claims, users, staged rows of a huge close) are freed after the
    answer rather than before it (0.3 s at a million participants, on a worker thread while the
    caller answers), and still within the pause: made while it was paused, they are all in its
    youngest generation, and its first pass after would walk every one of them (0.14 s a pass
    per million objects here)."""
    if not answer.set_running_or_notify_cancel():
        return
    try:
        with paused_gc(bets_in(payload)):
            built = command(payload)
            answer.set_result(writer.run(built))
            del built
    except BaseException as error:  # noqa: BLE001 - the caller's, as a pool's future has it
        answer.set_exception(error)
