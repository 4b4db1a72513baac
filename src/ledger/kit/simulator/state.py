"""What every part of a simulated day shares: its seeded generator and ids, the platform's books
of what each user must hold, its record of every bet, and the report in progress.

Invariant: everything random, ids included, comes from ``random.Random(seed)`` and ids derive
from the seed, so a seed replays the same day and another never collides with it. Proved by
``tests/kit/test_simulator.py``.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from decimal import Decimal
from typing import Any

from tqdm import tqdm

from ..admin_client import Books, Operator
from ..payloads import Player
from ..platform import Platform
from ..ticket_store import TicketStore
from ..tickets import TicketClient
from .model import ZERO, D, SimBet, SimulationConfig
from .report import SimulationReport

__all__ = ["DayState"]


class DayState:
    """The day's shared state and the books it keeps; :class:`.Simulator` plays the day."""

    def __init__(
        self,
        platform: Platform,
        operator: Operator,
        config: SimulationConfig,
        *,
        tickets: TicketClient,
        ticket_store: TicketStore,
    ) -> None:
        self.platform = platform
        self.operator = operator
        self.config = config
        self.tickets = tickets
        self.ticket_store = ticket_store
        self.rng = random.Random(config.seed)
        # Ids derive from the seed: another seed never collides, the same seed replays itself.
        digest = hashlib.sha256(f"ledger-simulate:{config.seed}".encode()).digest()
        self.prefix = int.from_bytes(digest[:4], "big")
        self._next_bet = 0
        self.report = SimulationReport(config.seed)
        self.books: dict[tuple[str, str], Books] = {}
        self.bets: dict[int, SimBet] = {}
        self.secrets: dict[int, dict[str, Any]] = {}
        self.players: list[Player] = []
        self._bar: tqdm[Any] | None = None

    def _bet_uid(self) -> int:
        self._next_bet += 1
        return self.prefix * 10**8 + self._next_bet

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def _move(self, player: Player, available: Decimal = ZERO, held: Decimal = ZERO) -> None:
        key = (player.uid, player.currency)
        books = self.books.get(key, Books(D(0), D(0)))
        self.books[key] = Books(books.available + available, books.held + held)

    def _moved(self, currency: str, what: str, amount: Decimal) -> None:
        if amount:
            self.report.money[currency][what] += amount  # type: ignore[assignment]

    def _tick(self) -> None:
        if self._bar is not None:
            self._bar.update(1)
