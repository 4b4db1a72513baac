"""A limit's window read as hourly sums and the movements of the hour its start splits holds
exactly what the movements after its start add up to: no rounding to the hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from ledger.domain.limits import PERIODS, Activity, Period, Use, uses
from ledger.stores.limit_hours import hour_of, window_use

NOW = datetime(2026, 11, 27, 12, 34, 56, 789_000, tzinfo=UTC)

# Moments up to 31 days back, to the microsecond, with ties and exact hour boundaries likely.
moments = st.one_of(
    st.integers(0, 31 * 24 * 3600 * 10**6).map(lambda us: NOW - timedelta(microseconds=us)),
    st.sampled_from([NOW - length for length in PERIODS.values()]),
    st.sampled_from([hour_of(NOW - length) for length in PERIODS.values()]),
    st.sampled_from([hour_of(NOW - length) + timedelta(hours=1) for length in PERIODS.values()]),
)
movements = st.lists(
    st.builds(Activity, moments, st.integers(0, 10**20), st.integers(0, 900), st.integers(0, 900)),
    max_size=40,
)


def summed_by_hour(activity: list[Activity]) -> list[tuple[datetime, int, int, int]]:
    hours: dict[datetime, Use] = {}
    for item in activity:
        hours[hour_of(item.at)] = hours.get(hour_of(item.at), Use()).plus(item)
    return [(hour, *use) for hour, use in hours.items()]


@given(movements, st.sampled_from([NOW, NOW.replace(minute=0, second=0, microsecond=0)]))
def test_hourly_sums_and_the_split_hours_movements_are_the_window_exactly(
    activity: list[Activity], now: datetime
) -> None:
    periods: list[Period] = list(PERIODS)
    rows = [(item.at, item.deposit, item.stake, item.returned) for item in activity]
    assert window_use(summed_by_hour(activity), rows, now, periods) == uses(activity, now)


def test_a_movement_leaves_the_window_at_its_own_instant_not_at_its_hours_end() -> None:
    staked = Activity(NOW - timedelta(hours=23, minutes=59), stake=500)
    hours, rows = summed_by_hour([staked]), [(staked.at, 0, 500, 0)]
    assert window_use(hours, rows, NOW, ["day"])["day"].stake == 500
    later = NOW + timedelta(minutes=1)
    assert window_use(hours, rows, later, ["day"])["day"].stake == 0
