"""How a request's body reaches its command: decoded where it costs the caller nothing, with the
garbage collector paused for a huge one.

Invariant: the command built from a body, and the writer's answer to it, are the same whichever
thread decodes the body; only where the time is spent changes. A body over :data:`INLINE_BODY`
bytes is decoded on a worker thread (a settle of a million participants is 300 MB of JSON and
takes seconds, which must not stall the caller, an event loop say). Tested by
``tests/service/test_group_commit.py`` (a huge body answered from a worker, bad input a 4xx) and
``tests/stores/test_set_based.py`` (the collector paused and resumed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from threading import Lock
from typing import Any, TypeVar

from .._process import paused_gc
from ..contract import (
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
)
from ..errors import LedgerError
from ..writer import Command, Writer

__all__ = ["BYTES_PER_BET", "INLINE_BODY", "Decoders", "run_paused"]

R = TypeVar("R")

# Bodies larger than this are decoded on a worker thread.
INLINE_BODY = 64 * 1024
# The fewest bytes a bet takes in a body (`{"user":{"uid":"u"},"bet":{"uid":1,"payout":0}}`):
# a body's length over this bounds how many bets it can carry.
BYTES_PER_BET = 48


class Decoders:
    """The worker threads that decode large bodies, started at the first one."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = Lock()

    def submit(
        self, writer: Writer, payload: Any, command: Callable[[Any], Command[R]]
    ) -> Future[R]:
        """Build ``payload``'s command and submit it to ``writer``: a future of its result
        either way; bad input fails the future with its 4xx."""
        if isinstance(payload, bytes | bytearray | str) and len(payload) > INLINE_BODY:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(2, thread_name_prefix="ledger-decode")
                pool = self._pool
            answer: Future[R] = Future()
            pool.submit(answer_paused, answer, writer, payload, command)
            return answer
        try:
            built = command(payload)
        except LedgerError as error:
            failed: Future[R] = Future()
            failed.set_exception(error)
            return failed
        return writer.submit(built)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


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
