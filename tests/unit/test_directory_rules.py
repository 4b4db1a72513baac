"""The directory's pure rules: what a descriptive field is stored as, and the latest value wins."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger.directory import Seen, TournamentSeen, UserSeen, end_time, label, merge


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("Sunday Cup", "Sunday Cup"),
        ("x" * 300, "x" * 255),
        ("a\x00b", None),
        ("", None),
        (42, None),
        (None, None),
        ({"name": "x"}, None),
    ],
)
def test_a_label_is_a_bounded_nul_free_string_or_nothing(value: object, stored: str | None) -> None:
    assert label(value) == stored


@pytest.mark.parametrize(
    ("value", "moment"),
    [
        ("2026-11-22T18:30:00Z", datetime(2026, 11, 22, 18, 30, tzinfo=UTC)),
        ("2026-11-22T18:30:00+02:00", datetime(2026, 11, 22, 16, 30, tzinfo=UTC)),
        ("2026-11-22 18:30:00", datetime(2026, 11, 22, 18, 30, tzinfo=UTC)),
        ("tomorrow", None),
        ("2026-02-30T00:00:00Z", None),
        (1732300000, None),
        ("9" * 100, None),
    ],
)
def test_an_estimated_end_time_is_iso_8601_in_utc_or_ignored(
    value: object, moment: datetime | None
) -> None:
    assert end_time(value) == moment


def test_merge_keeps_one_record_per_uid_with_the_latest_value_of_each_field() -> None:
    first = Seen(
        (TournamentSeen(7, name="Cup", category="public"), TournamentSeen(3, name="B")),
        (UserSeen("u1", name="Old", client="acme"),),
    )
    second = Seen(
        (TournamentSeen(7, name="Sunday Cup", status="closed"),),
        (UserSeen("u1", name=None, client="other"), UserSeen("u0")),
    )
    merged = merge([first, second])
    assert merged.tournaments == (
        TournamentSeen(3, name="B"),
        TournamentSeen(7, name="Sunday Cup", category="public", status="closed"),
    )
    assert merged.users == (UserSeen("u0"), UserSeen("u1", name="Old", client="other"))
    assert not merge([])
