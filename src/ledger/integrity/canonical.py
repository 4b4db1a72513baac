"""The canonical bytes of the journal's commit records (docs/integrity.md says the same, for an
independent implementation): what a commit wrote, as one SHA-256 over its rows, and the record
that chains it to the one before.

A value is one of: nothing (``0x00``), an integer (``0x01``, then its decimal text in ASCII,
``-`` for negatives, no leading zeros, prefixed by its length as a 4-byte big-endian integer), a
text (``0x02``, then its UTF-8 bytes prefixed the same way) or a moment (an integer: microseconds
since 1970-01-01T00:00:00Z). A row is its one-byte tag and its values in a fixed order; the
content is the rows of each section in turn, each section's rows in id order:

- ``T`` a transaction: id, idempotency key, kind, user, reference, created at;
- ``P`` a posting: id, transaction id, account, currency, amount, bet uid, balance after;
- ``B`` a bet placed: uid, user, pool, currency, amount, rake, funding, ticket, request uuid,
  placed at;
- ``C`` a bet closed: uid, state, payout, payout currency, closed at.

The content hash is ``SHA-256(content)``. A record is ``b"ledger.commit.v1\\n"``, the sequence
number as 8 bytes big-endian, the previous record's hash (32 zero bytes before the first), the
content hash and the commit's moment (8 bytes big-endian, signed); its hash is the RFC 6962 leaf
hash of those bytes, so the chain's record hashes are the leaves of the Merkle tree.

Pure: values in, bytes out.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from .merkle import leaf_hash

__all__ = [
    "GENESIS",
    "RECORD_PREFIX",
    "Content",
    "Digest",
    "Hashed",
    "micros",
    "record_bytes",
    "record_hash",
    "row_bytes",
    "row_encoder",
]

RECORD_PREFIX = b"ledger.commit.v1\n"
GENESIS = bytes(32)  # the previous hash of the first record
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LENGTH = struct.Struct(">I")
_RECORD = struct.Struct(">Q32s32sq")


def micros(moment: datetime) -> int:
    """A moment as whole microseconds since the epoch (a naive one is UTC, as SQLite's are)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _value(value: Any) -> bytes:
    if value is None:
        return b"\x00"
    if value.__class__ is str:
        raw = value.encode()
        return b"\x02" + _LENGTH.pack(len(raw)) + raw
    if isinstance(value, datetime):
        value = micros(value)
    digits = str(int(value)).encode()
    return b"\x01" + _LENGTH.pack(len(digits)) + digits


def _integer(value: Any) -> bytes:
    if value is None:
        return b"\x00"
    # SQLite's wide amounts are decimal text, Postgres's NUMERIC a Decimal: both exact.
    digits = str(value if value.__class__ is int else int(value)).encode()
    return b"\x01" + _LENGTH.pack(len(digits)) + digits


def _text(value: Any) -> bytes:
    if value is None:
        return b"\x00"
    raw: bytes = value.encode()
    return b"\x02" + _LENGTH.pack(len(raw)) + raw


def _moment(value: Any) -> bytes:
    if value is None:
        return b"\x00"
    # SQLite's text (UTC, no zone) or a driver's datetime.
    moment = datetime.fromisoformat(value) if value.__class__ is str else value
    return _integer(micros(moment))


# One value of each kind, as a row encoder's generated code spells it (see row_encoder): the
# same bytes as _integer, _text and _moment, without a function call per value.
_SPELLED = {
    "i": "d = b'%d' % (VALUE if VALUE.__class__ is int else int(VALUE))\n"
    "        add(b'\\x01' + pack(len(d)) + d)",
    "t": "d = VALUE.encode()\n        add(b'\\x02' + pack(len(d)) + d)",
    "m": "add(moment(VALUE))",
}


@functools.lru_cache(maxsize=4096)
def _moment_bytes(value: str | datetime) -> bytes:
    # Cached: the rows of one commit share a few moments (a unit of work's clock), and parsing
    # SQLite's text was the dearest value of a row.
    return _moment(value)


def row_encoder(tag: bytes, kinds: str) -> Callable[[Sequence[Any]], bytes]:
    """The canonical bytes of rows of ``tag`` from the values as a driver hands them back, one
    kind per column: ``i`` an integer, ``t`` a text, ``m`` a moment; the same bytes as
    :func:`row_bytes` (``tests/unit/test_canonical.py`` compares them on any values).

    The function is generated for the row's shape, each value's encoding written out in it: a
    call per value was most of the journal's cost to a group commit (a posting row 4.0 to
    4.8 us, 2.6 us generated, the same bytes)."""
    lines = [
        "def encode(row):",
        f"    {''.join(f'v{n}, ' for n in range(len(kinds)))}= row",
        f"    parts = [{tag!r}]",
        "    add = parts.append",
    ]
    for number, kind in enumerate(kinds):
        spelled = _SPELLED[kind].replace("VALUE", f"v{number}")
        lines += [
            f"    if v{number} is None:",
            "        add(b'\\x00')",
            "    else:",
            f"        {spelled}",
        ]
    lines.append("    return b''.join(parts)")
    scope: dict[str, Any] = {"pack": _LENGTH.pack, "moment": _moment_bytes}
    exec("\n".join(lines), scope)  # noqa: S102 - code built above from the kinds' fixed spellings
    encode: Callable[[Sequence[Any]], bytes] = scope["encode"]
    return encode


def row_bytes(tag: bytes, values: Iterable[Any]) -> bytes:
    """One row's canonical bytes: its tag, then each value."""
    return tag + b"".join([_value(value) for value in values])


class Hashed(Protocol):
    """A commit's content hash and how many rows it covers: a :class:`Content` fed here, or a
    :class:`Digest` a database computed."""

    @property
    def rows(self) -> int: ...

    def digest(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Digest:
    """A content hash computed elsewhere (Postgres computes a commit's in SQL)."""

    value: bytes
    rows: int

    def digest(self) -> bytes:
        return self.value


class Content:
    """The content hash of one commit, its rows fed in canonical order."""

    __slots__ = ("_hash", "rows")

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add(self, tag: bytes, values: Iterable[Any]) -> None:
        self._hash.update(row_bytes(tag, values))
        self.rows += 1

    def add_encoded(self, row: bytes) -> None:
        """Add one row's canonical bytes (:func:`row_encoder`)."""
        self._hash.update(row)
        self.rows += 1

    def add_all(self, rows: list[bytes]) -> None:
        """Add rows' canonical bytes, in order (one update of the hash for them all)."""
        self._hash.update(b"".join(rows))
        self.rows += len(rows)

    def digest(self) -> bytes:
        return self._hash.digest()


def record_bytes(seq: int, prev: bytes, content: bytes, committed_at: datetime) -> bytes:
    """The canonical bytes of commit record ``seq``."""
    return RECORD_PREFIX + _RECORD.pack(seq, prev, content, micros(committed_at))


def record_hash(seq: int, prev: bytes, content: bytes, committed_at: datetime) -> bytes:
    """The record's hash: its Merkle leaf hash."""
    return leaf_hash(record_bytes(seq, prev, content, committed_at))
