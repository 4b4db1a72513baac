"""The canonical bytes of docs/integrity.md, byte for byte: what an independent implementation
must produce, and the fast per-column encoder agrees with the plain one on every kind of value."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ledger.integrity.canonical import (
    GENESIS,
    RECORD_PREFIX,
    micros,
    record_bytes,
    record_hash,
    row_bytes,
    row_encoder,
)
from ledger.integrity.merkle import leaf_hash

AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_values_are_tagged_length_prefixed_decimal_integers_utf8_texts_and_microseconds() -> None:
    assert row_bytes(b"T", [None]) == b"T\x00"
    assert row_bytes(b"T", [-12]) == b"T\x01\x00\x00\x00\x03-12"
    assert row_bytes(b"T", ["ü"]) == b"T\x02\x00\x00\x00\x02\xc3\xbc"
    assert micros(AT) == 1767323045678901
    assert row_bytes(b"T", [AT]) == b"T\x01\x00\x00\x00\x101767323045678901"


def test_the_column_encoder_reads_what_drivers_hand_back_as_the_plain_encoding_does() -> None:
    encode = row_encoder(b"P", "itmim")
    wide = 10**30
    expected = row_bytes(b"P", [wide, "user:ü", AT, None, None])
    # SQLite: wide amounts as text, timestamps as zoneless text; Postgres: Decimal, datetime.
    assert encode([str(wide), "user:ü", "2026-01-02 03:04:05.678901", None, None]) == expected
    assert encode([Decimal(wide), "user:ü", AT, None, None]) == expected


def test_a_record_is_its_prefix_number_hashes_and_time_and_its_hash_a_merkle_leaf() -> None:
    content = bytes(range(32))
    raw = record_bytes(1, GENESIS, content, AT)
    assert raw == RECORD_PREFIX + (1).to_bytes(8, "big") + GENESIS + content + (
        1767323045678901
    ).to_bytes(8, "big", signed=True)
    assert len(raw) == 17 + 8 + 32 + 32 + 8
    assert record_hash(1, GENESIS, content, AT) == leaf_hash(raw)


_KIND_VALUES = {
    # The value as the reference encoding takes it, and as each driver may hand it back.
    "i": st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1).flatmap(
        lambda n: st.sampled_from([(n, n), (n, str(n)), (n, Decimal(n))])
    ),
    "t": st.text(max_size=30).map(lambda text: (text, text)),
    "m": st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31))
    .map(lambda moment: moment.replace(tzinfo=UTC))
    .flatmap(
        lambda moment: st.sampled_from(
            [(moment, moment), (moment, moment.replace(tzinfo=None).isoformat(" ", "microseconds"))]
        )
    ),
}


@st.composite
def _rows(draw: st.DrawFn) -> tuple[str, list[Any], list[Any]]:
    kinds = draw(st.text(alphabet="itm", min_size=1, max_size=10))
    plain, handed = [], []
    for kind in kinds:
        value, given = draw(st.one_of(st.just((None, None)), _KIND_VALUES[kind]))
        plain.append(value)
        handed.append(given)
    return kinds, plain, handed


@given(row=_rows())
def test_a_row_encoder_spells_any_row_as_the_plain_encoding_does(
    row: tuple[str, list[Any], list[Any]],
) -> None:
    kinds, plain, handed = row
    assert row_encoder(b"R", kinds)(handed) == row_bytes(b"R", plain)
