"""The journal's Merkle tree hashes and proves as RFC 6962 and RFC 9162 say: the published
certificate-transparency test vectors, and every leaf and every pair of sizes of small trees."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from ledger.integrity.merkle import (
    EMPTY_ROOT,
    TreeBuilder,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# The RFC 6962 test vectors of the certificate-transparency reference implementations.
LEAVES = [bytes.fromhex(text) for text in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]  # fmt: skip
ROOTS = [bytes.fromhex(text) for text in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]  # fmt: skip
PATHS = {
    (0, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (5, 8): ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
}  # fmt: skip
CONSISTENCY = {
    (1, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (6, 8): ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 5): ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
}  # fmt: skip

HASHES = [leaf_hash(leaf) for leaf in LEAVES]


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962's definition, recursion and all: what the tree must equal."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(_mth(leaves[:k]), _mth(leaves[k:]))


def test_the_roots_are_the_rfc_6962_test_vectors() -> None:
    assert root([]) == EMPTY_ROOT == hashlib.sha256(b"").digest()
    for size in range(1, 9):
        assert root(HASHES[:size]) == ROOTS[size - 1]


def test_the_audit_paths_are_the_rfc_6962_test_vectors_and_verify() -> None:
    for (index, size), path in PATHS.items():
        expected = [bytes.fromhex(text) for text in path]
        assert inclusion_proof(HASHES.__getitem__, index, size) == expected
        assert verify_inclusion(HASHES[index], index, size, expected, ROOTS[size - 1])


def test_the_consistency_proofs_are_the_rfc_6962_test_vectors_and_verify() -> None:
    for (old, new), proof in CONSISTENCY.items():
        expected = [bytes.fromhex(text) for text in proof]
        assert consistency_proof(HASHES.__getitem__, old, new) == expected
        assert verify_consistency(old, new, ROOTS[old - 1], ROOTS[new - 1], expected)


@given(st.lists(st.binary(max_size=8), max_size=40))
def test_the_tree_built_one_leaf_at_a_time_is_rfc_6962s_tree(data: list[bytes]) -> None:
    leaves = [leaf_hash(item) for item in data]
    builder = TreeBuilder()
    for leaf in leaves:
        builder.add(leaf)
    assert builder.size == len(leaves)
    assert builder.root() == _mth(leaves)


@given(st.integers(1, 33), st.data())
def test_every_leaf_is_proved_in_its_tree_and_no_other_leaf_or_place_is(
    size: int, data: st.DataObject
) -> None:
    leaves = [leaf_hash(n.to_bytes(4, "big")) for n in range(size)]
    top = _mth(leaves)
    index = data.draw(st.integers(0, size - 1))
    path = inclusion_proof(leaves.__getitem__, index, size)
    assert len(path) <= size.bit_length()
    assert verify_inclusion(leaves[index], index, size, path, top)
    other = data.draw(st.integers(0, size - 1).filter(lambda n: n != index)) if size > 1 else None
    if other is not None:
        assert not verify_inclusion(leaves[other], index, size, path, top)
        assert not verify_inclusion(leaves[index], other, size, path, top)
    if path:
        tampered = [*path[:-1], node_hash(path[-1], path[-1])]
        assert not verify_inclusion(leaves[index], index, size, tampered, top)


@given(st.integers(0, 33), st.integers(0, 33), st.data())
def test_a_tree_is_proved_the_start_of_every_larger_tree_and_of_no_rewritten_one(
    old: int, new: int, data: st.DataObject
) -> None:
    old, new = min(old, new), max(old, new)
    leaves = [leaf_hash(n.to_bytes(4, "big")) for n in range(new)]
    old_root, new_root = _mth(leaves[:old]), _mth(leaves)
    proof = consistency_proof(leaves.__getitem__, old, new)
    assert verify_consistency(old, new, old_root, new_root, proof)
    if 0 < old < new:
        # The same sizes, but one of the first ``old`` records rewritten in the new tree.
        changed = data.draw(st.integers(0, old - 1))
        rewritten = list(leaves)
        rewritten[changed] = leaf_hash(b"rewritten")
        forged = consistency_proof(rewritten.__getitem__, old, new)
        assert not verify_consistency(old, new, old_root, _mth(rewritten), forged)
        assert not verify_consistency(old, new, old_root, new_root, proof[:-1])
