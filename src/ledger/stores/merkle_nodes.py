"""The journal tree's complete subtrees of 256 leaves and more, kept, so that a root and a
bet's inclusion proof cost about ``log2(n)`` reads and hashes instead of a pass over every
commit record (a million records: a million rows read and two million hashes per proof).

Invariant: a row ``(level, idx, hash)`` of ``journal_nodes`` is the RFC 6962 hash of the
complete subtree over leaves ``[idx * 2**level, (idx + 1) * 2**level)``, leaf ``i`` being the
stored ``record_hash`` of record ``i + 1``, for ``level >= LOW``. Nodes are added, never
changed, when a checkpoint is kept (:meth:`Nodes.extend`, from the records and the nodes below);
anything not kept is computed from the records. Nothing that proves integrity trusts them:
``ledger verify`` recomputes the tree from the records, so a node altered in the database makes
the next signed root disagree with the records, which any verify against that checkpoint
reports. Proved by ``tests/stores/test_merkle_nodes.py`` (roots and proofs equal those computed
from every leaf, with and without kept nodes, both stores).
"""

from __future__ import annotations

from sqlalchemy import Connection, func, insert, select

from ..integrity import merkle
from .chain_tables import journal_chain, journal_nodes

__all__ = ["LOW", "Nodes"]

LOW = 8  # kept subtrees span 2**8 = 256 leaves or more: about n / 128 rows in all


class Nodes:
    """The tree of the records on ``connection``, read through the kept subtrees."""

    def __init__(self, connection: Connection) -> None:
        self._conn = connection

    def leaves(self, start: int, end: int) -> list[bytes]:
        """Leaf hashes ``start`` to ``end - 1`` (records ``start + 1`` to ``end``)."""
        c = journal_chain.c
        rows = self._conn.execute(
            select(c.record_hash).where(c.seq > start, c.seq <= end).order_by(c.seq)
        )
        return [bytes.fromhex(value) for (value,) in rows]

    def subtree(self, start: int, end: int) -> bytes:
        """The hash of the subtree over leaves ``[start, end)``, as RFC 6962 splits a tree
        from leaf 0 (every left part is complete and aligned, so it may be kept)."""
        size = end - start
        if size >= 1 << LOW and size & (size - 1) == 0 and start % size == 0:
            level = size.bit_length() - 1
            kept = self._kept(level, start >> level)
            if kept is not None:
                return kept
        if size <= 1 << LOW:
            return merkle.root(self.leaves(start, end))
        split = 1 << ((size - 1).bit_length() - 1)
        return merkle.node_hash(
            self.subtree(start, start + split), self.subtree(start + split, end)
        )

    def root(self, size: int) -> bytes:
        """The root of the tree of the first ``size`` records."""
        return merkle.EMPTY_ROOT if size == 0 else self.subtree(0, size)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """The audit path of leaf ``index`` in the tree of ``size`` (RFC 6962 ``PATH``)."""
        return merkle.inclusion_proof(self._leaf, index, size, self.subtree)

    def consistency_proof(self, old: int, new: int) -> list[bytes]:
        """The proof that the tree of ``old`` is the start of the tree of ``new`` (RFC 6962
        ``PROOF``)."""
        return merkle.consistency_proof(self._leaf, old, new, self.subtree)

    def extend(self, size: int) -> int:
        """Keep every complete subtree of ``LOW`` levels or more within the first ``size``
        leaves not kept yet (in a writing transaction); how many were added."""
        added = 0
        level = LOW
        while size >> level:
            have = self._conn.execute(
                select(func.max(journal_nodes.c.idx)).where(journal_nodes.c.level == level)
            ).scalar()
            first = 0 if have is None else int(have) + 1
            for idx in range(first, size >> level):
                start = idx << level
                if level == LOW:
                    value = merkle.root(self.leaves(start, start + (1 << LOW)))
                else:
                    half = 1 << (level - 1)
                    value = merkle.node_hash(
                        self.subtree(start, start + half),
                        self.subtree(start + half, start + 2 * half),
                    )
                # Kept at once: the next level's nodes read these.
                row = {"level": level, "idx": idx, "hash": value.hex()}
                self._conn.execute(insert(journal_nodes), [row])
            added += max(0, (size >> level) - first)
            level += 1
        return added

    def _leaf(self, index: int) -> bytes:
        return self.leaves(index, index + 1)[0]

    def _kept(self, level: int, idx: int) -> bytes | None:
        c = journal_nodes.c
        found = self._conn.execute(select(c.hash).where(c.level == level, c.idx == idx)).scalar()
        return None if found is None else bytes.fromhex(found)
