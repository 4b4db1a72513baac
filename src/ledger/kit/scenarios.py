"""``ledger validate``: the platform's verification scenario and the checks it leaves to clients.

Contract section 4.3 describes the hosted validator: one user, one paid tournament settled with a
cash win and a zero payout, the refund paths, a free-to-play entry. It cannot see the ledger, so
item 8 leaves re-sends and unfunded users to the client. This runner does all of that and more
(all-or-nothing requests, conflicting duplicates, unknown fields, mixed payouts, concurrent
duplicates, token checks) against any wallet URL. With the operator API of our own server it also
verifies the user's available and held balances after every step.

Every run uses fresh random bet and tournament ids, so it can be repeated against the same wallet.
"""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from ..errors import LedgerError
from ..testdata import KIT_PREFIX, is_kit_data
from ..tokens import sign_token
from . import payloads
from .admin_client import Books, Operator
from .cleanup import Cleaner
from .payloads import Entry, Player, Result, Tournament
from .platform import CallbackEvent, Delivery, Platform, sign_ticket

__all__ = ["CheckResult", "Report", "Validator", "is_error_key"]

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


def is_error_key(value: object) -> bool:
    """A snake_cased (``insufficient_funds``) or dotted key (``user.insufficient_funds``)."""
    if not isinstance(value, str) or not value:
        return False
    return all(
        part and all(ch.islower() or ch.isdigit() or ch == "_" for ch in part)
        for part in value.split(".")
    )


@dataclass
class CheckResult:
    """One check, reported like the hosted validator: pass or fail with the actual answers."""

    name: str
    description: str
    deliveries: list[tuple[str, Delivery]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "description": self.description,
            "deliveries": [
                {
                    "label": label,
                    "event": delivery.event.value,
                    "request_id": delivery.request_id,
                    "status": delivery.status,
                    "body": delivery.body,
                    "error": delivery.error,
                    "elapsed_ms": round(delivery.elapsed * 1000, 1),
                }
                for label, delivery in self.deliveries
            ],
            "problems": self.problems,
            "notes": self.notes,
        }

    def render(self) -> str:
        lines = [f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.description}"]
        lines.extend(
            f"        {label}: {delivery.describe()}" for label, delivery in self.deliveries
        )
        lines.extend(f"        books: {note}" for note in self.notes)
        lines.extend(f"     !  {problem}" for problem in self.problems)
        return "\n".join(lines)


@dataclass
class Report:
    url: str
    checks: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[str]:
        return [check.name for check in self.checks if not check.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "passed": self.passed,
            "total": len(self.checks),
            "failed": self.failed,
            "notes": self.notes,
            "checks": [check.to_dict() for check in self.checks],
        }

    def summary(self) -> str:
        passed = sum(check.passed for check in self.checks)
        verdict = "all checks passed" if self.passed else "failed: " + ", ".join(self.failed)
        return f"{passed}/{len(self.checks)} checks passed against {self.url}: {verdict}"


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


class _Check:
    def __init__(self, result: CheckResult, validator: Validator) -> None:
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


class Validator:
    """Runs every check against one wallet and collects a :class:`Report`."""

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

    # --- checks -------------------------------------------------------------------------------

    @contextmanager
    def _check(self, name: str, description: str) -> Iterator[_Check]:
        result = CheckResult(name, description)
        check = _Check(result, self)
        try:
            yield check
        except LedgerError as exc:  # the operator API failed: the check cannot be judged
            check.problem(f"{exc.key}: {exc.message}")
        self.report.checks.append(result)
        if self.on_result is not None:
            self.on_result(result)

    def _verify_books(self, check: _Check, available: Decimal, held: Decimal) -> None:
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

    # --- clean-up -----------------------------------------------------------------------------

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

    def check_place_bet(self, entry: Entry) -> None:
        with self._check(
            "place_bet", "Place Bet: a paid entry answers 200 after debiting amount + rake"
        ) as check:
            check.place([entry])

    def check_resend(self, event: CallbackEvent, name: str, payload: Any) -> None:
        with self._check(
            name, "an identical re-send answers 200 and moves no money (contract 4.3, item 8)"
        ) as check:
            delivery = check.send("re-send", event, payload)
            check.expect_pass("re-send", delivery)
            check.books(D(0), D(0))

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

    def check_token_rules(self) -> None:
        secret, client = self.platform.secret, self.client

        def bearer(token: str, name: str = client) -> str:
            return f"Bearer {name} {token}"

        place_cases: list[tuple[str, str, str | None]] = [
            ("auth.missing", "a Place Bet without Authorization", None),
            (
                "auth.wrong_secret",
                "a token signed with another secret",
                bearer(sign_token(secret + "-wrong", role="user")),
            ),
            (
                "auth.none_algorithm",
                "an unsigned token (alg none)",
                bearer(sign_token(secret, role="user", algorithm="none")),
            ),
            ("auth.expired", "an expired token", bearer(sign_token(secret, role="user", ttl=-600))),
            (
                "auth.wrong_client",
                "a valid token for another client name",
                bearer(sign_token(secret, role="user"), f"{client}-other"),
            ),
            (
                "auth.not_bearer",
                "a token without the 'Bearer <client>' prefix",
                sign_token(secret, role="user"),
            ),
        ]
        tournament = self._tournament("Auth")
        for name, what, header in place_cases:
            entry = self._entry(tournament)
            with self._check(
                name, f"{what} is refused with 401 or 403 and debits nothing"
            ) as check:
                delivery = check.send(
                    "place", CallbackEvent.PLACE_BET, self._place([entry]), authorization=header
                )
                check.expect_rejected("place", delivery, AUTH_STATUSES)
                check.books(D(0), D(0))
        ghost = self._entry(tournament)
        admin_cases: list[tuple[str, str, CallbackEvent, str]] = [
            (
                "auth.user_role_on_refund",
                "a user-role token on Refund Bet",
                CallbackEvent.REFUND_BET,
                bearer(sign_token(secret, role="user")),
            ),
            (
                "auth.user_role_on_settle",
                "a user-role token on Settle",
                CallbackEvent.SETTLE_BET,
                bearer(sign_token(secret, role="user")),
            ),
            (
                "auth.admin_without_subject",
                "an admin token without id, uid or sub",
                CallbackEvent.REFUND_BET,
                bearer(sign_token(secret, role="admin", subject=None)),
            ),
        ]
        for name, what, event, header in admin_cases:
            payload = (
                self._refund(tournament, [ghost])
                if event is CallbackEvent.REFUND_BET
                else self._settle(tournament, [self._result(ghost, D("1.00"), 1)])
            )
            with self._check(name, f"{what} is refused with 401 or 403") as check:
                delivery = check.send("deliver", event, payload, authorization=header)
                check.expect_rejected("deliver", delivery, AUTH_STATUSES)
                check.books(D(0), D(0))


def _fields(entry: Entry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in Entry.__slots__}
