"""The canonical bytes of docs/integrity.md, byte for byte: what an independent implementation
must produce, and the paged encoder agrees with the plain definition on any rows."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from ledger.integrity.canonical import (
    GENESIS,
    RECORD_PREFIX,
    Content,
    record_bytes,
    record_hash,
    row_json,
    section_bytes,
)
from ledger.integrity.merkle import leaf_hash

AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_a_section_is_its_letter_and_a_compact_json_array_of_rows_of_strings_and_nulls() -> None:
    rows = [("1", None, 'a"b\\c\n\x01'), ("-12", "ü", "2026-01-02 03:04:05.678901")]
    assert section_bytes("T", rows) == (
        b'T[["1",null,"a\\"b\\\\c\\n\\u0001"],["-12","\xc3\xbc","2026-01-02 03:04:05.678901"]]'
    )
    assert section_bytes("C", []) == b"C[]"


def test_a_record_is_its_prefix_number_hashes_and_time_and_its_hash_a_merkle_leaf() -> None:
    content = bytes(range(32))
    raw = record_bytes(1, GENESIS, content, AT)
    assert raw == RECORD_PREFIX + (1).to_bytes(8, "big") + GENESIS + content + (
        1767323045678901
    ).to_bytes(8, "big", signed=True)
    assert RECORD_PREFIX == b"ledger.commit.v2\n"
    assert len(raw) == 17 + 8 + 32 + 32 + 8
    assert record_hash(1, GENESIS, content, AT) == leaf_hash(raw)


_VALUE = st.one_of(st.none(), st.text(), st.integers().map(str))
_ROW = st.lists(_VALUE, min_size=1, max_size=8).map(tuple)


@given(
    sections=st.lists(st.lists(_ROW, max_size=12), min_size=4, max_size=4),
    page=st.integers(min_value=1, max_value=5),
)
def test_the_paged_content_hashes_the_plain_definition_of_its_sections(
    sections: list[list[tuple[str | None, ...]]], page: int
) -> None:
    content = Content()
    plain = b""
    for tag, rows in zip("TPBC", sections, strict=True):
        # Any paging, empty pages included, gives the bytes of the whole section.
        texts = [row_json(row) for row in rows]
        pages = [texts[start : start + page] for start in range(0, len(texts), page)] + [[]]
        content.add_section(tag, pages)
        plain += section_bytes(tag, rows)
    assert content.digest() == hashlib.sha256(plain).digest()
    assert content.rows == sum(len(rows) for rows in sections)
    # The plain definition is the standard library's compact JSON, as the docs say.
    assert plain.startswith(
        b"T" + json.dumps(sections[0], separators=(",", ":"), ensure_ascii=False).encode()
    )
