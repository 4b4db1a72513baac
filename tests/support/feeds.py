"""An in-memory event feed for the webhook sender's tests (the ledger's own feed is tested
with it where the ledger writes events)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import ledger


@dataclass(frozen=True)
class MemoryEvent:
    id: int
    type: str
    committed_at: datetime


class MemoryFeed:
    """Events appended with :meth:`emit`, ids 1, 2, 3, ...; a source for any ledger."""

    def __init__(self) -> None:
        self.events: list[MemoryEvent] = []
        self._lock = threading.Lock()

    def __call__(self, _: ledger.Ledger) -> MemoryFeed:
        return self

    def emit(self, types: Iterable[str]) -> list[int]:
        with self._lock:
            start = self.events[-1].id if self.events else 0
            added = [
                MemoryEvent(start + offset + 1, kind, datetime.now(UTC))
                for offset, kind in enumerate(types)
            ]
            self.events.extend(added)
            return [event.id for event in added]

    def prune(self, through: int) -> None:
        """Forget the events up to id ``through`` (as retention would)."""
        with self._lock:
            self.events = [event for event in self.events if event.id > through]

    def read(self, after: int, limit: int) -> Sequence[MemoryEvent]:
        with self._lock:
            return [event for event in self.events if event.id > after][:limit]

    def head(self) -> int:
        with self._lock:
            return self.events[-1].id if self.events else 0

    def body(self, event: Any) -> Mapping[str, Any]:
        return {"id": event.id, "type": event.type, "committed_at": event.committed_at.isoformat()}
