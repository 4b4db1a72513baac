"""Process-wide tweaks, in one place: the garbage collector's pause and fresh request references.

Nothing here runs at import time: the fork hook is installed by the first reference drawn, and
the collector is paused only while a huge request runs.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import threading
from collections.abc import Iterator

__all__ = ["BULK", "new_reference", "paused_gc"]

# Requests with more bets than this run with the cyclic garbage collector paused.
BULK = 1_000

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


_random: random.Random | None = None
_random_lock = threading.Lock()


def new_reference() -> str:
    """A fresh 128-bit reference (request transaction keys, Place Bet secrets).

    Drawn from a PRNG seeded by the OS rather than ``uuid4``: one urandom system call per
    request showed up in the Place Bet profile, and these only need to be unique.
    """
    generator = _random or _seeded()
    return f"{generator.getrandbits(128):032x}"


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
