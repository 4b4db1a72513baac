"""Place Bet's checks: a paid entry debited, a conflicting duplicate not processed again, more
entries, a free-to-play entry with no debit, an unfunded user refused with 402 and an error key.

Each check asserts the wallet's answer, and with the operator API the exact movement of the
user's available and held balances (contract 4.3). Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from typing import Any

from ..admin_client import Books
from ..payloads import Entry, Tournament
from ..platform import CallbackEvent
from .base import D, Scenario
from .report import is_error_key

__all__ = ["PlacingChecks"]


class PlacingChecks(Scenario):
    """The checks of Place Bet."""

    def check_place_bet(self, entry: Entry) -> None:
        with self._check(
            "place_bet", "Place Bet: a paid entry answers 200 after debiting amount + rake"
        ) as check:
            check.place([entry])

    def check_conflicting_duplicate(self, tournament: Tournament) -> None:
        with self._check(
            "conflicting_duplicate",
            "a known bet uid re-sent with another amount "
            "is not processed again (200 or 409) and moves no money",
        ) as check:
            entry = self._entry(tournament)
            check.place([entry])
            changed = Entry(
                **{
                    **_fields(entry),
                    "amount": entry.amount * 2,
                    "base_amount": entry.base_amount * 2,
                }
            )
            duplicate = check.send(
                "conflicting re-send", CallbackEvent.PLACE_BET, self._place([changed])
            )
            if not (duplicate.passed or duplicate.status == 409):
                check.problem(
                    f"conflicting re-send: expected 200 or 409, got {duplicate.describe(120)}"
                )
            check.books(D(0), D(0))
            refund = check.send(
                "clean-up refund", CallbackEvent.REFUND_BET, self._refund(tournament, [entry])
            )
            check.expect_pass("clean-up refund", refund)
            check.books(entry.total, -entry.total)

    def check_second_entries(self, loser: Entry, refunded: Entry) -> None:
        with self._check(
            "place_bet.more_entries",
            "two more paid entries in the same tournament "
            "(the zero-payout participant and the one to refund)",
        ) as check:
            for label, entry in (("place", loser), ("place", refunded)):
                delivery = check.send(label, CallbackEvent.PLACE_BET, self._place([entry]))
                check.expect_pass(label, delivery)
                self._keep_secrets(delivery, [entry])
            total = loser.total + refunded.total
            check.books(-total, total)

    def check_free_to_play(self) -> None:
        tournament = self._tournament("Freeroll", buy_in=D("0.0"), rake=D("0.0"))
        entry = self._entry(tournament)
        payload = self._place([entry])
        with self._check(
            "place_bet.free_to_play",
            "a free-to-play entry (amount, base_amount, rake 0.0) answers 200 with no debit",
        ) as check:
            delivery = check.send("place", CallbackEvent.PLACE_BET, payload)
            check.expect_pass("place", delivery)
            check.books(D(0), D(0))
        self.check_resend(CallbackEvent.PLACE_BET, "resend.free_to_play", payload)
        # The one entry the scenario never closes: the clean-up refunds it, even when the
        # validator cannot see the wallet's holds.
        self._left_open.append(entry)

    def check_unfunded_user(self) -> None:
        tournament = self._tournament("Unfunded")
        entry = self._entry(tournament, player=self.unfunded)
        with self._check(
            "unfunded_user",
            "an unfunded user is refused with 402 and a snake_cased "
            "or dotted error key (contract 4.3, item 8)",
        ) as check:
            before = self._unfunded_books()
            delivery = check.send("place", CallbackEvent.PLACE_BET, self._place([entry]))
            if check.expect_rejected("place", delivery, (402,)) and not is_error_key(
                delivery.error_key
            ):
                check.problem(f"error {delivery.error_key!r} is not a snake_cased or dotted key")
            after = self._unfunded_books()
            if before is not None and after is not None:
                check.result.notes.append(f"unfunded user: {after} (expected {before})")
                if after != before:
                    check.problem(f"unfunded user's books moved: {after}, expected {before}")
            check.books(D(0), D(0))

    def _unfunded_books(self) -> Books | None:
        if self.operator is None:
            return None
        return self.operator.balance(self.unfunded.uid, self.currency)


def _fields(entry: Entry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in Entry.__slots__}
