"""What a wallet must tolerate from the platform: unknown fields at every level ignored (contract
2.1), and simultaneous copies of one callback applied once, each copy answered 200.

Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..platform import CallbackEvent, Delivery
from .base import D, Scenario

__all__ = ["ToleranceChecks"]


class ToleranceChecks(Scenario):
    """Unknown fields and concurrent duplicates."""

    def check_unknown_fields(self) -> None:
        tournament = self._tournament("Extras")
        refunded, settled = self._entry(tournament), self._entry(tournament)
        with self._check(
            "unknown_fields",
            "unknown fields at every level of Place Bet, Refund "
            "and Settle are ignored (contract 2.1)",
        ) as check:
            check.place([refunded, settled], _with_unknown_fields(self._place([refunded, settled])))
            refund = check.send(
                "refund",
                CallbackEvent.REFUND_BET,
                _with_unknown_fields(self._refund(tournament, [refunded])),
            )
            check.expect_pass("refund", refund)
            check.books(refunded.total, -refunded.total)
            payout = D("3.00")
            settle = check.send(
                "settle",
                CallbackEvent.SETTLE_BET,
                _with_unknown_fields(self._settle(tournament, [self._result(settled, payout, 1)])),
            )
            check.expect_pass("settle", settle)
            check.books(payout, -settled.total)

    def _deliver_retrying(self, event: CallbackEvent, payload: Any, attempts: int = 4) -> Delivery:
        # Like the platform: a 5xx or timeout means "outcome unknown", so the same payload goes
        # out again; a 4xx or 2xx is final.
        delivery = self.platform.deliver(event, payload)
        for _ in range(attempts - 1):
            if not delivery.outcome_unknown:
                break
            delivery = self.platform.deliver(event, payload)
        return delivery

    def _concurrently(self, event: CallbackEvent, payload: Any) -> list[Delivery]:
        barrier = threading.Barrier(self.concurrency, timeout=30)

        def send(_: int) -> Delivery:
            barrier.wait()  # release all copies at once to maximise the overlap
            return self._deliver_retrying(event, payload)

        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(pool.map(send, range(self.concurrency)))

    def check_concurrent_place_bet(self) -> None:
        tournament = self._tournament("Concurrent")
        entry = self._entry(tournament)
        with self._check(
            "concurrent.place_bet",
            f"{self.concurrency} simultaneous copies of one "
            "Place Bet all answer 200 and debit once",
        ) as check:
            for index, delivery in enumerate(
                self._concurrently(CallbackEvent.PLACE_BET, self._place([entry]))
            ):
                check.result.deliveries.append((f"copy {index + 1}", delivery))
                check.expect_pass(f"copy {index + 1}", delivery)
            check.books(-entry.total, entry.total)
        payout = D("7.00")
        with self._check(
            "concurrent.settle_bet",
            f"{self.concurrency} simultaneous copies of one Settle all answer 200 and pay once",
        ) as check:
            payload = self._settle(tournament, [self._result(entry, payout, 1)])
            for index, delivery in enumerate(self._concurrently(CallbackEvent.SETTLE_BET, payload)):
                check.result.deliveries.append((f"copy {index + 1}", delivery))
                check.expect_pass(f"copy {index + 1}", delivery)
            check.books(payout, -entry.total)


def _with_unknown_fields(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with an unrecognised field added to every object (contract 2.1)."""
    if isinstance(value, Mapping):
        copied = {
            key: item if key in ("secrets",) else _with_unknown_fields(item, depth + 1)
            for key, item in value.items()
        }
        copied[f"x_unknown_{depth}"] = {"note": "ignore me", "nested": [1, "two", None]}
        return copied
    if isinstance(value, list):
        return [_with_unknown_fields(item, depth + 1) for item in value]
    return value
