"""The simulated platform's own model: the day's configuration, its record of each entry, its
fixed exchange rates and the faults it draws.

Invariant: amounts convert between currencies by a fixed table, rounded to the cent, so a seed's
day is exact and replays the same. Proved by ``tests/kit/test_simulator.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Final

from ..admin_client import Books
from ..payloads import Entry

__all__ = ["SimBet", "SimulationConfig", "convert"]

D = Decimal
ZERO: Final = D(0)
ZERO_BOOKS: Final = Books(ZERO, ZERO)
CENT: Final = D("0.01")
# Units of the user's currency per unit of the tournament's: a fixed table keeps runs exact.
RATES: Final[dict[tuple[str, str], Decimal]] = {
    ("EUR", "USD"): D("1.08"),
    ("USD", "EUR"): D("0.93"),
}
BUY_INS: Final = (D("1.00"), D("2.00"), D("5.00"), D("10.00"), D("20.00"), D("50.00"))
GAME_TYPES: Final = ("football", "hockey", "basket")
MAX_ATTEMPTS: Final = 6
# Faults per logical delivery, drawn from the seeded generator in a fixed order.
FAULTS: Final = (("resend", 0.15), ("concurrent", 0.10), ("lost", 0.10), ("short_timeout", 0.05))


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    users: int = 20
    tournaments: int = 10
    seed: int = 1
    faults: bool = False
    currencies: tuple[str, str] = ("EUR", "USD")
    concurrency: int = 4
    progress: bool = True
    # Leave the day's users, balances and holds in the wallet for inspection.
    keep: bool = False


@dataclass
class SimBet:
    """The platform's record of one entry and what the wallet must have done with it."""

    entry: Entry
    funding: str  # cash, ticket or free
    state: str = "pending"  # pending, placed, rejected, refunded, settled
    payout: Decimal = ZERO
    ticket_id: int | None = None


def convert(amount: Decimal, source: str, target: str, rounding: str = ROUND_HALF_UP) -> Decimal:
    if source == target:
        return amount
    return (amount * RATES[(source, target)]).quantize(CENT, rounding=rounding)
