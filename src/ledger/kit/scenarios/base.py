"""What every check of the validation scenario stands on: the run's state, fresh ids, the
payloads of its tournaments and entries, a check's context (its deliveries, its problems, the
books verified after each step), and the re-send check that follows every callback.

Invariant: every run draws fresh bet and tournament ids from the system's entropy and marks its
tournaments and unfunded user as test data, so runs against one wallet never collide; with the
operator API, each check is judged on the balance movements it caused alone. Proved by
``tests/kit/test_validator.py``.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Final

from ...errors import LedgerError
from ...testdata import KIT_PREFIX
from .. import payloads
from ..admin_client import Books, Operator
from ..payloads import Entry, Player, Result, Tournament
from ..platform import CallbackEvent, Delivery, Platform, sign_ticket
from .report import CheckResult, Report

__all__ = ["CONCURRENCY", "Check", "Scenario"]

D = Decimal
BUY_IN: Final = D("10.00")
RAKE: Final = D("1.00")
STAKE: Final = BUY_IN + RAKE
# Enough for every debit of one run (about 160.00) with room to spare.
FUNDING: Final = D("500.00")
# Without the operator API the validator cannot know the balance; an entry this large is taken
# to be beyond any test user's means.
UNAFFORDABLE: Final = D("1000000000.00")
CONCURRENCY: Final = 8
ZERO_BOOKS: Final = Books(D(0), D(0))
AUTH_STATUSES: Final = (401, 403)


class Check:
    """One check in progress: what it sent, what it found wrong, the books after each step."""

    def __init__(self, result: CheckResult, validator: Scenario) -> None:
        self.result = result
        self.validator = validator

    def send(self, label: str, event: CallbackEvent, payload: Any, **options: Any) -> Delivery:
        delivery = self.validator.platform.deliver(event, payload, **options)
        self.result.deliveries.append((label, delivery))
        return delivery

    def problem(self, text: str) -> None:
        self.result.problems.append(text)

    def expect_pass(self, label: str, delivery: Delivery) -> bool:
        if delivery.passed:
            return True
        self.problem(f"{label}: expected 200 without 'error', got {delivery.describe(120)}")
        return False

    def expect_rejected(
        self, label: str, delivery: Delivery, statuses: Sequence[int] | None = None
    ) -> bool:
        """A 4xx (or one of ``statuses``) with a JSON ``{error: ...}`` body."""
        status = delivery.status
        wanted = (
            status is not None and status in statuses
            if statuses is not None
            else status is not None and 400 <= status < 500
        )
        if not wanted:
            expected = "/".join(map(str, statuses)) if statuses else "4xx"
            self.problem(f"{label}: expected {expected}, got {delivery.describe(120)}")
            return False
        if delivery.error_key is None:
            self.problem(f"{label}: the rejection has no JSON 'error' key: {delivery.body[:120]}")
            return False
        return True

    def books(self, available: Decimal, held: Decimal) -> None:
        """The user's balance moved by exactly these amounts since the previous check."""
        self.validator._verify_books(self, available, held)

    def place(self, entries: Sequence[Entry], payload: Any = None) -> Delivery:
        """Place paid ``entries`` (``payload`` instead of their plain Place Bet, when given),
        expecting 200 and their total moved from the user's available balance to held."""
        validator = self.validator
        body = validator._place(entries) if payload is None else payload
        delivery = self.send("place", CallbackEvent.PLACE_BET, body)
        self.expect_pass("place", delivery)
        validator._keep_secrets(delivery, entries)
        total = sum((entry.total for entry in entries), D(0))
        self.books(-total, total)
        return delivery


class Scenario:
    """The run's state and the pieces every check is built from; :class:`.Validator` adds the
    checks, by contract area, and runs them."""

    def __init__(
        self,
        platform: Platform,
        *,
        user: str,
        currency: str = "EUR",
        unfunded_user: str | None = None,
        operator: Operator | None = None,
        concurrency: int = CONCURRENCY,
        on_result: Callable[[CheckResult], None] | None = None,
        keep: bool = False,
    ) -> None:
        self.platform = platform
        self.client = platform.client_name
        self.currency = currency.upper()
        self.operator = operator
        self.concurrency = concurrency
        self.on_result = on_result
        self.run_id = uuid.uuid4().hex[:8]
        self.keep = keep
        # Fresh ids per run, from the system's entropy: re-running against the same wallet must
        # not collide with an earlier run's bets.
        self._random = random.SystemRandom()
        self.player = Player(user, f"validator {user}", self.currency)
        self.unfunded = Player(
            unfunded_user or f"{KIT_PREFIX}validate-unfunded-{self.run_id}",
            "validator unfunded",
            self.currency,
        )
        self.secrets: dict[int, Mapping[str, Any]] = {}
        self.report = Report(platform.base_url)
        self._baseline: Books | None = None
        self._lock = threading.Lock()
        # The tournaments this run created, and its users' balances before it wrote anything:
        # what the clean-up closes and restores.
        self.tournaments: set[int] = set()
        self._start: dict[str, dict[str, Books]] = {}
        self._left_open: list[Entry] = []

    # --- ids and payload pieces ----------------------------------------------------------------

    def _bet_uid(self) -> int:
        return self._random.randrange(10**12, 9 * 10**15)

    def _tournament(
        self,
        label: str,
        *,
        buy_in: Decimal = BUY_IN,
        rake: Decimal = RAKE,
        distribution: str = "normal",
    ) -> Tournament:
        tournament = Tournament(
            uid=self._random.randrange(10**8, 2 * 10**9),
            # Marked as test data: the directory and the reports can leave it out.
            name=f"{KIT_PREFIX}validator {label} {self.run_id}",
            currency=self.currency,
            buy_in=buy_in,
            rake=rake,
            distribution=distribution,
            overdraw=D("100.00") if buy_in else D("50.00"),
            guaranteed=bool(buy_in),
        )
        self.tournaments.add(tournament.uid)
        return tournament

    def _entry(
        self,
        tournament: Tournament,
        *,
        amount: Decimal | None = None,
        rake: Decimal | None = None,
        player: Player | None = None,
        ticket: bool = False,
    ) -> Entry:
        amount = tournament.buy_in if amount is None else amount
        rake = tournament.rake if rake is None else rake
        player = player or self.player
        bet_uid = self._bet_uid()
        token = None
        if ticket:
            token = sign_ticket(
                self.platform.secret,
                ticket_id=self._random.randrange(1, 10**9),
                user=player.uid,
                currency=player.currency,
                buy_in=amount,
                tournament_id=tournament.uid,
            )
        return Entry(
            bet_uid=bet_uid,
            player=player,
            tournament=tournament,
            amount=amount,
            rake=rake,
            base_amount=amount,
            base_rake=rake,
            # Verification payloads: the tournament id, a pipe, then a UUID (contract 2.4).
            uuid=f"{tournament.uid}|{uuid.uuid4()}",
            ticket=token,
        )

    def _place(self, entries: Sequence[Entry]) -> dict[str, Any]:
        return payloads.place_bet(self.client, entries)

    def _refund(
        self, tournament: Tournament, entries: Sequence[Entry], status: str = "waiting"
    ) -> dict[str, Any]:
        return payloads.refund_bet(self.client, [(tournament, status, entries)], self.secrets)

    def _settle(self, tournament: Tournament, results: Sequence[Result]) -> dict[str, Any]:
        return payloads.settle_bet(self.client, tournament, results, self.secrets)

    def _result(self, entry: Entry, payout: Decimal, rank: int, **extra: Any) -> Result:
        return Result(entry, payout, payout, rank, D(100 - rank) + D("0.5"), **extra)

    def _keep_secrets(self, delivery: Delivery, entries: Sequence[Entry]) -> None:
        # Place Bet may answer opaque secrets; the platform stores them per bet and echoes them.
        data = delivery.data
        if delivery.passed and isinstance(data, dict) and isinstance(data.get("secrets"), dict):
            for entry in entries:
                self.secrets[entry.bet_uid] = data["secrets"]

    # --- a check -----------------------------------------------------------------------------

    @contextmanager
    def _check(self, name: str, description: str) -> Iterator[Check]:
        result = CheckResult(name, description)
        check = Check(result, self)
        try:
            yield check
        except LedgerError as exc:  # the operator API failed: the check cannot be judged
            check.problem(f"{exc.key}: {exc.message}")
        self.report.checks.append(result)
        if self.on_result is not None:
            self.on_result(result)

    def _verify_books(self, check: Check, available: Decimal, held: Decimal) -> None:
        if self.operator is None:
            return
        actual = self.operator.balance(self.player.uid, self.currency)
        base = self._baseline or Books(D(0), D(0))
        expected = Books(base.available + available, base.held + held)
        check.result.notes.append(f"{actual} (expected {expected})")
        if actual != expected:
            check.problem(f"books: {actual}, expected {expected}")
        # Judge each check on its own movements, not on an earlier check's mistake.
        self._baseline = actual

    def check_resend(self, event: CallbackEvent, name: str, payload: Any) -> None:
        with self._check(
            name, "an identical re-send answers 200 and moves no money (contract 4.3, item 8)"
        ) as check:
            delivery = check.send("re-send", event, payload)
            check.expect_pass("re-send", delivery)
            check.books(D(0), D(0))
