"""A limit's window read as hourly sums and the movements of the hour its start splits holds
exactly what the movements after its start add up to: no rounding to the hour; and the migration
that adds the hours sums the movements a database already holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, select, text

import ledger
from ledger.domain.limits import PERIODS, Activity, Period, Use, uses
from ledger.stores.limit_hours import hour_of, window_use
from ledger.stores.limit_rows import utc_at
from ledger.stores.limit_tables import limit_hours
from ledger.stores.migrations import upgrade
from ledger.stores.postgres import normalize_url
from ledger.stores.sqlite import SqliteStore

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


@pytest.fixture(params=["sqlite", "postgres"])
def url_at_0021(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at revision 0021 whose limited user u1 has movements in two hours."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/old.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    sqlite = url.startswith("sqlite")
    engine = SqliteStore(url, migrate=False).engine if sqlite else create_engine(normalize_url(url))
    wide = 10**30  # beyond 64 bits: text on SQLite
    rows = [
        (NOW - timedelta(hours=2, minutes=50), 100, 0, 0),
        (NOW - timedelta(hours=2, minutes=10), 0, wide, 0),
        (NOW - timedelta(hours=2, minutes=10), 0, 25, 0),
        (NOW - timedelta(minutes=5), 0, 0, 7),
    ]
    try:
        with engine.begin() as connection:
            upgrade(connection, "0021")
            for at, deposit, stake, returned in rows:
                connection.execute(
                    text(
                        "INSERT INTO limit_activity (user_uid, currency, at, deposit, stake, "
                        "returned) VALUES ('u1', 'EUR', :at, :deposit, :stake, :returned)"
                    ),
                    {
                        "at": at.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else at,
                        "deposit": deposit,
                        "stake": str(stake) if sqlite and stake > 2**63 else stake,
                        "returned": returned,
                    },
                )
    finally:
        engine.dispose()
    return url


def test_the_migration_sums_the_movements_already_recorded_per_hour_exactly(
    url_at_0021: str,
) -> None:
    with (
        ledger.open_ledger(url_at_0021, migrate=True) as book,
        book.store.engine.connect() as connection,  # type: ignore[attr-defined]
    ):
        found = {
            utc_at(row.hour): (row.deposit, row.stake, row.returned)
            for row in connection.execute(select(limit_hours))
        }
    assert found == {
        hour_of(NOW - timedelta(hours=2, minutes=50)): (100, 0, 0),
        hour_of(NOW - timedelta(hours=2, minutes=10)): (0, 10**30 + 25, 0),
        hour_of(NOW - timedelta(minutes=5)): (0, 0, 7),
    }
