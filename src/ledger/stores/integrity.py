"""The journal's integrity as the commands and the server reach it: verify the chain, the tree's
head, signed checkpoints kept in the database, and the proofs of a bet's commits.

Each call is one short transaction of its own (:class:`~ledger.stores.tables.SideTables`):
nothing here moves money. The chain itself is written by the unit of work (:mod:`.chain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, or_, select

from ..events import checkpoint_row
from ..integrity.canonical import record_bytes
from ..integrity.checkpoints import Checkpoint
from . import chain
from . import events as feed
from .chain_audit import ChainReport, verify_chain
from .chain_tables import journal_chain, journal_checkpoints
from .merkle_nodes import Nodes
from .schema import bets
from .tables import SideTables, utc

__all__ = ["CommitProof", "JournalIntegrity"]


@dataclass(frozen=True, slots=True)
class CommitProof:
    """One commit of a bet, and the proof that its record is leaf ``seq - 1`` of the tree of
    ``size`` records: the record's canonical bytes, and the audit path."""

    seq: int
    record: bytes
    content_hash: bytes
    path: list[bytes]
    content: str | None = None  # the canonical content itself, when asked for


class JournalIntegrity(SideTables):
    """The chain's reads and the checkpoints' table, on a SQL store."""

    def verify(self, checkpoint: Checkpoint | None = None) -> ChainReport:
        with self._tx(write=False) as connection:
            return verify_chain(connection, self._store.dialect, checkpoint)

    def head(self) -> tuple[int, bytes]:
        """The size and root of the records' tree, from the stored record hashes."""
        with self._tx(write=False) as connection:
            size = chain.head(connection)[0]
            return size, Nodes(connection).root(size)

    def keep(self, checkpoint: Checkpoint, note: str) -> bool:
        """Store a signed checkpoint's note, and its ``journal.checkpoint`` event in the same
        transaction (webhooks carry it to the operator's other systems); False if one of that
        size is kept already."""
        dialect = self._store.dialect
        with self._tx(write=True) as connection:
            found = connection.execute(
                select(journal_checkpoints.c.size).where(
                    journal_checkpoints.c.size == checkpoint.size
                )
            ).first()
            if found is not None:
                return False
            Nodes(connection).extend(checkpoint.size)
            connection.execute(
                insert(journal_checkpoints).values(
                    size=checkpoint.size,
                    root_hash=checkpoint.root.hex(),
                    note=note,
                    signed_at=checkpoint.time,
                )
            )
            grp = dialect.allocate_event_group(connection)
            feed.append(connection, dialect, grp, 0, [checkpoint_row(note)])
            feed.seal(connection, dialect, grp, 1)
            return True

    def latest(self) -> tuple[str, datetime] | None:
        """The newest kept checkpoint's note and when it was signed."""
        with self._tx(write=False) as connection:
            row = connection.execute(
                select(journal_checkpoints.c.note, journal_checkpoints.c.signed_at)
                .order_by(journal_checkpoints.c.size.desc())
                .limit(1)
            ).first()
        if row is None:
            return None
        signed_at = utc(row.signed_at)
        assert signed_at is not None
        return row.note, signed_at

    def consistency(self, old: int, new: int) -> tuple[str | None, list[bytes]]:
        """The kept checkpoint note of size ``old`` (None: none of that size is kept), and the
        proof that the tree of ``old`` records is the start of the tree of ``new``."""
        with self._tx(write=False) as connection:
            note = connection.execute(
                select(journal_checkpoints.c.note).where(journal_checkpoints.c.size == old)
            ).scalar()
            return note, Nodes(connection).consistency_proof(old, new)

    def bet_proofs(self, uid: int, size: int, *, content: bool = False) -> list[CommitProof] | None:
        """The commits that placed and closed bet ``uid`` (within the first ``size`` records),
        each with its inclusion proof in the tree of ``size`` (and with ``content``, its
        canonical content); None: no such bet."""
        with self._tx(write=False) as connection:
            row = connection.execute(
                select(bets.c.placed_grp, bets.c.closed_grp, bets.c.state).where(bets.c.uid == uid)
            ).first()
            if row is None:
                return None
            closed_by = row.closed_grp
            groups = {row.placed_grp, closed_by} - {None}
            # Placed or closed before the chain began: the history's record (group NULL).
            history = row.placed_grp is None or (row.state != "placed" and closed_by is None)
            c = journal_chain.c
            conditions = [c.grp.in_(sorted(groups))] if groups else []
            if history:
                conditions.append(c.grp.is_(None))
            if not conditions:
                return []
            found = connection.execute(
                select(journal_chain).where(or_(*conditions), c.seq <= size).order_by(c.seq)
            ).all()
            nodes = Nodes(connection)
            proofs = []
            for stored in found:
                record = chain.ChainRecord(
                    int(stored.seq),
                    stored.grp,
                    bytes.fromhex(stored.prev_hash),
                    bytes.fromhex(stored.content_hash),
                    bytes.fromhex(stored.record_hash),
                    utc(stored.committed_at) or stored.committed_at,
                    int(stored.row_count),
                )
                raw = record_bytes(
                    record.seq, record.prev_hash, record.content_hash, record.committed_at
                )
                path = nodes.inclusion_proof(record.seq - 1, size)
                text = chain.commit_text(connection, record.grp) if content else None
                proofs.append(CommitProof(record.seq, raw, record.content_hash, path, text))
        return proofs
