"""How a huge request is cut: :data:`CHUNK` bets at a time, in the one transaction, so that
memory stays bounded while every write stays set-based."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

__all__ = ["CHUNK", "split"]

C = TypeVar("C")

# Bets per chunk of a huge request: bounds memory while keeping every write set-based.
CHUNK = 50_000


def split(items: Sequence[C]) -> Iterator[tuple[int | None, Sequence[C]]]:
    """The chunks of a request, numbered when there are several (each gets a key of its own)."""
    if len(items) <= CHUNK:
        yield None, items
        return
    for number, start in enumerate(range(0, len(items), CHUNK)):
        yield number, items[start : start + CHUNK]
