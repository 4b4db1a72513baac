"""A hypothesis state machine per store, checked against an independent model after every step.

Random deposits, withdrawals, paid, ticket and free entries in several tournaments and two
currencies (EUR, scale 2; JPY, scale 0), refunds, tournament refunds, settles with zero and
non-zero payouts, identical re-sends, re-sends mixing new and processed bets, conflicting
duplicates, unknown bets, and failures injected in the middle of a unit of work. After every
step the journal's invariants hold (``check()``) and every balance equals the model's.

Example counts come from a profile: ``LEDGER_HYPOTHESIS_PROFILE=ci`` (the default, bounded for
CI) or ``deep`` (many more examples, for a nightly or a local soak).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import ledger
from conftest import PostgresCluster
from ledger.money import render
from support import payloads as P
from support.books import FailingStore, raises_key

PROFILE = os.environ.get("LEDGER_HYPOTHESIS_PROFILE", "ci")
# (examples, steps per example) per store and profile.
COUNTS = {
    "ci": {"sqlite": (60, 25), "postgres": (15, 25)},
    "deep": {"sqlite": (1000, 50), "postgres": (200, 50)},
}
for _profile, _stores in COUNTS.items():
    for _store, (_examples, _steps) in _stores.items():
        settings.register_profile(
            f"stateful-{_store}-{_profile}",
            max_examples=_examples,
            stateful_step_count=_steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )

USERS = ("u1", "u2", "u3")
POOLS = (1, 2, 3)
SCALES = {"EUR": 2, "JPY": 0}
UNKNOWN = 10**12  # bet uids from here on are never placed


def decimal(minor: int, currency: str) -> Decimal:
    return Decimal(render(minor, SCALES[currency]))


@dataclass(frozen=True)
class ModelBet:
    user: str
    pool: int
    currency: str
    amount: int
    rake: int
    funding: str
    state: str = "placed"
    payout: int | None = None

    @property
    def total(self) -> int:
        return self.amount + self.rake


@dataclass(frozen=True)
class NewEntry:
    uid: int
    user: str
    pool: int
    currency: str
    amount: int
    rake: int
    ticket: bool


class Model:
    """The ledger as plain dicts: what every balance and bet must be."""

    def __init__(self) -> None:
        self.available: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.held: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.bets: dict[int, ModelBet] = {}
        self.movements: dict[str, tuple[str, str, str, int]] = {}

    def move(self, kind: str, user: str, currency: str, amount: int, ref: str) -> str | None:
        """A deposit or withdrawal: the error key it must fail with, or None (model updated)."""
        # Deposits and withdrawals share one namespace of references.
        key = ref
        if key in self.movements:
            same = self.movements[key] == (kind, user, currency, amount)
            return None if same else "reference.conflict"
        if kind == "withdrawal":
            if self.available[(user, currency)] < amount:
                return "user.insufficient_funds"
            self.available[(user, currency)] -= amount
        else:
            self.available[(user, currency)] += amount
        self.movements[key] = (kind, user, currency, amount)
        return None

    def place(self, entries: list[NewEntry]) -> str | None:
        new: dict[int, ModelBet] = {}
        for e in entries:
            existing = new.get(e.uid) or self.bets.get(e.uid)
            if existing is not None:
                same = (existing.user, existing.pool, existing.currency) == (
                    e.user,
                    e.pool,
                    e.currency,
                ) and (existing.amount, existing.rake) == (e.amount, e.rake)
                if existing.state == "placed" and not same:
                    return "bet.conflict"
                continue
            funding = "ticket" if e.ticket else "free" if e.amount + e.rake == 0 else "cash"
            new[e.uid] = ModelBet(e.user, e.pool, e.currency, e.amount, e.rake, funding)
        need: defaultdict[tuple[str, str], int] = defaultdict(int)
        for bet in new.values():
            if bet.funding == "cash":
                need[(bet.user, bet.currency)] += bet.total
        if any(self.available[key] < total for key, total in need.items()):
            return "user.insufficient_funds"
        for key, total in need.items():
            self.available[key] -= total
        for uid, bet in new.items():
            if bet.funding != "free":
                self.held[(bet.user, bet.currency)] += bet.total
            self.bets[uid] = bet
        return None

    def refund(self, items: list[tuple[int, str, int]]) -> str | None:
        after = dict(self.bets)
        for uid, user, pool in items:
            bet = after.get(uid)
            if bet is None:
                return "bet.not_found"
            if bet.state == "refunded":
                continue
            if bet.state == "settled":
                return "bet.already_settled"
            if (bet.user, bet.pool) != (user, pool):
                return "bet.conflict"
            after[uid] = replace(bet, state="refunded")
        for uid, bet in after.items():
            if self.bets[uid].state == "placed" and bet.state == "refunded":
                key = (bet.user, bet.currency)
                if bet.funding != "free":
                    self.held[key] -= bet.total
                if bet.funding == "cash":
                    self.available[key] += bet.total
        self.bets = after
        return None

    def settle(self, items: list[tuple[int, str, int, int]]) -> str | None:
        after = dict(self.bets)
        for uid, user, pool, payout in items:
            bet = after.get(uid)
            if bet is None:
                return "bet.not_found"
            if bet.state == "refunded":
                return "bet.already_refunded"
            if bet.state == "settled":
                if bet.payout == payout:
                    continue
                return "bet.conflict"
            if (bet.user, bet.pool) != (user, pool):
                return "bet.conflict"
            after[uid] = replace(bet, state="settled", payout=payout)
        for uid, bet in after.items():
            if self.bets[uid].state == "placed" and bet.state == "settled":
                key = (bet.user, bet.currency)
                if bet.funding != "free":
                    self.held[key] -= bet.total
                self.available[key] += bet.payout or 0
        self.bets = after
        return None


amounts = st.integers(min_value=0, max_value=3000)
rakes = st.one_of(st.just(0), st.integers(min_value=0, max_value=300))


class LedgerMachine(RuleBasedStateMachine):
    """Drives a real ledger and the model with the same requests."""

    open_book: Callable[[], tuple[ledger.Ledger, Callable[[], None]]]

    def __init__(self) -> None:
        super().__init__()
        self.book, self._dispose = type(self).open_book()
        self.model = Model()
        self.next_uid = 1
        self.last_place: dict[str, Any] | None = None
        self.last_close: tuple[str, dict[str, Any]] | None = None

    def teardown(self) -> None:
        try:
            for uid, bet in self.model.bets.items():
                view = self.book.bet(uid)
                assert view is not None, uid
                assert (view.state, view.funding, view.user) == (bet.state, bet.funding, bet.user)
        finally:
            self.book.close()
            self._dispose()

    # --- helpers -------------------------------------------------------------------------------

    def _expect(self, expected: str | None, call: Callable[[], object]) -> object:
        """Run ``call``: it must succeed when the model expects no error, else fail with it."""
        if expected is None:
            return call()
        with raises_key(expected):
            call()
        return None

    def _fresh_uid(self) -> int:
        self.next_uid += 1
        return self.next_uid

    def _draw_entries(self, data: st.DataObject, count: int) -> list[NewEntry]:
        entries = []
        for _ in range(count):
            kind = data.draw(st.sampled_from(["paid", "paid", "ticket", "free"]))
            currency = data.draw(st.sampled_from(sorted(SCALES)))
            amount, rake = (0, 0) if kind == "free" else (data.draw(amounts), data.draw(rakes))
            entries.append(
                NewEntry(
                    uid=self._fresh_uid(),
                    user=data.draw(st.sampled_from(USERS)),
                    pool=data.draw(st.sampled_from(POOLS)),
                    currency=currency,
                    amount=amount,
                    rake=rake,
                    ticket=kind == "ticket",
                )
            )
        return entries

    @staticmethod
    def _place_body(entries: list[NewEntry]) -> dict[str, Any]:
        return P.place(
            *(
                P.entry(
                    e.uid,
                    user=e.user,
                    pool=e.pool,
                    amount=decimal(e.amount, e.currency),
                    rake=decimal(e.rake, e.currency),
                    currency=e.currency,
                    ticket="jwt.ticket" if e.ticket else None,
                )
                for e in entries
            )
        )

    def _as_entry(self, uid: int) -> NewEntry:
        bet = self.model.bets[uid]
        return NewEntry(
            uid, bet.user, bet.pool, bet.currency, bet.amount, bet.rake, bet.funding == "ticket"
        )

    def _close_body(self, items: Sequence[tuple[int, str, int, int | None]]) -> dict[str, Any]:
        """A refund (payout None) or settle body, grouped by pool in order of first appearance."""
        grouped: dict[int, list[dict[str, Any]]] = {}
        for uid, user, pool, payout in items:
            bet = self.model.bets.get(uid)
            currency = bet.currency if bet else "EUR"
            fields: dict[str, Any] = {}
            if payout is not None:
                fields["payout"] = render(payout, SCALES[currency])
            grouped.setdefault(pool, []).append(P.participant(uid, user, currency, **fields))
        return P.pools(*(P.pool_of(pool, parts) for pool, parts in grouped.items()))

    def _draw_close_items(
        self, data: st.DataObject, with_payout: bool
    ) -> list[tuple[int, str, int, int | None]]:
        known = sorted(self.model.bets)
        picks = data.draw(
            st.lists(
                st.sampled_from(known) if known else st.just(UNKNOWN),
                min_size=1,
                max_size=4,
                unique=True,
            )
        )
        if data.draw(st.integers(0, 9)) == 0:
            picks.append(UNKNOWN + self.next_uid)
        items: list[tuple[int, str, int, int | None]] = []
        for uid in picks:
            bet = self.model.bets.get(uid)
            user, pool = (bet.user, bet.pool) if bet else ("u1", 1)
            if bet is not None and data.draw(st.integers(0, 19)) == 0:
                user = "u1" if user != "u1" else "u2"  # names someone else: a conflict
            payout = None
            if with_payout:
                payout = data.draw(st.sampled_from([0, 0, 1, 250, 1000, 123456]))
            items.append((uid, user, pool, payout))
        # Keep the model's order equal to the request's: pools in order of first appearance.
        order = list(dict.fromkeys(pool for _, _, pool, _ in items))
        return sorted(items, key=lambda item: order.index(item[2]))

    # --- rules ---------------------------------------------------------------------------------

    @rule(
        user=st.sampled_from(USERS),
        currency=st.sampled_from(sorted(SCALES)),
        amount=st.integers(min_value=1, max_value=20000),
        ref=st.sampled_from(["r1", "r2", "r3", "fresh"]),
        withdraw=st.booleans(),
    )
    def move(self, user: str, currency: str, amount: int, ref: str, withdraw: bool) -> None:
        if ref == "fresh":
            ref = f"f{self._fresh_uid()}"
        kind = "withdrawal" if withdraw else "deposit"
        expected = self.model.move(kind, user, currency, amount, ref)
        call = self.book.withdraw if withdraw else self.book.deposit
        self._expect(expected, lambda: call(user, currency, decimal(amount, currency), ref))

    @rule(data=st.data(), count=st.integers(min_value=1, max_value=4))
    def place_new(self, data: st.DataObject, count: int) -> None:
        entries = self._draw_entries(data, count)
        body = self._place_body(entries)
        expected = self.model.place(entries)
        if self._expect(expected, lambda: self.book.place_bets(body)) is not None:
            self.last_place = body

    @rule(data=st.data())
    def place_mixing_new_and_known(self, data: st.DataObject) -> None:
        known = sorted(self.model.bets)
        if not known:
            return
        old = [
            self._as_entry(uid) for uid in data.draw(st.lists(st.sampled_from(known), max_size=3))
        ]
        entries = old + self._draw_entries(data, data.draw(st.integers(0, 2)))
        entries = data.draw(st.permutations(entries)) if entries else entries
        if not entries:
            return
        expected = self.model.place(entries)
        self._expect(expected, lambda: self.book.place_bets(self._place_body(entries)))

    @rule(data=st.data())
    def place_conflicting_duplicate(self, data: st.DataObject) -> None:
        known = sorted(self.model.bets)
        if not known:
            return
        original = self._as_entry(data.draw(st.sampled_from(known)))
        change = data.draw(st.sampled_from(["user", "pool", "amount", "currency"]))
        if change == "user":
            other = replace(original, user="u1" if original.user != "u1" else "u2")
        elif change == "pool":
            other = replace(original, pool=original.pool + 100)
        elif change == "amount":
            other = replace(original, amount=original.amount + 1)
        else:
            other = replace(original, currency="JPY" if original.currency == "EUR" else "EUR")
        expected = self.model.place([other])
        self._expect(expected, lambda: self.book.place_bets(self._place_body([other])))

    @rule()
    def resend_last_place(self) -> None:
        if self.last_place is None:
            return
        before = self.book.check().postings
        result = self.book.place_bets(self.last_place)
        assert isinstance(result, ledger.PlacedBets)
        assert result.placed == []
        assert self.book.check().postings == before

    @rule(data=st.data())
    def refund_bets(self, data: st.DataObject) -> None:
        items = self._draw_close_items(data, with_payout=False)
        body = self._close_body(items)
        expected = self.model.refund([(uid, user, pool) for uid, user, pool, _ in items])
        if self._expect(expected, lambda: self.book.refund(body)) is not None:
            self.last_close = ("refund", body)

    @rule(pool=st.sampled_from(POOLS))
    def refund_tournament(self, pool: int) -> None:
        items = [
            (uid, bet.user, bet.pool, None)
            for uid, bet in sorted(self.model.bets.items())
            if bet.pool == pool and bet.state != "settled"
        ]
        if not items:
            return
        body = self._close_body(items)
        expected = self.model.refund([(uid, user, p) for uid, user, p, _ in items])
        assert expected is None
        closed = self._expect(expected, lambda: self.book.refund(body))
        assert isinstance(closed, ledger.ClosedBets)
        self.last_close = ("refund", body)

    @rule(data=st.data())
    def settle_bets(self, data: st.DataObject) -> None:
        items = self._draw_close_items(data, with_payout=True)
        body = self._close_body(items)
        expected = self.model.settle([(u, user, p, pay or 0) for u, user, p, pay in items])
        if self._expect(expected, lambda: self.book.settle(body)) is not None:
            self.last_close = ("settle", body)

    @rule()
    def resend_last_close(self) -> None:
        if self.last_close is None:
            return
        kind, body = self.last_close
        before = self.book.check().postings
        call = self.book.refund if kind == "refund" else self.book.settle
        result = call(body)
        assert result.closed == []
        assert self.book.check().postings == before

    @rule(data=st.data())
    def failure_mid_unit_of_work_writes_nothing(self, data: st.DataObject) -> None:
        broken = ledger.Ledger(FailingStore(self.book.store))
        placed = [uid for uid, bet in self.model.bets.items() if bet.state == "placed"]
        settle_one: bool = data.draw(st.booleans())
        if placed and settle_one:
            uid = data.draw(st.sampled_from(sorted(placed)))
            bet = self.model.bets[uid]
            body = self._close_body([(uid, bet.user, bet.pool, 100)])
            call: Callable[[], object] = lambda: broken.settle(body)  # noqa: E731
        else:
            entry = replace(self._draw_entries(data, 1)[0], amount=0, rake=0)
            self.next_uid -= 1  # this uid was never written: it may be used again
            body = self._place_body([entry])
            call = lambda: broken.place_bets(body)  # noqa: E731
        before = self.book.check()
        with pytest.raises(RuntimeError, match="injected"):
            call()
        after = self.book.check()
        assert (after.transactions, after.postings, after.bets, after.accounts) == (
            before.transactions,
            before.postings,
            before.bets,
            before.accounts,
        )

    # --- after every step --------------------------------------------------------------------

    @invariant()
    def books_balance_and_match_the_model(self) -> None:
        report = self.book.check()
        assert report.ok, report.problems
        for user in USERS:
            found = {row.currency: (row.available, row.held) for row in self.book.balance(user)}
            for currency in SCALES:
                key = (user, currency)
                expected = (
                    decimal(self.model.available[key], currency),
                    decimal(self.model.held[key], currency),
                )
                assert found.get(currency, (Decimal(0), Decimal(0))) == expected, (key, found)


def _run(name: str, opener: Callable[[], tuple[ledger.Ledger, Callable[[], None]]]) -> None:
    machine = type(f"LedgerMachine_{name}", (LedgerMachine,), {"open_book": staticmethod(opener)})
    run_state_machine_as_test(machine, settings=settings.get_profile(f"stateful-{name}-{PROFILE}"))


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_sqlite_ledger_matches_the_model_after_every_step() -> None:
    def opener() -> tuple[ledger.Ledger, Callable[[], None]]:
        directory = tempfile.mkdtemp(prefix="ledger-stateful-")
        book = ledger.open_ledger(f"sqlite:///{directory}/ledger.db")
        return book, lambda: shutil.rmtree(directory, ignore_errors=True)

    _run("sqlite", opener)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_postgres_ledger_matches_the_model_after_every_step(
    postgres_cluster: PostgresCluster,
) -> None:
    template = postgres_cluster.migrated_template()

    def opener() -> tuple[ledger.Ledger, Callable[[], None]]:
        # A copy of a migrated template per example: a fresh database in tens of milliseconds.
        name = postgres_cluster.create_database(template)
        book = ledger.open_ledger(postgres_cluster.url(name))
        return book, lambda: postgres_cluster.drop_database(name)

    _run("postgres", opener)
