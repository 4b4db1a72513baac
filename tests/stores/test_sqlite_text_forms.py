"""The texts the write path builds by hand are the ones the library calls it replaced built."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from ledger.stores.bet_rows import json_object
from ledger.stores.sqlite import SqliteDialect


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 25, 9, 30, 1, 123456, tzinfo=UTC),
        datetime(2026, 11, 25, 9, 30, 1, tzinfo=UTC),  # isoformat alone would drop the .000000
        datetime(2026, 1, 2, 3, 4, 5, 6),  # naive
        datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # strftime's unpadded year
        datetime(9999, 12, 31, 23, 59, 59, 999999),
    ],
)
def test_a_sqlite_timestamp_is_the_text_strftime_wrote(moment: datetime) -> None:
    dialect = SqliteDialect.__new__(SqliteDialect)  # timestamp() needs no engine
    assert dialect.timestamp(moment) == moment.strftime("%Y-%m-%d %H:%M:%S.%f")


@pytest.mark.parametrize(
    "secrets",
    [
        {},
        {"ledger_ref": "0190f3a1b2c3d4e5f6a7b8c9"},
        {'quote"back\\slash': "tab\tnew\nline\u2028é€𝄞\x00"},
        {"a": "1", "b": "2"},
        {"n": 1, "none": None, "list": [1, "x"]},  # not all text: json.dumps itself
    ],
)
def test_stored_secrets_are_the_text_json_dumps_wrote(secrets: dict[str, object]) -> None:
    assert json_object(secrets) == json.dumps(secrets)
