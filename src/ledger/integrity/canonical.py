"""The canonical bytes of the journal's commit records (docs/integrity.md says the same, for an
independent implementation): what a commit wrote, as one SHA-256 over its rows, and the record
that chains it to the one before.

Every value is a JSON string or ``null``: an integer as its decimal digits (``-`` first when
negative, no leading zeros), a text as itself, a moment as ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC.
A row is the JSON array of its values in a fixed order; a section is a tag letter followed by
the JSON array of its rows, in id order (uid for bets); the content is the sections in this order:

- ``T`` the transactions: id, idempotency key, kind, user, reference, created at;
- ``P`` the postings (by transaction id, then id): id, transaction id, account, currency,
  amount, bet uid, balance after;
- ``B`` the bets placed: uid, user, pool, currency, amount, rake, funding, ticket, request
  uuid, placed at;
- ``C`` the bets closed: uid, state, payout, payout currency, closed at.

JSON is written compactly (no spaces), strings escaped only where JSON requires (``"``, ``\\``
and the control characters below U+0020: ``\\b \\t \\n \\f \\r``, the others as
``\\u00xx``), everything else as its UTF-8 bytes: what Python's ``json.dumps(value,
ensure_ascii=False, separators=(",", ":"))`` writes. The tables hand every value over in that
form and build each row's JSON text themselves (SQLite's ``json_array``, Postgres's
``to_json``), so Python only joins a page of texts: a Python function a row cost several
microseconds, most of a million-row close's sealing.

The content hash is ``SHA-256(content)``. A record is ``b"ledger.commit.v2\\n"``, the sequence
number as 8 bytes big-endian, the previous record's hash (32 zero bytes before the first), the
content hash and the commit's moment (microseconds since 1970-01-01T00:00:00Z, 8 bytes
big-endian, signed); its hash is the RFC 6962 leaf hash of those bytes, so the chain's record
hashes are the leaves of the Merkle tree.

Pure: values in, bytes out.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from .merkle import leaf_hash

__all__ = [
    "GENESIS",
    "RECORD_PREFIX",
    "Content",
    "micros",
    "record_bytes",
    "record_hash",
    "row_json",
    "section_bytes",
]

RECORD_PREFIX = b"ledger.commit.v2\n"
GENESIS = bytes(32)  # the previous hash of the first record
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RECORD = struct.Struct(">Q32s32sq")

Value = str | None  # every value as the canonical form takes it
Row = Sequence[Value]


def micros(moment: datetime) -> int:
    """A moment as whole microseconds since the epoch (a naive one is UTC, as SQLite's are)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def row_json(values: Row) -> str:
    """One row's canonical JSON text, by the plain definition (the databases build it; the
    reference their texts are tested against)."""
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))


def section_bytes(tag: str, rows: Sequence[Row]) -> bytes:
    """One section's canonical bytes, by the plain definition."""
    return f"{tag}[{','.join(row_json(row) for row in rows)}]".encode()


class Content:
    """The content hash of one commit, its sections fed in order, each a page of rows at a time."""

    __slots__ = ("_hash", "rows")

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add_section(self, tag: str, pages: Iterable[Sequence[str]]) -> None:
        """Add section ``tag`` from its rows, each its canonical JSON text (:func:`row_json`;
        the databases build it), in order, in pages of any size: the same bytes as
        :func:`section_bytes` of the rows' values."""
        update = self._hash.update
        update(tag.encode() + b"[")
        first = True
        for page in pages:
            if not page:
                continue
            if not first:
                update(b",")
            update(",".join(page).encode())
            first = False
            self.rows += len(page)
        update(b"]")

    def digest(self) -> bytes:
        return self._hash.digest()


def record_bytes(seq: int, prev: bytes, content: bytes, committed_at: datetime) -> bytes:
    """The canonical bytes of commit record ``seq``."""
    return RECORD_PREFIX + _RECORD.pack(seq, prev, content, micros(committed_at))


def record_hash(seq: int, prev: bytes, content: bytes, committed_at: datetime) -> bytes:
    """The record's hash: its Merkle leaf hash."""
    return leaf_hash(record_bytes(seq, prev, content, committed_at))
