"""The canonical bytes of docs/integrity.md, byte for byte: what an independent implementation
must produce, and the fast per-column encoder agrees with the plain one on every kind of value."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

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
