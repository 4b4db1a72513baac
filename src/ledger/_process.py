"""Process-wide tweaks, in one place: the garbage collector's pause and freeze, and fresh request
references.

Nothing here runs at import time: the fork hook is installed by the first reference drawn, the
collector is paused only while a huge request runs, and the heap is frozen only by the server
that owns the process (``ledger serve``), once started.

Invariant: the collector is enabled again when the last huge request running ends, whatever
happened in it; a reference is unique and unguessable (80 random bits within its millisecond,
in every process). Tested by tests/unit/test_process.py and tests/unit/test_references.py.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import threading
import time
from collections.abc import Iterator

__all__ = ["BULK", "freeze_heap", "new_reference", "paused_gc"]

# Requests with more bets than this run with the cyclic garbage collector paused. At 1,000, a
# Place Bet of 1,000 entries (the embedded batch of benchmark (b)) was not paused and spent 8%
# of its CPU in the collector: 2.4 of 29.5 us a bet, 0.1 of 27 paused.
BULK = 500

_paused = 0
_was_enabled = True
_paused_lock = threading.Lock()


@contextlib.contextmanager
def paused_gc(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a request of ``size`` bets is applied.

    A settle of 100,000 participants allocates millions of small objects, and every few
    thousand allocations the collector walks all live ones: a third of the request's time.
    Nothing a request builds forms reference cycles (reference counting frees it all), and the
    pause lasts as long as the request. Nested and concurrent pauses are counted; small requests
    (``size <= BULK``) do not pause.
    """
    global _paused, _was_enabled
    if size <= BULK:
        yield
        return
    with _paused_lock:
        _paused += 1
        if _paused == 1:
            _was_enabled = gc.isenabled()  # an embedding program may have its own reasons
            gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.enable()


def freeze_heap() -> None:
    """Move every object alive now out of the cyclic collector's sight (``gc.freeze``).

    For the server process, once started: the app, the ledger, SQLAlchemy and the modules are
    some 140,000 tracked objects that live as long as the process, and under load (objects of
    the requests in flight surviving young collections) the collector walked all of them about
    twice a second, 70 ms each: 13% of the server's CPU under benchmark (a), 22% of the event
    loop's (perf). Frozen, a full collection walks only what was made since. Reference counting
    still frees them; only a cycle among them that became garbage would stay, and these live
    until the process ends anyway.
    """
    gc.collect()
    gc.freeze()


_random: random.Random | None = None
_random_lock = threading.Lock()


def new_reference() -> str:
    """A fresh 128-bit reference (request transaction keys, Place Bet secrets), time-ordered.

    Laid out like a UUIDv7: the first 48 bits are the Unix time in milliseconds, the other 80
    are random. The key of every Place Bet's transaction starts with it, and a random key lands
    on a random leaf of the unique index: one more page written to the WAL per bet (37 of the
    186 pages a commit of 28 Place Bets wrote on a ledger of 100,000 bets). Time-ordered keys
    all land on the index's last leaf. 80 random bits keep references of the same millisecond
    (and of several processes) unique and unguessable.

    Drawn from a PRNG seeded by the OS rather than ``uuid4``: one urandom system call per
    request showed up in the Place Bet profile.
    """
    generator = _random or _seeded()
    return f"{time.time_ns() // 1_000_000 & _MILLIS:012x}{generator.getrandbits(80):020x}"


_MILLIS = (1 << 48) - 1


def _seeded() -> random.Random:
    global _random
    with _random_lock:
        if _random is None:
            _random = random.Random(_entropy())
            # A forked child must not repeat its parent's references (they are unique keys).
            os.register_at_fork(after_in_child=_reseed)
        return _random


def _reseed() -> None:
    if _random is not None:
        _random.seed(_entropy())


def _entropy() -> int:
    return random.SystemRandom().getrandbits(128)
