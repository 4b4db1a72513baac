"""Reconciliation: the platform's record of its bets compared with the books, set-based.

The platform's file (CSV, TSV, a JSON array or JSON lines, told apart by their first bytes) is
read with sqlite-utils (``rows_from_file``) into a scratch SQLite database on disk (a
sqlite-utils ``Database``), whichever store the ledger uses;
the ledger's bets are streamed next to it from one read-only unit of work; one join then
classifies every bet. Both sides stay on disk, so a file of millions of bets needs memory for one
batch at a time (a JSON *array* is the exception: it is one document and is parsed whole, so
large exports should be CSV or JSON lines).

Streaming the ledger's bets into the scratch database is one way for both stores, bounded in
memory (batches of :data:`ledger.stores.queries.RECORD_BATCH`; a server-side cursor on Postgres).
On SQLite, attaching the ledger's file instead would save the copy, about a sixth of the CPU
time profiled on 100,000 bets, but would compare amounts of two representations (the ledger
keeps wide values as text) and read a live database behind its store's back; not worth it
within the budget (``benchmarks/reconcile.py``: a million bets).

Amounts are exact: the file's amounts are decimal strings (or JSON numbers, read as
``Decimal``), converted to the currency's minor units and compared as canonical integer text.
An amount finer than its currency's minor unit can equal nothing the ledger holds and is kept
as ``~<text>``, so it is reported as a mismatch rather than refusing the file.

Nothing in the books is changed: the ledger is only read.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import sqlite3
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

import msgspec
from sqlite_utils import Database
from sqlite_utils.utils import Format, RowError, rows_from_file

from .currencies import CurrencyTable
from .errors import InvalidRequest, LedgerError
from .money import parse_decimal, render, to_minor
from .paging import csv_lines

__all__ = [
    "COUNTS",
    "CSV_COLUMNS",
    "STATUSES",
    "BetReader",
    "Reconciliation",
    "Source",
    "UnreadableFile",
    "reconcile",
]


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

# The counts of a report, in the order they are shown.
COUNTS: Final = (
    "matched",
    "missing_in_wallet",
    "missing_on_platform",
    "state_mismatch",
    "amount_mismatch",
    "payout_mismatch",
    "owner_mismatch",
)
_LABELS: Final = {
    "matched": "matched",
    "missing_in_wallet": "missing in the wallet",
    "missing_on_platform": "missing on the platform",
    "state_mismatch": "state mismatch",
    "amount_mismatch": "amount or rake mismatch",
    "payout_mismatch": "payout mismatch",
    "owner_mismatch": "user or pool mismatch",
}

_FIELDS: Final = (
    "user",
    "pool",
    "status",
    "amount",
    "rake",
    "currency",
    "payout",
    "payout_currency",
)
CSV_COLUMNS: Final = (
    "uid",
    "differences",
    *(f"platform_{name}" for name in _FIELDS),
    *(f"wallet_{name}" for name in _FIELDS),
)

# Platform rows converted and inserted at a time: memory holds one batch.
_INSERT_BATCH: Final = 10_000

# The platform's rows in the scratch database: amounts as minor units (canonical integer text,
# or ``~<decimal>`` for one that cannot be whole minor units), states in the ledger's words.
_PLATFORM_COLUMNS: Final = {
    "uid": int,
    "user": str,
    "pool": int,
    "currency": str,
    "amount": str,
    "rake": str,
    "state": str,
    "payout": str,
    "payout_currency": str,
}

_SCRATCH_SCHEMA: Final = """
CREATE TABLE wallet (
    uid INTEGER PRIMARY KEY, user TEXT, pool INTEGER, currency TEXT, amount TEXT, rake TEXT,
    state TEXT, payout TEXT, payout_currency TEXT
);
"""

# One row of the platform's file beside its bet in the wallet, with what differs. A column the
# file does not give (NULL) is not compared. A payout is compared when both sides settled the bet
# (a state mismatch already says the rest); the wallet's zero payout may be stored as NULL.
_COMPARED: Final = """
CREATE TEMP VIEW compared AS
SELECT p.*, w.uid AS w_uid, w.user AS w_user, w.pool AS w_pool, w.currency AS w_currency,
       w.amount AS w_amount, w.rake AS w_rake, w.state AS w_state, w.payout AS w_payout,
       w.payout_currency AS w_payout_currency,
       w.uid IS NOT NULL AND p.state IS NOT NULL AND p.state IS NOT w.state AS state_mismatch,
       w.uid IS NOT NULL AND (
           (p.amount IS NOT NULL AND p.amount IS NOT w.amount)
           OR (p.rake IS NOT NULL AND p.rake IS NOT w.rake)
           OR (p.currency IS NOT NULL AND p.currency IS NOT w.currency)
       ) AS amount_mismatch,
       w.uid IS NOT NULL AND p.state = 'settled' AND w.state = 'settled' AND (
           (p.payout IS NOT NULL AND p.payout IS NOT coalesce(w.payout, '0'))
           OR (p.payout_currency IS NOT NULL AND w.payout_currency IS NOT NULL
               AND p.payout_currency IS NOT w.payout_currency)
       ) AS payout_mismatch,
       w.uid IS NOT NULL AND (
           (p.user IS NOT NULL AND p.user IS NOT w.user)
           OR (p.pool IS NOT NULL AND p.pool IS NOT w.pool)
       ) AS owner_mismatch
FROM platform p LEFT JOIN wallet w ON w.uid = p.uid
"""

_COUNTS_QUERY: Final = """
SELECT count(*),
       coalesce(sum(w_uid IS NULL), 0),
       coalesce(sum(w_uid IS NOT NULL AND NOT (state_mismatch OR amount_mismatch
                    OR payout_mismatch OR owner_mismatch)), 0),
       coalesce(sum(state_mismatch), 0), coalesce(sum(amount_mismatch), 0),
       coalesce(sum(payout_mismatch), 0), coalesce(sum(owner_mismatch), 0),
       coalesce(sum(w_uid IS NULL OR state_mismatch OR amount_mismatch OR payout_mismatch
                    OR owner_mismatch), 0)
FROM compared
"""

_MISSING_ON_PLATFORM: Final = """
SELECT count(*) FROM wallet w WHERE NOT EXISTS (SELECT 1 FROM platform p WHERE p.uid = w.uid)
"""

_DIFFERENCES_QUERY: Final = """
SELECT uid, w_uid IS NULL, 0, state_mismatch, amount_mismatch, payout_mismatch, owner_mismatch,
       user, pool, state, amount, rake, currency, payout, payout_currency,
       w_user, w_pool, w_state, w_amount, w_rake, w_currency, w_payout, w_payout_currency
FROM compared
WHERE w_uid IS NULL OR state_mismatch OR amount_mismatch OR payout_mismatch OR owner_mismatch
UNION ALL
SELECT uid, 0, 1, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       user, pool, state, amount, rake, currency, payout, payout_currency
FROM wallet w WHERE NOT EXISTS (SELECT 1 FROM platform p WHERE p.uid = w.uid)
ORDER BY 1
LIMIT ?
"""


@dataclass
class Reconciliation:
    """A finished comparison: the counts, and the differing rows read from the scratch database.

    Use it as a context manager: the scratch database is deleted on exit.
    """

    database: Database
    currencies: CurrencyTable
    format: str
    platform_rows: int
    wallet_bets: int
    counts: dict[str, int]
    differing: int  # bets with at least one difference
    pools_only: bool
    _scratch: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True when the file and the books agree on every bet compared."""
        return all(self.counts[name] == 0 for name in COUNTS if name != "matched")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Delete the scratch database."""
        self.database.close()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def summary(self) -> dict[str, Any]:
        """The report without its rows: what the file held, what was compared, the counts."""
        return {
            "ok": self.ok,
            "format": self.format,
            "pools_only": self.pools_only,
            "platform_rows": self.platform_rows,
            "wallet_bets": self.wallet_bets,
            "counts": dict(self.counts),
            "differing": self.differing,
        }

    def differences(self, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The differing bets in uid order: what each side says, and the names of the
        differences (the keys of :data:`COUNTS`). Read lazily from the scratch database."""
        # SQLite reads a negative LIMIT as no limit.
        for row in self.database.execute(_DIFFERENCES_QUERY, [-1 if limit is None else limit]):
            uid, *flags = row[:7]
            platform, wallet = row[7:15], row[15:]
            names = [name for name, flag in zip(COUNTS[1:], flags, strict=True) if flag]
            yield {
                "uid": uid,
                "differences": names,
                "platform": None if names[0] == "missing_on_platform" else self._side(platform),
                "wallet": None if names[0] == "missing_in_wallet" else self._side(wallet),
            }

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """The JSON report: the summary and the differing bets (at most ``limit``)."""
        rows = list(self.differences(None if limit is None else limit + 1))
        truncated = limit is not None and len(rows) > limit
        return {
            **self.summary(),
            "differences": rows[:limit] if limit is not None else rows,
            "truncated": truncated,
        }

    def json_chunks(self) -> Iterator[str]:
        """The whole JSON report as text pieces, the rows streamed: for huge differences."""
        head = json.dumps({**self.summary(), "truncated": False})
        yield head[:-1] + ', "differences": ['
        for index, row in enumerate(self.differences()):
            yield ("," if index else "") + json.dumps(row)
        yield "]}"

    def csv_chunks(self) -> Iterator[str]:
        """The differing bets as CSV, one row each, flattened (:data:`CSV_COLUMNS`)."""
        return csv_lines((_flat(row) for row in self.differences()), CSV_COLUMNS)

    def text_lines(self, limit: int = 50) -> Iterator[str]:
        """A readable summary: the counts, then the first ``limit`` differing bets."""
        scope = " in the file's pools" if self.pools_only else ""
        yield (
            f"{'clean' if self.ok else 'DIFFERENCES'}: {self.platform_rows} platform bets "
            f"({self.format}) against {self.wallet_bets} wallet bets{scope}"
        )
        for name in COUNTS:
            yield f"  {_LABELS[name] + ':':<26}{self.counts[name]}"
        for shown, row in enumerate(self.differences(limit + 1)):
            if shown == limit:
                yield f"  ... {self.differing - limit} more differing bets: see --json or --csv"
                break
            yield f"  bet {row['uid']}: {', '.join(row['differences'])}: {_describe(row)}"

    def _side(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """One side of a differing bet, amounts as decimal strings of their currency."""
        user, pool, state, amount, rake, currency, payout, payout_currency = values
        return {
            "user": user,
            "pool": pool,
            "status": state,
            "amount": self._amount(amount, currency),
            "rake": self._amount(rake, currency),
            "currency": currency,
            "payout": self._amount(payout, payout_currency or currency)
            if state == "settled"
            else None,
            "payout_currency": payout_currency,
        }

    def _amount(self, minor: str | None, currency: str | None) -> str | None:
        if minor is None or currency is None:
            return minor
        if minor.startswith("~"):
            return minor[1:]  # the platform's amount that is no whole number of minor units
        try:
            return render(int(minor), self.currencies.scale(currency))
        except LedgerError:  # a currency configured away since: the minor units still say it
            return f"{minor} minor units"


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {"uid": row["uid"], "differences": " ".join(row["differences"])}
    for side in ("platform", "wallet"):
        for name, value in (row[side] or {}).items():
            flat[f"{side}_{name}"] = value
    return flat


def _describe(row: dict[str, Any]) -> str:
    platform, wallet = row["platform"], row["wallet"]
    if platform is None:
        return f"the wallet has it {wallet['status']} in pool {wallet['pool']}"
    if wallet is None:
        return f"the platform has it {platform['status'] or 'recorded'}"
    differing = [
        f"{name} {platform[name]} vs {wallet[name]}"
        for name in _FIELDS
        if platform[name] is not None and str(platform[name]) != str(wallet[name])
    ]
    return "; ".join(differing) or "see --json"


# --- reading the platform's file ------------------------------------------------------------------


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


# --- the comparison -------------------------------------------------------------------------------

Source = IO[bytes] | bytes | str | Path
# ``read_bets(pools, uids)``: the ledger's bets (all of them when both are None) in batches of
# (uid, user_uid, pool_uid, currency, amount, rake, state, payout, payout_currency).
BetReader = Callable[
    [Collection[int] | None, Collection[int] | None], Iterable[list[tuple[Any, ...]]]
]


def reconcile(
    source: Source,
    read_bets: BetReader,
    currencies: CurrencyTable,
    *,
    pools_only: bool = False,
    scratch_dir: str | Path | None = None,
) -> Reconciliation:
    """Compare the platform's file with the ledger's bets.

    ``source``: a path, raw bytes, or a binary file object. ``read_bets(pools, uids)`` streams
    the ledger's bets in batches (:meth:`ledger.Ledger.reconcile` passes its read unit of work);
    with ``pools_only`` it is asked only for the file's pools, and for the file's bets outside
    them, so that the rest of the books is neither read nor reported missing on the platform.

    Raises :class:`UnreadableFile` (400) for a file that is not a record of bets.
    """
    scratch = tempfile.TemporaryDirectory(prefix="ledger-reconcile-", dir=scratch_dir)
    database = Database(Path(scratch.name) / "reconcile.db")
    try:
        # A throwaway database: durability would only cost time.
        database.execute("PRAGMA journal_mode = OFF")
        database.execute("PRAGMA synchronous = OFF")
        database.conn.executescript(_SCRATCH_SCHEMA)
        database.table("platform").create(_PLATFORM_COLUMNS)
        file_format = _load(database, source, currencies)
        _check_unique(database)
        platform_rows = database.table("platform").count
        if pools_only:
            if database.execute("SELECT 1 FROM platform WHERE pool IS NULL LIMIT 1").fetchone():
                raise UnreadableFile("--pools-only needs a pool for every row (column 'pool')")
            pools = _column(database, "SELECT DISTINCT pool FROM platform")
            _copy(database, read_bets(pools, None))
            # The file's bets the wallet holds in another pool (an owner mismatch to report,
            # not a bet missing in the wallet).
            outside = _column(
                database,
                "SELECT uid FROM platform p WHERE NOT EXISTS "
                "(SELECT 1 FROM wallet w WHERE w.uid = p.uid)",
            )
            if outside:
                _copy(database, read_bets(None, outside))
        else:
            _copy(database, read_bets(None, None))
        database.conn.commit()
        database.conn.executescript(_COMPARED)
        found = database.execute(_COUNTS_QUERY).fetchone()
        missing_on_platform = database.execute(_MISSING_ON_PLATFORM).fetchone()[0]
        total, missing, matched, state, amount, payout, owner, differing = found
        counts = {
            "matched": matched,
            "missing_in_wallet": missing,
            "missing_on_platform": missing_on_platform,
            "state_mismatch": state,
            "amount_mismatch": amount,
            "payout_mismatch": payout,
            "owner_mismatch": owner,
        }
        wallet_bets = database.table("wallet").count
    except BaseException:
        database.close()
        scratch.cleanup()
        raise
    return Reconciliation(
        database,
        currencies,
        file_format,
        total if platform_rows is None else platform_rows,
        wallet_bets,
        counts,
        differing + missing_on_platform,
        pools_only,
        scratch,
    )


def _load(database: Database, source: Source, currencies: CurrencyTable) -> str:
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


def _check_unique(database: Database) -> None:
    twice = _column(
        database, "SELECT uid FROM platform GROUP BY uid HAVING count(*) > 1 ORDER BY uid LIMIT 5"
    )
    if twice:
        named = ", ".join(str(uid) for uid in twice)
        raise UnreadableFile(f"bet uid(s) listed more than once in the file: {named}")
    database.execute("CREATE UNIQUE INDEX platform_uid ON platform (uid)")


def _column(database: Database, query: str) -> list[Any]:
    return [row[0] for row in database.execute(query)]


def _copy(database: Database, batches: Iterable[list[tuple[Any, ...]]]) -> None:
    """The ledger's bets into the scratch database, amounts as canonical integer text (the
    ledger's own values are integers, Postgres' ``Decimal`` converted by the store)."""
    insert = "INSERT OR IGNORE INTO wallet VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    for batch in batches:
        try:
            database.conn.executemany(insert, [_wallet_row(*bet) for bet in batch])
        except sqlite3.Error as error:  # pragma: no cover - the scratch disk is full
            raise LedgerError(
                f"the scratch database failed: {error}", key="reconcile.scratch"
            ) from error


def _wallet_row(
    uid: int,
    user: str,
    pool: int,
    currency: str,
    amount: int,
    rake: int,
    state: str,
    payout: int | None,
    payout_currency: str | None,
) -> tuple[Any, ...]:
    return (
        uid,
        user,
        pool,
        currency,
        str(amount),
        str(rake),
        state,
        None if payout is None else str(payout),
        payout_currency,
    )
