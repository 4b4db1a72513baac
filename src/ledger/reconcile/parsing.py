"""The platform's file read: its format told apart, each row checked and converted to the
scratch database's columns, and loaded in batches.

Invariant: a row is a bet or the file is refused whole with :class:`UnreadableFile` (400
``reconcile.unreadable_file``), naming the row; amounts stay exact (JSON numbers read as
``Decimal``), converted to the currency's minor units as canonical integer text, or kept as
``~<decimal>`` when no whole number of minor units says them. Proved by
``tests/service/test_reconcile.py``.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Final

import msgspec
from sqlite_utils import Database
from sqlite_utils.utils import Format, RowError, rows_from_file

from ..currencies import CurrencyTable
from ..errors import InvalidRequest, LedgerError
from ..money import parse_decimal, to_minor

__all__ = ["STATUSES", "Source", "UnreadableFile", "load"]

Source = IO[bytes] | bytes | str | Path


class UnreadableFile(InvalidRequest):
    """The platform's file is not one of the formats, or a row of it is not a bet."""

    key = "reconcile.unreadable_file"


# The platform's words for a bet's state, and the ledger's (contract section 2).
STATUSES: Final[Mapping[str, str]] = {
    "placed": "placed",
    "active": "placed",
    "refunded": "refunded",
    "cancelled": "refunded",
    "canceled": "refunded",
    "settled": "settled",
    "closed": "settled",
}

# Platform rows converted and inserted at a time: memory holds one batch.
_INSERT_BATCH: Final = 10_000


def load(database: Database, source: Source, currencies: CurrencyTable) -> str:
    """Read ``source`` into the scratch database's ``platform`` table; its format's name."""
    opened: IO[bytes]
    if isinstance(source, bytes):
        opened = io.BytesIO(source)
    elif isinstance(source, str | Path):
        try:
            opened = open(source, "rb")  # noqa: SIM115 - closed below
        except OSError as error:
            raise UnreadableFile(f"cannot read {source}: {error.strerror}") from None
    else:
        opened = source
    converter = _Converter(currencies)
    try:
        rows, file_format = _rows(opened)
        converted = (converter.row(row, number) for number, row in enumerate(rows, start=1))
        # Batches through executemany rather than sqlite-utils' insert_all: measured on a
        # million rows, insert_all's per-value JSON check and statement building took a third
        # of the whole reconciliation's CPU time (benchmarks/reconcile.py).
        insert = "INSERT INTO platform VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        while batch := list(itertools.islice(converted, _INSERT_BATCH)):
            database.conn.executemany(insert, batch)
    except RowError as error:
        raise UnreadableFile(f"a row has more fields than the header: {error}"[:300]) from None
    except (csv.Error, UnicodeDecodeError) as error:
        raise UnreadableFile(f"not CSV, TSV or JSON: {error}"[:300]) from None
    finally:
        if opened is not source:
            opened.close()
    return file_format


def _rows(source: IO[bytes]) -> tuple[Iterable[Mapping[str, Any]], str]:
    """The file's rows as mappings, and its format's name.

    CSV and TSV go through sqlite-utils (``rows_from_file`` sniffs the delimiter). JSON is told
    apart by its first byte (``[``: an array, ``{``: JSON lines) and decoded here with exact
    numbers: sqlite-utils reads JSON with ``json.load``, which turns ``10.10`` into a float.
    """
    buffered = io.BufferedReader(source, buffer_size=64 * 1024)  # type: ignore[type-var]
    head = buffered.peek(2048).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    if head.startswith(b"["):
        return _json_array(buffered.read()), "json"
    if head.startswith(b"{"):
        return _json_lines(buffered), "jsonl"
    if not head:
        return (), "empty"
    try:
        rows, found = rows_from_file(buffered)
    except (csv.Error, UnicodeDecodeError) as error:
        raise UnreadableFile(f"not CSV, TSV or JSON: {error}") from None
    return rows, "tsv" if found == Format.TSV else "csv"


_EXACT_ROWS: Final = msgspec.json.Decoder(float_hook=Decimal)


def _json_array(data: bytes) -> list[Any]:
    try:
        decoded = _EXACT_ROWS.decode(data.lstrip(b"\xef\xbb\xbf"))
    except msgspec.DecodeError as error:
        raise UnreadableFile(f"malformed JSON: {error}") from None
    except RecursionError:  # arrays in arrays past the decoder's depth: no file of bets
        raise UnreadableFile("malformed JSON: nested too deeply") from None
    if not isinstance(decoded, list):
        raise UnreadableFile("a JSON file must be an array of objects")
    return decoded


def _json_lines(lines: IO[bytes]) -> Iterator[Any]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield _EXACT_ROWS.decode(line.lstrip(b"\xef\xbb\xbf") if number == 1 else line)
        except msgspec.DecodeError as error:
            raise UnreadableFile(f"line {number}: malformed JSON: {error}") from None
        except RecursionError:
            raise UnreadableFile(f"line {number}: malformed JSON: nested too deeply") from None


def _pick(row: Mapping[str, Any], *names: str) -> Any:
    """The first of ``names`` the row gives a value for (an empty CSV cell gives none)."""
    for name in names:
        value = row.get(name)
        if value.__class__ is str:
            value = value.strip()
        if value is not None and value != "":
            return value
    return None


def _text(value: Any, name: str, number: int) -> str | None:
    if value is None or value.__class__ is str:
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise UnreadableFile(f"row {number}: {name}: expected a text, got {value!r}"[:300])
    return str(value)


def _integer(value: Any, name: str, number: int) -> int | None:
    if value is None:
        return None
    # No 64-bit integer has more than 20 characters; int() of thousands of digits is refused
    # with a ValueError (Python's limit on conversions) that was no answer.
    if (
        value.__class__ is str
        and len(value) <= 20
        and value.isascii()
        and value.lstrip("-").isdigit()
    ):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63:
        raise UnreadableFile(
            f"row {number}: {name}: expected a 64-bit integer, got {value!r}"[:300]
        )
    return value


class _Converter:
    """One row of the platform's file as a row of the scratch database (hot: once a row)."""

    def __init__(self, currencies: CurrencyTable) -> None:
        self.currencies = currencies
        # Amounts repeat (every entry of a tournament costs the same): convert each once.
        self._minors: dict[tuple[Any, str], str] = {}

    def row(self, row: Any, number: int) -> tuple[Any, ...]:
        if not isinstance(row, Mapping):
            raise UnreadableFile(f"row {number}: expected an object with the bet's fields")
        uid = _integer(_pick(row, "uid"), "uid", number)
        if uid is None:
            raise UnreadableFile(f"row {number}: no bet uid (column 'uid')")
        status = _text(_pick(row, "status"), "status", number)
        state = None
        if status is not None:
            state = STATUSES.get(status) or STATUSES.get(status.lower())
            if state is None:
                raise UnreadableFile(
                    f"row {number}: status {status[:40]!r} is not one of {', '.join(STATUSES)}"
                )
        currency = _text(_pick(row, "currency"), "currency", number)
        payout_currency = _text(_pick(row, "payout_currency"), "payout_currency", number)
        return (
            uid,
            _text(_pick(row, "user", "user_uid"), "user", number),
            _integer(_pick(row, "pool", "pool_uid"), "pool", number),
            currency,
            self._minor(_pick(row, "amount"), currency, "amount", number),
            self._minor(_pick(row, "rake"), currency, "rake", number),
            state,
            self._minor(_pick(row, "payout"), payout_currency or currency, "payout", number),
            payout_currency,
        )

    def _minor(self, value: Any, currency: str | None, name: str, number: int) -> str | None:
        """The amount in minor units as canonical integer text, or ``~<decimal>`` when it
        cannot be a whole number of minor units (it then equals nothing the ledger holds)."""
        if value is None:
            return None
        if currency is None:
            raise UnreadableFile(f"row {number}: {name} without a currency (column 'currency')")
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise UnreadableFile(f"row {number}: {name}: expected a decimal, got {value!r}"[:300])
        key = (value, currency)
        found = self._minors.get(key)
        if found is not None:
            return found
        try:
            amount = parse_decimal(value, field=name)
        except LedgerError as error:
            raise UnreadableFile(f"row {number}: {error.message}"[:300]) from None
        try:
            found = str(to_minor(amount, self.currencies.scale(currency), field=name))
        except LedgerError:  # finer than the minor unit, or a currency without a known scale
            found = f"~{amount}"
        if len(self._minors) > 100_000:
            self._minors.clear()
        self._minors[key] = found
        return found
