"""How the simulated platform delivers a callback: with a fault drawn for it (a re-send, concurrent
copies, a lost answer, a short timeout), and re-sent until the answer is definitive, as contract
section 7.2 says.

Invariant: a delivery returns a definitive answer (2xx or 4xx) unless it ran out of attempts;
copies of one callback answered differently, or a re-send after success that fails, are
mismatches in the report. Proved by ``tests/kit/test_simulator.py`` (a day with faults).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..platform import CallbackEvent, Delivery
from .model import FAULTS, MAX_ATTEMPTS
from .state import DayState

__all__ = ["Deliveries"]


class Deliveries(DayState):
    """Delivering callbacks, faults included."""

    def _fault(self) -> str | None:
        if not self.config.faults:
            return None
        draw = self.rng.random()
        for name, probability in FAULTS:
            if draw < probability:
                return name
            draw -= probability
        return None

    def _send(
        self, event: CallbackEvent, payload: Any, *, timeout: float | None = None
    ) -> Delivery:
        delivery = self.platform.deliver(event, payload, timeout=timeout)
        self.report.deliveries[event.name.lower()] += 1
        self.report.statuses[str(delivery.status) if delivery.status else "no answer"] += 1
        return delivery

    def _deliver(self, event: CallbackEvent, payload: Any, what: str) -> Delivery:
        """Deliver until the answer is definitive, with this delivery's fault (if any)."""
        fault = self._fault()
        if fault:
            self.report.faults[fault] += 1
        if fault == "concurrent":
            copies = self.config.concurrency
            with ThreadPoolExecutor(copies) as pool:
                answers = list(pool.map(lambda _: self._retrying(event, payload), range(copies)))
            verdicts = {(answer.passed, answer.status) for answer in answers}
            if len(verdicts) > 1:
                described = "; ".join(answer.describe(80) for answer in answers)
                self.report.mismatches.append(
                    f"{what}: concurrent copies were answered differently: {described}"
                )
            # The platform keeps a success if any copy succeeded.
            return next((answer for answer in answers if answer.passed), answers[0])
        first_timeout = 0.002 if fault == "short_timeout" else None
        delivery = self._retrying(event, payload, first_timeout=first_timeout, lose=fault == "lost")
        if fault == "resend" and delivery.passed:
            again = self._retrying(event, payload)
            if not again.passed:
                self.report.mismatches.append(
                    f"{what}: an identical re-send after success answered {again.describe(120)}"
                )
        return delivery

    def _retrying(
        self,
        event: CallbackEvent,
        payload: Any,
        *,
        first_timeout: float | None = None,
        lose: bool = False,
    ) -> Delivery:
        delivery = self._send(event, payload, timeout=first_timeout)
        if lose:
            # The wallet answered, but the platform never saw it: to the platform this is a
            # timeout with the outcome unknown, and the same payload goes out again.
            delivery = Delivery(event, delivery.request_id, None, "", delivery.elapsed, "lost")
        for attempt in range(1, MAX_ATTEMPTS):
            if not delivery.outcome_unknown:
                break
            self.report.faults["retries"] += 1
            time.sleep(min(0.5, 0.01 * 2**attempt))
            delivery = self._send(event, payload)
        return delivery
