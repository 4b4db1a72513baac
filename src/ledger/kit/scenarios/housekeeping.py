"""Before and after the checks: the wallet reached once, an earlier run's leftovers swept, the
test user funded, and this run's holds and balances taken back out.

Invariant: unless ``--keep``, a run leaves its users' balances as it found them and no hold open
(without the operator API: the holds it knows it left). Proved by ``tests/kit/test_validator.py``
and ``tests/kit/test_kit_clean_up.py``.
"""

from __future__ import annotations

from ...testdata import KIT_PREFIX, is_kit_data
from ..cleanup import Cleaner
from ..platform import CallbackEvent
from .base import FUNDING, ZERO_BOOKS, D, Scenario
from .report import CheckResult

__all__ = ["Housekeeping"]


class Housekeeping(Scenario):
    """Reaching the wallet, sweeping, funding and cleaning up."""

    def _refund_left_open(self) -> None:
        # Without the operator API: close the holds the scenario knows it left; what the user's
        # balance lost or won stays, since the validator cannot see it.
        with self._check(
            "clean_up", "the run closes the holds it left open (balances cannot be seen)"
        ) as check:
            for entry in self._left_open:
                payload = self._refund(entry.tournament, [entry], status="cancelled")
                delivery = check.send("refund", CallbackEvent.REFUND_BET, payload)
                check.expect_pass("refund", delivery)
        self.report.notes.append(
            "no --operator-token: the user's balance is not restored (the validator cannot see "
            "it), and an interrupted run's holds cannot be found; tournaments are named "
            f"{KIT_PREFIX}validator"
        )

    def _sweep(self) -> None:
        if self.operator is None:
            return
        with self._check(
            "setup.clean_up", "an earlier run's leftovers (kit users' holds and balances) are gone"
        ) as check:
            summary = Cleaner(self.platform, self.operator).sweep()
            check.result.notes.append(summary.render())
            for player in (self.player, self.unfunded):
                self._start[player.uid] = self.operator.balances(player.uid)

    def _clean_up(self) -> None:
        if self.keep:
            self.report.notes.append(
                "--keep: this run's users, tournaments, holds and balances are left for "
                "inspection; `ledger validate --clean-up` (or the next run) removes them"
            )
            return
        if self.operator is None:
            self._refund_left_open()
            return
        operator = self.operator
        with self._check(
            "clean_up",
            "the run leaves its users' balances as it found them and no hold open",
        ) as check:
            cleaner = Cleaner(self.platform, operator)
            users = (self.player.uid, self.unfunded.uid)
            holds = [
                hold
                for uid in users
                for hold in operator.holds(user=uid)
                if is_kit_data(uid) or int(hold["pool_uid"]) in self.tournaments
            ]
            summary = cleaner.close(holds)
            for uid in users:
                start = self._start.get(uid, {})
                summary.add(cleaner.empty(uid) if is_kit_data(uid) else cleaner.restore(uid, start))
            check.result.notes.append(summary.render())
            for uid in users:
                after = {
                    cur: books
                    for cur, books in operator.balances(uid).items()
                    if books != ZERO_BOOKS
                }
                before = {
                    cur: books
                    for cur, books in self._start.get(uid, {}).items()
                    if books != ZERO_BOOKS
                }
                if after != before:
                    check.problem(f"{uid}: balances {after}, expected {before}")

    def _reachable(self) -> bool:
        # One refused connection would fail every check the same way: say it once instead. An
        # empty Place Bet is harmless; any answer at all means the wallet is there.
        delivery = self.platform.deliver(CallbackEvent.PLACE_BET, {"bets": []})
        if delivery.status is not None:
            return True
        result = CheckResult("connection", "the wallet accepts connections")
        result.deliveries.append(("connect", delivery))
        result.problems.append(f"cannot reach {self.platform.base_url}: {delivery.error}")
        self.report.checks.append(result)
        if self.on_result is not None:
            self.on_result(result)
        return False

    def _fund(self) -> None:
        if self.operator is None:
            self.report.notes.append(
                "no --operator-token: the validator cannot see the wallet's books, so balances "
                "are not verified and re-sends are judged by status only; user "
                f"{self.player.uid} must hold at least 200.00 {self.currency} available"
            )
            return
        with self._check("setup.funding", "fund the test user through the operator API") as check:
            self._baseline = self.operator.balance(self.player.uid, self.currency)
            self.operator.deposit(
                self.player.uid, self.currency, FUNDING, f"validate-{self.run_id}"
            )
            check.books(FUNDING, D(0))
