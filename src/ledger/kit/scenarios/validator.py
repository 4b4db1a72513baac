"""The validator: every check, by contract area, run in the scenario's order against one wallet.

Invariant: the checks run in one fixed order (the hosted validator's scenario first, then what it
leaves to clients), after the wallet was reached and an earlier run's leftovers swept, and the
clean-up runs even when a check or the operator raised. Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from ..platform import CallbackEvent
from .all_or_nothing import AllOrNothingChecks
from .auth import AuthChecks
from .closing import ClosingChecks
from .housekeeping import Housekeeping
from .placing import PlacingChecks
from .report import Report
from .tolerance import ToleranceChecks

__all__ = ["Validator"]


class Validator(
    PlacingChecks, ClosingChecks, AllOrNothingChecks, ToleranceChecks, AuthChecks, Housekeeping
):
    """Runs every check against one wallet and collects a :class:`Report`."""

    def run(self) -> Report:
        """Run every check in order and return the report."""
        if not self._reachable():
            return self.report
        self._sweep()
        try:
            self._checks()
        finally:
            # Also after an exception or Ctrl-C: what is left otherwise waits for the next run.
            self._clean_up()
        return self.report

    def _checks(self) -> None:
        self._fund()
        t1 = self._tournament("Cup")
        a, b, c = self._entry(t1), self._entry(t1), self._entry(t1)
        self.check_place_bet(a)
        self.check_resend(CallbackEvent.PLACE_BET, "resend.place_bet", self._place([a]))
        self.check_conflicting_duplicate(t1)
        self.check_second_entries(b, c)
        self.check_refund_bet(t1, c)
        self.check_settle(t1, winner=a, loser=b)
        self.check_refund_tournament()
        self.check_free_to_play()
        self.check_unfunded_user()
        self.check_all_or_nothing_place_bet()
        self.check_all_or_nothing_refund()
        self.check_all_or_nothing_settle()
        self.check_unknown_fields()
        self.check_ticket_and_mixed_payout()
        self.check_concurrent_place_bet()
        self.check_token_rules()
