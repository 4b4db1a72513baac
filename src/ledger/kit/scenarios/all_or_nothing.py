"""All or nothing: a Place Bet, Refund or Settle that cannot be applied whole is refused whole.

Each check sends a request that is good in part, expects a 4xx and no movement, then probes
(black-box) that the good part was not kept either. Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from ..platform import CallbackEvent
from .base import UNAFFORDABLE, D, Scenario

__all__ = ["AllOrNothingChecks"]


class AllOrNothingChecks(Scenario):
    """A request refused in part is refused whole."""

    def check_all_or_nothing_place_bet(self) -> None:
        tournament = self._tournament("Partial")
        affordable = self._entry(tournament, amount=D("1.00"), rake=D("0.00"))
        with self._check(
            "all_or_nothing.place_bet",
            "a multi-entry Place Bet the user can afford "
            "only in part is refused whole: 4xx, nothing debited",
        ) as check:
            too_much = UNAFFORDABLE
            if self.operator is not None:
                too_much = self.operator.balance(self.player.uid, self.currency).available + 1
            unaffordable = self._entry(tournament, amount=too_much, rake=D("0.00"))
            delivery = check.send(
                "place", CallbackEvent.PLACE_BET, self._place([affordable, unaffordable])
            )
            check.expect_rejected("place", delivery)
            check.books(D(0), D(0))
            # Black-box proof that the affordable entry was not kept: refunding it must fail.
            probe = check.send(
                "probe: refund the affordable entry",
                CallbackEvent.REFUND_BET,
                self._refund(tournament, [affordable]),
            )
            if probe.passed:
                check.problem(
                    f"the affordable entry was placed: its refund answered {probe.describe(120)}"
                )
                check.books(affordable.total, -affordable.total)
            else:
                check.books(D(0), D(0))

    def check_all_or_nothing_refund(self) -> None:
        tournament = self._tournament("Refund half")
        entry = self._entry(tournament)
        ghost = self._entry(tournament)
        with self._check(
            "all_or_nothing.refund_bet",
            "a refund naming one unknown bet is refused whole: 4xx, nothing refunded",
        ) as check:
            check.place([entry])
            refund = check.send(
                "refund with an unknown bet",
                CallbackEvent.REFUND_BET,
                self._refund(tournament, [entry, ghost]),
            )
            check.expect_rejected("refund with an unknown bet", refund)
            check.books(D(0), D(0))
            # The known bet must still be open: settling it (zero payout) has to succeed.
            probe = check.send(
                "probe: settle the known bet",
                CallbackEvent.SETTLE_BET,
                self._settle(tournament, [self._result(entry, D("0.00"), 1)]),
            )
            if not probe.passed:
                check.problem(
                    "the known bet is no longer open after the refused refund: "
                    f"settling it answered {probe.describe(120)}"
                )
            check.books(D(0), -entry.total)

    def check_all_or_nothing_settle(self) -> None:
        tournament = self._tournament("Settle half")
        entry = self._entry(tournament)
        ghost = self._entry(tournament)
        payout = D("5.00")
        with self._check(
            "all_or_nothing.settle_bet",
            "a settle naming one unknown bet is refused whole: 4xx, nothing paid",
        ) as check:
            check.place([entry])
            settle = check.send(
                "settle with an unknown bet",
                CallbackEvent.SETTLE_BET,
                self._settle(
                    tournament, [self._result(entry, payout, 1), self._result(ghost, D("0.00"), 2)]
                ),
            )
            check.expect_rejected("settle with an unknown bet", settle)
            check.books(D(0), D(0))
            # The known bet must still be open: refunding it has to succeed.
            probe = check.send(
                "probe: refund the known bet",
                CallbackEvent.REFUND_BET,
                self._refund(tournament, [entry]),
            )
            if not probe.passed:
                check.problem(
                    "the known bet is no longer open after the refused settle: "
                    f"refunding it answered {probe.describe(120)}"
                )
            check.books(entry.total, -entry.total)
