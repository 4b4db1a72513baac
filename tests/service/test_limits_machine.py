"""A state machine over deposits, entries, refunds, settles, withdrawals, limit changes,
exclusions and the passage of time (an injected clock), against a model of the rules: no
accepted entry or deposit ever took a user past a limit in force at that instant, every refusal
names the limit the model finds passed, refunds and settles are never refused, and the books
balance. On SQLite and Postgres (each example with users of its own on one database)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import ledger
from ledger.domain.limits import (
    KINDS,
    PERIODS,
    Activity,
    Exclusion,
    Limit,
    LimitKind,
    Period,
    change,
    first_refusal,
    lengthen,
)
from support import payloads as P

START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COOLING = timedelta(hours=24)
USERS = ("a", "b")
_examples = itertools.count(1)


def euros(cents: int) -> Decimal:
    return Decimal(cents) / 100


class UserModel:
    """What the model knows of one user in EUR."""

    def __init__(self) -> None:
        self.available = 0
        self.limits: dict[tuple[LimitKind, Period], Limit] = {}
        self.exclusion: Exclusion | None = None
        # A first limit brings the user's movements of the last 30 days: all count.
        self.activity: list[Activity] = []

    def happened(self, item: Activity) -> None:
        self.activity.append(item)

    def refusal(self, now: datetime, *, deposit: int = 0, stake: int = 0) -> str | None:
        if self.exclusion is not None and self.exclusion.active(now):
            return "user.excluded"
        ordered = sorted(
            self.limits.values(), key=lambda item: (KINDS.index(item.kind), PERIODS[item.period])
        )
        found = first_refusal(ordered, self.activity, now, deposit=deposit, stake=stake)
        return None if found is None else f"user.{found.kind}_limit_reached"


class LimitsMachine(RuleBasedStateMachine):
    url: str = ""
    book: ledger.Ledger

    def __init__(self) -> None:
        super().__init__()
        self.now = START
        self.example = next(_examples)
        self.users = {user: UserModel() for user in USERS}
        self.open: dict[int, tuple[str, int]] = {}  # bet uid -> (user, stake)
        self.bets = itertools.count(self.example * 10_000)
        self.references = itertools.count()
        type(self).book.store.clock = lambda: self.now

    def uid(self, user: str) -> str:
        return f"m{self.example}-{user}"

    @initialize(
        kind=st.sampled_from(KINDS),
        period=st.sampled_from(list(PERIODS)),
        cents=st.integers(0, 3_000),
    )
    def fund(self, kind: LimitKind, period: Period, cents: int) -> None:
        for user in USERS:
            self.deposit(user, 50_000)
        self.set_limit("a", kind, period, cents)  # one user limited from the start

    def expect(self, expected: str | None, action: object) -> bool:
        """Run ``action``; its refusal key must be ``expected``; whether it was accepted."""
        found: str | None = None
        try:
            action()  # type: ignore[operator]
        except ledger.LedgerError as error:
            found = error.key
        event(found or "accepted")
        assert found == expected, f"answered {found}, the model expected {expected}"
        return found is None

    @rule(user=st.sampled_from(USERS), cents=st.integers(1, 5_000))
    def deposit(self, user: str, cents: int) -> None:
        model = self.users[user]
        expected = model.refusal(self.now, deposit=cents)
        reference = f"{self.uid(user)}-d{next(self.references)}"
        if self.expect(
            expected, lambda: self.book.deposit(self.uid(user), "EUR", euros(cents), reference)
        ):
            model.available += cents
            model.happened(Activity(self.now, deposit=cents))

    @rule(user=st.sampled_from(USERS), cents=st.integers(1, 2_000), ticket=st.booleans())
    def bet(self, user: str, cents: int, ticket: bool) -> None:
        model = self.users[user]
        stake = 0 if ticket else cents
        if stake > model.available:
            expected: str | None = "user.insufficient_funds"
        else:
            expected = model.refusal(self.now, stake=stake)
            if expected is not None and expected != "user.excluded" and not stake:
                expected = None
        uid = next(self.bets)
        body = P.place(
            P.entry(uid, self.uid(user), amount=euros(cents), rake=Decimal(0),
                    ticket="t-1" if ticket else None)
        )  # fmt: skip
        if self.expect(expected, lambda: self.book.place_bets(body)):
            model.available -= stake
            if stake:
                model.happened(Activity(self.now, stake=stake))
            self.open[uid] = (user, stake)

    @rule(user=st.sampled_from(USERS), cents=st.integers(1, 600))
    def small_bet(self, user: str, cents: int) -> None:
        self.bet(user, cents, ticket=False)

    @precondition(lambda self: self.open)
    @rule(data=st.data(), settle=st.booleans(), payout=st.integers(0, 10_000))
    def close(self, data: st.DataObject, settle: bool, payout: int) -> None:
        uid = data.draw(st.sampled_from(sorted(self.open)))
        user, stake = self.open.pop(uid)
        model = self.users[user]
        if settle:
            self.book.settle(P.settle(7, (uid, str(euros(payout)), self.uid(user))))
            returned = payout
        else:
            self.book.refund(P.refund(7, (uid, self.uid(user))))
            returned = stake
        model.available += returned
        if returned:
            model.happened(Activity(self.now, returned=returned))

    @rule(
        user=st.sampled_from(USERS),
        kind=st.sampled_from(KINDS),
        period=st.sampled_from(list(PERIODS)),
        cents=st.none() | st.integers(0, 4_000),
    )
    def set_limit(self, user: str, kind: LimitKind, period: Period, cents: int | None) -> None:
        model = self.users[user]
        current = model.limits.get((kind, period))
        if cents is None:
            self.book.remove_limit(self.uid(user), "EUR", kind, period, by="user")
            if current is None:
                return
        else:
            self.book.set_limit(self.uid(user), "EUR", kind, period, euros(cents), by="user")
        model.limits[(kind, period)] = change(
            current, kind, period, "EUR", cents, self.now, COOLING
        )

    @rule(user=st.sampled_from(USERS), hours=st.integers(1, 8))
    def exclude(self, user: str, hours: int) -> None:
        model = self.users[user]
        until = self.now + timedelta(hours=hours)
        self.book.exclude(self.uid(user), until, reason="time-out", by="user")
        model.exclusion = lengthen(
            model.exclusion, Exclusion(self.now, until, "time-out"), self.now
        )

    @rule(minutes=st.integers(1, 3 * 24 * 60))
    def advance(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    def teardown(self) -> None:
        for user, model in self.users.items():
            found = self.book.balance(self.uid(user), "EUR")
            available = found[0].available if found else Decimal(0)
            assert available == euros(model.available)
        assert self.book.check().ok


@pytest.fixture
def machine_book(store_url: str) -> Iterator[ledger.Ledger]:
    # Without group commit: each write its own transaction at once, no batching wait.
    with ledger.open_ledger(store_url, limit_cooling_off=COOLING, group_commit=False) as book:
        yield book


def test_no_accepted_entry_or_deposit_passes_a_limit_in_force_and_closes_always_pay(
    machine_book: ledger.Ledger,
) -> None:
    LimitsMachine.book = machine_book
    runner = LimitsMachine.TestCase
    runner.settings = settings(
        max_examples=20,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    runner().runTest()
