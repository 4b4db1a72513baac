"""What a simulated day reports: what was delivered and answered, what moved, and where the
wallet disagreed with the platform's books.

Invariant: a day is ok only with no mismatch and a journal check that passed. Proved by
``tests/kit/test_simulator.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SimulationReport"]


@dataclass
class SimulationReport:
    """What happened, what moved, and where the wallet disagreed with the platform's books."""

    seed: int
    deliveries: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    entries: Counter[str] = field(default_factory=Counter)
    money: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    tickets: Counter[str] = field(default_factory=Counter)
    reconciled: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    # The bets behind balance mismatches, when the wallet's statement can tell.
    diagnosis: list[str] = field(default_factory=list)
    check_ok: bool | None = None
    elapsed: float = 0.0
    # What the clean-ups did: an earlier run's leftovers, then this run's.
    cleaned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.check_ok is True

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "ok": self.ok,
            "deliveries": dict(self.deliveries),
            "statuses": dict(self.statuses),
            "faults": dict(self.faults),
            "entries": dict(self.entries),
            "money": {
                currency: {name: str(amount) for name, amount in moved.items()}
                for currency, moved in sorted(self.money.items())
            },
            "tickets": dict(self.tickets),
            "reconciled": dict(self.reconciled),
            "check_ok": self.check_ok,
            "mismatches": self.mismatches,
            "diagnosis": self.diagnosis,
            "cleaned": self.cleaned,
            "elapsed_s": round(self.elapsed, 2),
        }

    def render(self) -> str:
        def counts(counter: Counter[str]) -> str:
            return ", ".join(f"{name} {count}" for name, count in sorted(counter.items())) or "none"

        lines = [
            f"simulation seed {self.seed} in {self.elapsed:.1f} s",
            f"deliveries: {sum(self.deliveries.values())} ({counts(self.deliveries)})",
            f"answers:    {counts(self.statuses)}",
            f"faults:     {counts(self.faults)}",
            f"entries:    {counts(self.entries)}",
        ]
        for currency, moved in sorted(self.money.items()):
            amounts = ", ".join(f"{name} {amount}" for name, amount in sorted(moved.items()))
            lines.append(f"money {currency}:  {amounts}")
        lines.append(f"tickets:    {counts(self.tickets)}")
        lines.append(f"reconciled: {counts(self.reconciled)}")
        lines.append(f"journal check: {'ok' if self.check_ok else 'FAILED'}")
        lines.extend(self.cleaned)
        lines.append(f"mismatches: {len(self.mismatches)}")
        lines.extend(f"  - {mismatch}" for mismatch in self.mismatches[:50])
        if len(self.mismatches) > 50:
            lines.append(f"  ... and {len(self.mismatches) - 50} more")
        if self.diagnosis:
            lines.append("bets behind the balance mismatches (from the wallet's statement):")
            lines.extend(f"  - {line}" for line in self.diagnosis[:50])
        return "\n".join(lines)
