"""Refund's and Settle's checks: Refund Bet, Settle with a cash win and a zero payout, Refund
Tournament, an entry paid by a ticket and a mixed-payout settle; each followed by its re-send.

Each check asserts the wallet's answer, and with the operator API the exact movement of the
user's balances (contract 2.5, 4.3). Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from .. import payloads
from ..payloads import Entry, Tournament
from ..platform import CallbackEvent
from .base import D, Scenario

__all__ = ["ClosingChecks"]


class ClosingChecks(Scenario):
    """The checks of Refund Bet, Refund Tournament and Settle."""

    def check_refund_bet(self, tournament: Tournament, entry: Entry) -> None:
        payload = self._refund(tournament, [entry])
        with self._check(
            "refund_bet", "Refund Bet answers 200 after crediting amount + rake"
        ) as check:
            delivery = check.send("refund", CallbackEvent.REFUND_BET, payload)
            check.expect_pass("refund", delivery)
            check.books(entry.total, -entry.total)
        self.check_resend(CallbackEvent.REFUND_BET, "resend.refund_bet", payload)

    def check_settle(self, tournament: Tournament, *, winner: Entry, loser: Entry) -> None:
        payout = D("25.00")
        payload = self._settle(
            tournament, [self._result(winner, payout, 1), self._result(loser, D("0.00"), 2)]
        )
        with self._check(
            "settle_bet",
            "Settle answers 200 after crediting the winner's payout and nothing to the zero payout",
        ) as check:
            delivery = check.send("settle", CallbackEvent.SETTLE_BET, payload)
            check.expect_pass("settle", delivery)
            check.books(payout, -(winner.total + loser.total))
        self.check_resend(CallbackEvent.SETTLE_BET, "resend.settle_bet", payload)

    def check_refund_tournament(self) -> None:
        tournament = self._tournament("Cancelled")
        entries = [self._entry(tournament), self._entry(tournament)]
        total = sum((entry.total for entry in entries), D(0))
        with self._check(
            "place_bet.multi_entry",
            "one Place Bet with two entries answers 200 after debiting both",
        ) as check:
            check.place(entries)
        payload = payloads.refund_tournament(self.client, tournament, entries, self.secrets)
        with self._check(
            "refund_tournament",
            "Refund Tournament answers 200 after refunding every bet exactly once",
        ) as check:
            delivery = check.send("refund", CallbackEvent.REFUND_TOURNAMENT, payload)
            check.expect_pass("refund", delivery)
            check.books(total, -total)
        self.check_resend(CallbackEvent.REFUND_TOURNAMENT, "resend.refund_tournament", payload)

    def check_ticket_and_mixed_payout(self) -> None:
        tournament = self._tournament("Mixed", distribution="mixed")
        winner, qualifier = self._entry(tournament), self._entry(tournament)
        ticketed = self._entry(tournament, ticket=True)
        with self._check(
            "place_bet.ticket", "an entry paid by a ticket answers 200 and debits the user nothing"
        ) as check:
            delivery = check.send("place", CallbackEvent.PLACE_BET, self._place([ticketed]))
            check.expect_pass("place", delivery)
            self._keep_secrets(delivery, [ticketed])
            # Our ledger holds a ticket entry's value for the user, funded by the house
            # (DESIGN section 4): nothing leaves the available balance.
            check.books(D(0), ticketed.total)
        payout = D("30.00")
        with self._check(
            "settle_bet.mixed",
            "a mixed-payout settle credits the cash prize only; "
            "ticket and manual prizes pay 0.00 (contract 2.5, item 5)",
        ) as check:
            check.place([winner, qualifier])
            results = [
                self._result(winner, payout, 1, payout_text="30.00 EUR"),
                self._result(
                    qualifier,
                    D("0.00"),
                    2,
                    payout_text="Seat in the Sunday Final",
                    qualifier_ticket={
                        "tournamentId": tournament.uid + 1,
                        "buyIn": "10.00",
                        "currency": self.currency,
                    },
                ),
                self._result(ticketed, D("0.00"), 3, payout_text="Team jersey (manual prize)"),
            ]
            settle = check.send(
                "settle", CallbackEvent.SETTLE_BET, self._settle(tournament, results)
            )
            check.expect_pass("settle", settle)
            check.books(payout, -(winner.total + qualifier.total + ticketed.total))
