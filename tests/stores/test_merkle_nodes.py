"""The journal tree read through its kept subtrees gives the roots, the inclusion proofs and the
consistency proofs that hashing every leaf gives, before and after subtrees are kept, at sizes
on and off the kept boundaries, on both stores."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, func, insert, select

import ledger
from ledger.integrity import merkle
from ledger.stores.chain_tables import journal_chain, journal_nodes
from ledger.stores.merkle_nodes import LOW, Nodes

COUNT = 5 * (1 << LOW) + 37  # levels LOW to LOW + 2 kept, and a ragged end


def leaf(seq: int) -> bytes:
    return merkle.leaf_hash(hashlib.sha256(str(seq).encode()).digest())


@pytest.fixture
def connection(store_url: str) -> Iterator[Connection]:
    rows = [
        {"seq": seq, "grp": 10**9 + seq, "prev_hash": "00" * 32, "content_hash": "00" * 32,
         "record_hash": leaf(seq).hex(), "committed_at": datetime(2026, 1, 1, tzinfo=UTC),
         "row_count": 1}
        for seq in range(1, COUNT + 1)
    ]  # fmt: skip
    with ledger.open_ledger(store_url, migrate=True) as book, book.store.engine.begin() as found:  # type: ignore[attr-defined]
        found.execute(journal_chain.delete())
        found.execute(insert(journal_chain), rows)
        yield found


SIZES = [1, 2, 3, 255, 256, 257, 511, 512, 513, 1024, COUNT - 1, COUNT]


def test_roots_and_proofs_through_kept_subtrees_equal_those_of_every_leaf(
    connection: Connection,
) -> None:
    leaves = [leaf(seq) for seq in range(1, COUNT + 1)]
    nodes = Nodes(connection)
    for kept_up_to in (0, 700, COUNT):
        if kept_up_to:
            nodes.extend(kept_up_to)
        for size in SIZES:
            expected = merkle.root(leaves[:size])
            assert nodes.root(size) == expected, (kept_up_to, size)
            for index in {0, size // 2, size - 1}:
                path = nodes.inclusion_proof(index, size)
                assert path == merkle.inclusion_proof(leaves.__getitem__, index, size)
                assert merkle.verify_inclusion(leaves[index], index, size, path, expected)
            for old in {1, size // 3, size - 1} - {0}:
                proof = nodes.consistency_proof(old, size)
                assert proof == merkle.consistency_proof(leaves.__getitem__, old, size)
                old_root = merkle.root(leaves[:old])
                assert merkle.verify_consistency(old, size, old_root, expected, proof)


def test_keeping_subtrees_adds_each_complete_one_once(connection: Connection) -> None:
    nodes = Nodes(connection)
    assert nodes.extend(700) == 2 + 1  # two of 256 leaves, one of 512
    assert nodes.extend(700) == 0
    assert nodes.extend(COUNT) == 3 + 1 + 1  # three more of 256, one of 512, one of 1024
    kept = connection.execute(select(func.count()).select_from(journal_nodes)).scalar()
    assert kept == 5 + 2 + 1  # 256-leaf: 5, 512-leaf: 2, 1024-leaf: 1
