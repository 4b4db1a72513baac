"""The rules of responsible-gambling limits, as pure arithmetic: rolling windows, the first
limit a request passes and when its window frees room, changes with a cooling-off period, and
exclusions that only lengthen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from ledger.domain.limits import (
    KINDS,
    PERIODS,
    Activity,
    Exclusion,
    Limit,
    cancel_pending,
    change,
    first_refusal,
    lengthen,
    used,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
COOLING = timedelta(hours=24)


def test_a_window_holds_what_happened_after_its_start_up_to_now() -> None:
    activity = [
        Activity(NOW - DAY, deposit=100),  # exactly a day ago: out of the day's window
        Activity(NOW - DAY + timedelta(seconds=1), deposit=20),
        Activity(NOW, deposit=3),
    ]
    assert used("deposit", activity, NOW - DAY) == 23


def test_net_loss_is_stakes_less_payouts_and_refunds_and_winnings_give_room() -> None:
    activity = [Activity(NOW - timedelta(hours=2), stake=500), Activity(NOW, returned=800)]
    assert used("loss", activity, NOW - DAY) == -300
    limit = Limit("loss", "day", "EUR", 400)
    assert first_refusal([limit], activity, NOW, stake=700) is None
    refused = first_refusal([limit], activity, NOW, stake=701)
    assert refused is not None
    assert (refused.kind, refused.used, refused.asked) == ("loss", -300, 701)


def test_a_stake_past_the_limit_is_refused_with_when_the_window_frees_room() -> None:
    limit = Limit("stake", "day", "EUR", 1000)
    activity = [
        Activity(NOW - timedelta(hours=20), stake=600),
        Activity(NOW - timedelta(hours=3), stake=300),
    ]
    assert first_refusal([limit], activity, NOW, stake=100) is None
    refused = first_refusal([limit], activity, NOW, stake=200)
    assert refused is not None
    # The 600 leaves the window 24 hours after it was staked, 4 hours from now.
    assert refused.frees_at == NOW + timedelta(hours=4)
    assert "stake limit per day of 1000 EUR" in refused.message("EUR")


def test_a_request_beyond_the_limit_by_itself_never_fits() -> None:
    refused = first_refusal([Limit("deposit", "week", "EUR", 50)], [], NOW, deposit=51)
    assert refused is not None
    assert refused.frees_at is None


def test_free_entries_and_withdrawals_use_no_limit() -> None:
    limits = [Limit(kind, "day", "EUR", 0) for kind in KINDS]
    assert first_refusal(limits, [], NOW) is None


def test_every_limit_set_applies_and_the_first_passed_is_named() -> None:
    limits = [Limit("stake", "month", "EUR", 10_000), Limit("stake", "day", "EUR", 100)]
    refused = first_refusal(limits, [Activity(NOW - timedelta(days=3), stake=9_950)], NOW, stake=60)
    assert refused is not None
    assert refused.period == "month"


def test_a_first_or_lower_limit_applies_at_once() -> None:
    first = change(None, "stake", "day", "EUR", 500, NOW, COOLING)
    assert first.in_force(NOW) == 500
    lower = change(first, "stake", "day", "EUR", 200, NOW, COOLING)
    assert (lower.in_force(NOW), lower.pending_at) == (200, None)


def test_a_higher_limit_or_a_removal_waits_for_the_cooling_off_then_applies() -> None:
    first = change(None, "loss", "week", "EUR", 500, NOW, COOLING)
    higher = change(first, "loss", "week", "EUR", 900, NOW, COOLING)
    assert higher.in_force(NOW) == 500
    assert higher.in_force(NOW + COOLING - timedelta(microseconds=1)) == 500
    assert higher.in_force(NOW + COOLING) == 900
    removed = change(first, "loss", "week", "EUR", None, NOW, COOLING)
    assert removed.in_force(NOW) == 500
    assert removed.in_force(NOW + COOLING) is None


def test_a_pending_increase_can_be_cancelled_and_a_lower_limit_cancels_it() -> None:
    first = change(None, "deposit", "month", "EUR", 1000, NOW, COOLING)
    higher = change(first, "deposit", "month", "EUR", 5000, NOW, COOLING)
    assert cancel_pending(higher, NOW).in_force(NOW + 2 * COOLING) == 1000
    lower = change(higher, "deposit", "month", "EUR", 800, NOW + timedelta(hours=1), COOLING)
    assert lower.in_force(NOW + 2 * COOLING) == 800


def test_an_increase_after_the_pending_one_took_effect_starts_from_it() -> None:
    first = change(None, "stake", "day", "EUR", 100, NOW, COOLING)
    higher = change(first, "stake", "day", "EUR", 200, NOW, COOLING)
    later = NOW + 2 * COOLING
    again = change(higher, "stake", "day", "EUR", 300, later, COOLING)
    assert (again.in_force(later), again.in_force(later + COOLING)) == (200, 300)


def test_an_active_exclusion_only_lengthens() -> None:
    week = Exclusion(NOW, NOW + timedelta(days=7), "time-out")
    shorter = Exclusion(NOW, NOW + timedelta(days=1), "changed my mind")
    assert lengthen(week, shorter, NOW) == week
    forever = Exclusion(NOW, None, "self-exclusion")
    assert lengthen(week, forever, NOW).until is None
    assert lengthen(forever, week, NOW).until is None
    assert not week.active(NOW + timedelta(days=7))
    assert lengthen(week, shorter, NOW + timedelta(days=8)) == shorter


moments = st.integers(0, 40 * 24 * 60).map(lambda minutes: NOW - timedelta(minutes=minutes))
activities = st.lists(
    st.builds(
        Activity,
        moments,
        st.integers(0, 500),
        st.integers(0, 500),
        st.integers(0, 500),
    ),
    max_size=12,
)


@given(
    activities,
    st.sampled_from(KINDS),
    st.sampled_from(list(PERIODS)),
    st.integers(0, 2000),
    st.integers(1, 800),
)
def test_a_refusal_is_exactly_a_passed_limit_and_names_the_first_instant_with_room(
    activity: list[Activity], kind: str, period: str, amount: int, asked: int
) -> None:
    limit = Limit(kind, period, "EUR", amount)  # type: ignore[arg-type]
    length = PERIODS[period]  # type: ignore[index]
    deposit, stake = (asked, 0) if kind == "deposit" else (0, asked)
    refused = first_refusal([limit], activity, NOW, deposit=deposit, stake=stake)
    now_used = used(limit.kind, activity, NOW - length)
    assert (refused is None) == (now_used + asked <= amount)
    if refused is None or refused.frees_at is None:
        assert refused is None or asked > amount
        return

    def room_at(moment: datetime) -> bool:
        return used(limit.kind, activity, moment - length) + asked <= amount

    assert refused.frees_at > NOW
    assert room_at(refused.frees_at)
    # No earlier instant has room: the window's sum changes only as items leave it.
    for item in activity:
        leaves = item.at + length
        if NOW < leaves < refused.frees_at:
            assert not room_at(leaves)
