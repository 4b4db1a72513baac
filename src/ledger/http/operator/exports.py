"""CSV exports of the operator API's lists: every page, streamed a page at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from litestar.response import Stream

from ...errors import InvalidRequest
from ...paging import Page, csv_lines
from ...service import Ledger
from ..filenames import CSV, attachment
from ..runtime import Runtime

__all__ = ["csv_format", "csv_stream"]


class _CsvStream(Stream):
    """A streamed CSV answer: its own media type, not the route's (JSON for the page form)."""

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["media_type"] = self.media_type
        return super().to_asgi_response(*args, **kwargs)


def csv_format(value: str) -> bool:
    if value not in ("json", "csv"):
        raise InvalidRequest(f"format: expected json or csv, got {value!r}")
    return value == "csv"


def csv_stream(
    runtime: Runtime,
    first: Page[Any],
    read: Callable[[Ledger, str], Page[Any]],
    columns: Sequence[str],
    filename: str,
) -> _CsvStream:
    """CSV of ``first`` and every page after it, read one page at a time as the client takes
    them: a year of a busy user's statement never sits in memory. The first page is read before
    answering, so that bad input is still a 4xx; a failure later cuts the stream short."""
    ledger = runtime.ledger()

    def rows() -> Iterator[dict[str, Any]]:
        page = first
        while True:
            yield from (item.to_dict() for item in page.items)
            if page.next is None:
                return
            page = read(ledger, page.next)

    def chunks() -> Iterator[str]:
        # Litestar hands each item of a sync iterator over from a worker thread: send ~64 KB
        # at a time, not a line at a time.
        buffer: list[str] = []
        size = 0
        for line in csv_lines(rows(), columns):
            buffer.append(line)
            size += len(line)
            if size >= 65_536:
                yield "".join(buffer)
                buffer, size = [], 0
        if buffer:
            yield "".join(buffer)

    return _CsvStream(
        chunks(),
        media_type=CSV,
        headers={"Content-Disposition": attachment(filename)},
    )
