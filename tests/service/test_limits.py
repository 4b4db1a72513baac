"""Responsible-gambling limits and exclusions through the library, enforced in the writing
transaction: deposits and entries past a limit in force are refused whole, refunds and settles
never; changes follow the cooling-off rule. On SQLite and Postgres, with an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

import ledger
from ledger.stores.limit_rows import SqlLimits
from support import payloads as P
from support.books import balance, raises_key

START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class Clock:
    """An injected clock that tests move forward."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def limited(store_url: str, clock: Clock) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(store_url, clock=clock) as opened:
        yield opened


def stake(book: ledger.Ledger, bet: int, amount: str = "10.00", user: str = "u1") -> None:
    book.place_bets(P.place(P.entry(bet, user, amount=Decimal(amount), rake=Decimal("0"))))


def test_a_user_without_limits_bets_and_deposits_as_before(limited: ledger.Ledger) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    stake(limited, 1, "90.00")
    assert balance(limited, "u1") == (Decimal("10.00"), Decimal("90.00"))
    assert limited.limits("u1") == []


def test_a_stake_past_the_limit_is_refused_whole_and_says_when_room_frees(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "stake", "day", "25.00", by="user")
    stake(limited, 1, "20.00")
    clock.advance(hours=1)
    with raises_key("user.stake_limit_reached") as info:
        limited.place_bets(
            P.place(
                P.entry(2, amount=Decimal("1.00"), rake=Decimal("0")),
                P.entry(3, amount=Decimal("5.00"), rake=Decimal("0")),
            )
        )
    assert info.value.status == 403
    assert "stake limit per day" in info.value.message
    assert (START + timedelta(hours=24)).isoformat() in info.value.message
    assert balance(limited, "u1") == (Decimal("80.00"), Decimal("20.00"))
    stake(limited, 4, "5.00")  # exactly up to the limit
    clock.advance(hours=23)  # the first stake leaves the window
    stake(limited, 5, "20.00")
    [view] = limited.limits("u1")
    assert (view.used, view.room) == (Decimal("25.00"), Decimal("0.00"))


def test_a_re_sent_accepted_place_bet_stays_accepted_past_the_limit(
    limited: ledger.Ledger,
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "stake", "day", "10.00", by="user")
    body = P.place(P.entry(1, amount=Decimal("10.00"), rake=Decimal("0")))
    first = limited.place_bets(body)
    again = limited.place_bets(body)
    assert first.placed == [1]
    assert again.unchanged == [1]


def test_rake_counts_in_the_stake_and_tickets_count_nothing(limited: ledger.Ledger) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "stake", "week", "11.00", by="user")
    limited.place_bets(P.place(P.entry(1, amount=Decimal("10.00"), rake=Decimal("1.00"))))
    limited.place_bets(P.place(P.entry(2, ticket="t-1")))
    with raises_key("user.stake_limit_reached"):
        limited.place_bets(P.place(P.entry(3, amount=Decimal("0.01"), rake=Decimal("0"))))


def test_a_deposit_past_the_deposit_limit_is_refused_and_nothing_moves(
    limited: ledger.Ledger,
) -> None:
    limited.set_limit("new-user", "EUR", "deposit", "month", "1000.00", by="operator")
    limited.deposit("new-user", "EUR", "900.00", "d1")
    with raises_key("user.deposit_limit_reached"):
        limited.deposit("new-user", "EUR", "100.01", "d2")
    assert balance(limited, "new-user") == (Decimal("900.00"), Decimal("0.00"))
    limited.withdraw("new-user", "EUR", "900.00", "w1")  # withdrawals give no room back
    with raises_key("user.deposit_limit_reached"):
        limited.deposit("new-user", "EUR", "100.01", "d3")


def test_net_loss_counts_payouts_and_refunds_back_and_they_are_never_refused(
    limited: ledger.Ledger,
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "loss", "day", "15.00", by="user")
    stake(limited, 1, "10.00")
    stake(limited, 2, "5.00")
    with raises_key("user.loss_limit_reached"):
        stake(limited, 3, "1.00")
    limited.exclude("u1", reason="self-exclusion", by="user")
    limited.refund(P.refund(7, 1))  # never refused, even excluded
    limited.settle(P.settle(7, (2, "12.00")))
    [view] = limited.limits("u1")
    assert view.used == Decimal("-7.00")  # 15 staked, 10 refunded, 12 paid out


def test_an_increase_waits_for_the_cooling_off_and_a_decrease_applies_at_once(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "stake", "week", "10.00", by="user")
    raised = limited.set_limit("u1", "EUR", "stake", "week", "50.00", by="user")
    assert raised.amount == Decimal("10.00")
    assert raised.pending == Decimal("50.00")
    assert raised.pending_at == START + timedelta(hours=24)
    with raises_key("user.stake_limit_reached"):
        stake(limited, 1, "11.00")
    clock.advance(hours=24)
    stake(limited, 2, "11.00")
    lowered = limited.set_limit("u1", "EUR", "stake", "week", "5.00", by="user")
    assert (lowered.amount, lowered.pending_at) == (Decimal("5.00"), None)
    with raises_key("user.stake_limit_reached"):
        stake(limited, 3, "1.00")


def test_a_removal_waits_and_a_pending_change_can_be_cancelled(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.set_limit("u1", "EUR", "stake", "day", "1.00", by="user")
    removing = limited.remove_limit("u1", "EUR", "stake", "day", by="user")
    assert removing.amount == Decimal("1.00")
    assert removing.pending is None
    assert removing.pending_at is not None
    kept = limited.cancel_pending("u1", "EUR", "stake", "day", by="user")
    assert kept is not None
    assert kept.pending_at is None
    clock.advance(hours=25)
    with raises_key("user.stake_limit_reached"):
        stake(limited, 1, "2.00")
    limited.remove_limit("u1", "EUR", "stake", "day", by="user")
    clock.advance(hours=24)
    stake(limited, 2, "2.00")


def test_an_excluded_user_can_neither_bet_nor_deposit_but_withdraws(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.exclude("u1", START + timedelta(days=2), reason="time-out", by="user")
    with raises_key("user.excluded"):
        stake(limited, 1)
    with raises_key("user.excluded"):
        limited.deposit("u1", "EUR", "1.00", "d2")
    limited.withdraw("u1", "EUR", "50.00", "w1")
    # Shortening through this path leaves it as it was.
    kept = limited.exclude("u1", START + timedelta(hours=1), reason="shorter", by="user")
    assert kept.until == START + timedelta(days=2)
    clock.advance(days=2)
    stake(limited, 2)
    [view] = limited.exclusions("u1")
    assert not view.active


def test_in_a_group_commit_batch_a_refused_place_bet_refuses_no_other(
    limited: ledger.Ledger,
) -> None:
    for user in ("u1", "u2"):
        limited.deposit(user, "EUR", "100.00", f"d-{user}")
    limited.set_limit("u1", "EUR", "stake", "day", "5.00", by="user")
    futures = [
        limited.submit_place_bets(P.place(P.entry(1, "u1", amount=Decimal("10.00")))),
        limited.submit_place_bets(P.place(P.entry(2, "u2", amount=Decimal("10.00")))),
        limited.submit_place_bets(P.place(P.entry(3, "u1", amount=Decimal("4.00"),
                                                  rake=Decimal("0")))),
    ]  # fmt: skip
    with raises_key("user.stake_limit_reached"):
        futures[0].result()
    assert futures[1].result().placed == [2]
    assert futures[2].result().placed == [3]


def test_limit_changes_and_exclusions_appear_in_the_event_feed(limited: ledger.Ledger) -> None:
    limited.set_limit("u1", "EUR", "stake", "day", "5.00", by="user")
    limited.set_limit("u1", "EUR", "stake", "day", "6.00", by="user")
    limited.exclude("u1", reason="self-exclusion", by="user")
    found = [
        (e.type, e.amount if e.currency else "-", e.reference)
        for e in limited.events(0, limit=10).events
    ]
    pending = (START + timedelta(hours=24)).isoformat()
    assert found == [
        ("limit.changed", "5.00", "stake/day"),
        ("limit.changed", "6.00", f"stake/day@{pending}"),
        ("user.excluded", "-", "indefinite"),
    ]


def test_bad_limit_requests_are_refused_with_nothing_changed(limited: ledger.Ledger) -> None:
    with raises_key("request.invalid"):
        limited.set_limit("u1", "EUR", "spend", "day", "1", by="user")
    with raises_key("request.invalid"):
        limited.set_limit("u1", "EUR", "stake", "year", "1", by="user")
    with raises_key("amount.invalid"):
        limited.set_limit("u1", "EUR", "stake", "day", "-1", by="user")
    with raises_key("request.invalid"):
        limited.exclude("u1", START - timedelta(hours=1), reason="past", by="user")
    assert limited.limits("u1") == []
    assert limited.exclusions("u1") == []


def test_a_huge_set_based_settle_records_the_payouts_of_limited_users(
    limited: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_based: list[tuple[str, int]] = []
    recorded = SqlLimits.record_set_returns

    def counted(self: SqlLimits, key: str, after_posting: int) -> None:
        set_based.append((key, after_posting))
        recorded(self, key, after_posting)

    monkeypatch.setattr(SqlLimits, "record_set_returns", counted)
    limited.set_limit("lim", "EUR", "loss", "day", "10.00", by="user")
    entries = [P.entry(1, "lim", ticket="t-1")]
    entries += [P.entry(uid, "u1", ticket="t-1") for uid in range(2, 1_202)]
    limited.place_bets(P.place(*entries))
    payouts = [(1, "4.00", "lim")] + [(uid, "1.00", "u1") for uid in range(2, 1_202)]
    closed = limited.settle(P.settle(7, *payouts))
    assert len(closed.closed) == 1_201
    [view] = limited.limits("lim")
    assert view.used == Decimal("-4.00")
    assert view.room == Decimal("14.00")
    assert limited.limits("u1") == []
    assert len(set_based) == 1  # closed set-based, in SQL


def test_only_an_administrator_lifts_an_exclusion_early_with_a_reason_recorded(
    limited: ledger.Ledger,
) -> None:
    limited.deposit("u1", "EUR", "100.00", "d1")
    limited.exclude("u1", reason="self-exclusion", by="user")
    assert limited.lift_exclusion("u1", reason="entered in error", by="admin:alice") == 1
    stake(limited, 1)
    found = [(view.reason, view.by, view.active) for view in limited.exclusions("u1")]
    assert found == [
        ("self-exclusion", "user", False),
        ("lifted: entered in error", "admin:alice", False),
    ]
    types = [event.type for event in limited.events(0, limit=10).events]
    assert types[-2:] == ["user.exclusion_ended", "bet.placed"]
    assert limited.lift_exclusion("u1", reason="again", by="admin:alice") == 0


def test_pruning_drops_what_no_window_reads_and_leaves_every_window_as_it_was(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "1000.00", reference="fund")
    limited.set_limit("u1", "EUR", "stake", "month", "500.00", by="user")
    limited.set_limit("u1", "EUR", "stake", "day", "400.00", by="user")
    for bet in range(1, 41):  # one entry every 19 hours: across hours, days and the month
        stake(limited, bet, "5.00")
        clock.advance(hours=19)
    before = {(view.period, view.used) for view in limited.limits("u1")}
    # Staked 19 hours apart up to 760 hours: the last 37 entries are in the month's window.
    assert before == {("day", Decimal("5.00")), ("month", Decimal("185.00"))}
    gone = limited.prune_limit_activity(batch=7)
    assert gone > 0
    assert {(view.period, view.used) for view in limited.limits("u1")} == before
    assert limited.prune_limit_activity() == 0
    # The month's room is still enforced to the minor unit after pruning.
    with raises_key("user.stake_limit_reached") as refused:
        stake(limited, 100, "315.01")
    assert "per month" in str(refused.value)
    stake(limited, 101, "315.00")


def test_a_first_limit_counts_the_last_30_days_already_in_the_journal(
    limited: ledger.Ledger, clock: Clock
) -> None:
    limited.deposit("u1", "EUR", "70.00", reference="old")  # 31 days before the limit
    clock.advance(days=31)
    limited.deposit("u1", "EUR", "60.00", reference="yesterday")
    stake(limited, 1, "25.00")
    clock.advance(hours=20)
    limited.set_limit("u1", "EUR", "deposit", "day", "100.00", by="user")
    limited.set_limit("u1", "EUR", "stake", "week", "30.00", by="user")
    views = {(view.kind, view.period): view.used for view in limited.limits("u1")}
    assert views == {("deposit", "day"): Decimal("60.00"), ("stake", "week"): Decimal("25.00")}
    with raises_key("user.deposit_limit_reached"):
        limited.deposit("u1", "EUR", "40.01", reference="today")
    limited.deposit("u1", "EUR", "40.00", reference="today")
    with raises_key("user.stake_limit_reached"):
        stake(limited, 2, "5.01")
    clock.advance(hours=4)  # the 60.00 left the day's window
    limited.deposit("u1", "EUR", "60.00", reference="later")
