"""Cursor paging and CSV export, no I/O."""

from __future__ import annotations

import pytest

from ledger import paging
from ledger.errors import InvalidRequest


def test_a_cursor_reads_back_as_the_key_it_was_made_of() -> None:
    text = paging.cursor("2026-11-22T08:00:00+00:00", 42)
    assert paging.position(text, str, int) == ("2026-11-22T08:00:00+00:00", 42)
    assert paging.position(None, str, int) is None


@pytest.mark.parametrize("bad", ["x", "!!!", paging.cursor(1), paging.cursor("a", "b"), "a" * 2000])
def test_a_cursor_the_api_did_not_give_is_a_400(bad: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        paging.position(bad, str, int)
    assert info.value.key == "request.invalid_cursor"


def test_pages_end_with_no_cursor_and_an_export_walks_them_all() -> None:
    rows = list(range(10, 0, -1))  # newest first

    def read(after: str | None) -> paging.Page[int]:
        start = paging.position(after, int)
        left = [row for row in rows if start is None or row < int(start[0])]
        return paging.page_of(left[:4], 3, lambda row: (row,))

    first = read(None)
    assert first.items == [10, 9, 8]
    assert first.next is not None
    assert list(paging.every(read)) == rows


def test_csv_export_streams_a_header_then_one_line_per_row() -> None:
    lines = list(paging.csv_lines([{"a": 1, "b": {"k": "v"}}, {"a": None}], ["a", "b"]))
    assert "".join(lines) == 'a,b\r\n1,"{""k"":""v""}"\r\n,\r\n'
    assert list(paging.csv_lines([], ["a"])) == ["a\r\n"]


@pytest.mark.parametrize("limit", [0, 1001, True])
def test_a_page_size_out_of_range_is_a_400(limit: int) -> None:
    with pytest.raises(InvalidRequest):
        paging.check_limit(limit)
