"""How the writer process cuts what it received into batches, one commit each.

Invariant: every command received is applied exactly once and in the order received; a batch
is at most the mean of the last batch and what is waiting (rounded up), the rest going first into
the next one, and a stop applies everything held. Proved by
``tests/service/test_writer_process.py`` (the batches' own test, and the child applying what it
held back without waiting for more).
"""

from __future__ import annotations

from typing import Any


class Batches:
    """Which of the commands received the child applies next, as one batch (one commit).

    Under steady load from a fixed number of connections (benchmark (a): 64), the batches settle
    into two halves: one commits while the other's connections get their answers and send
    again. Halves that came out uneven stay so (37 and 27 Place Bets, batch after batch), and
    after each smaller one the child waited for the larger half to arrive: 17% of its time
    against 8% for even halves, and (a) on SQLite 0.64 to 0.67 of the echo against 0.73 to
    0.75. So a batch is at most the mean of the last one and what is waiting (rounded up), and
    the rest goes first into the next: uneven halves even out in a batch or two, and a burst
    still grows the batches quickly. Alternated under (a) on SQLite: 0.77, 0.76, 0.83 against
    0.71, 0.73, 0.74; on Postgres 0.43 against 0.44 (docs/performance.md)."""

    def __init__(self) -> None:
        self._held: list[Any] = []
        self._last = 0  # the size of the last batch

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def take(self, received: list[Any], stopping: bool) -> list[Any]:
        """The next batch, held commands first; on ``stopping``, everything."""
        waiting = self._held + received if self._held else received
        if stopping:
            self._held = []
            return waiting
        most = max(1, -(-(self._last + len(waiting)) // 2))
        batch, self._held = waiting[:most], waiting[most:]
        if batch:
            self._last = len(batch)
        return batch
