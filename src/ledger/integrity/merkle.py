"""A Merkle tree over the journal's commit records, hashed as certificate-transparency logs hash
theirs (RFC 6962 section 2.1, RFC 9162 section 2.1): SHA-256, a leaf ``H(0x00 || data)``, a node
``H(0x01 || left || right)``, the left subtree always the largest power of two that is smaller
than the tree. So an auditor's own tooling (or any transparency-log library) checks our proofs,
and a proof that one record is in a tree of ``n``, or that a tree of ``m`` is the start of one
of ``n``, takes about ``log2(n)`` hashes.

Pure: bytes in, bytes out, no database. :class:`TreeBuilder` computes a root in one pass over
the leaves with memory for ``log2(n)`` hashes, so a million commit records verify in bounded
memory; the proofs are computed from a function that answers a leaf hash by index.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "EMPTY_ROOT",
    "TreeBuilder",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()  # the root of a tree of no leaves


def leaf_hash(data: bytes) -> bytes:
    """The hash of one leaf: ``SHA-256(0x00 || data)``."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node: ``SHA-256(0x01 || left || right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The size of the left subtree of a tree of ``size`` > 1 leaves: the largest power of two
    smaller than ``size``."""
    return 1 << ((size - 1).bit_length() - 1)


class TreeBuilder:
    """The root of a tree whose leaf hashes arrive one at a time, in memory for ``log2(n)``
    hashes: a stack of the roots of complete subtrees, merged as they pair up (the same tree as
    :func:`root`)."""

    __slots__ = ("_stack", "size")

    def __init__(self) -> None:
        self._stack: list[tuple[int, bytes]] = []  # (leaves, root) of complete subtrees
        self.size = 0

    def add(self, leaf: bytes) -> None:
        """Append a leaf hash (:func:`leaf_hash` of a record)."""
        stack, count, value = self._stack, 1, leaf
        while stack and stack[-1][0] == count:
            value = node_hash(stack.pop()[1], value)
            count *= 2
        stack.append((count, value))
        self.size += 1

    def root(self) -> bytes:
        """The root of the tree of every leaf added so far."""
        if not self._stack:
            return EMPTY_ROOT
        value = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            value = node_hash(left, value)
        return value


def root(leaves: Iterable[bytes]) -> bytes:
    """The root of the tree of ``leaves`` (leaf hashes, in order)."""
    builder = TreeBuilder()
    for leaf in leaves:
        builder.add(leaf)
    return builder.root()


LeafAt = Callable[[int], bytes]


def _subtree(leaf_at: LeafAt, start: int, end: int) -> bytes:
    builder = TreeBuilder()
    for index in range(start, end):
        builder.add(leaf_at(index))
    return builder.root()


def inclusion_proof(
    leaf_at: LeafAt,
    index: int,
    size: int,
    subtree: Callable[[int, int], bytes] | None = None,
) -> list[bytes]:
    """The audit path of leaf ``index`` in the tree of the first ``size`` leaves (RFC 6962
    section 2.1.1, ``PATH(m, D[n])``), nearest the leaf first. ``leaf_at(i)``: leaf hash ``i``;
    ``subtree(start, end)``, when given, answers the hash of leaves ``[start, end)`` instead of
    hashing them from ``leaf_at`` (a store that keeps complete subtrees)."""
    if subtree is None:
        subtree = functools.partial(_subtree, leaf_at)
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index - start < k:
            path.append(subtree(start + k, end))
            end = start + k
        else:
            path.append(subtree(start, start + k))
            start += k
    path.reverse()
    return path


def consistency_proof(
    leaf_at: LeafAt,
    old: int,
    new: int,
    subtree: Callable[[int, int], bytes] | None = None,
) -> list[bytes]:
    """The proof that the tree of the first ``old`` leaves is the start of the tree of the
    first ``new`` (RFC 6962 section 2.1.2, ``PROOF(m, D[n])``); ``subtree`` as for
    :func:`inclusion_proof`."""
    if subtree is None:
        subtree = functools.partial(_subtree, leaf_at)
    if not 0 <= old <= new:
        raise ValueError(f"no consistency proof from {old} to {new}")
    if old in (0, new):
        return []
    proof: list[bytes] = []
    start, end, complete = 0, new, True
    # SUBPROOF(m, D[start:end], complete), unrolled: each step appends one subtree's root.
    m = old
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            proof.append(subtree(start + k, end))
            end = start + k
        else:
            proof.append(subtree(start, start + k))
            start += k
            m -= k
            complete = False
    if not complete:
        proof.append(subtree(start, end))
    proof.reverse()
    return proof


def verify_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], expected_root: bytes
) -> bool:
    """Whether ``path`` proves leaf hash ``leaf`` at ``index`` in the tree of ``size`` whose
    root is ``expected_root`` (RFC 9162 section 2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn, value = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            value = node_hash(sibling, value)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            value = node_hash(value, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and value == expected_root


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether ``proof`` shows that the tree of ``old`` leaves with root ``old_root`` is the
    start of the tree of ``new`` with root ``new_root`` (RFC 9162 section 2.1.4.2)."""
    if not 0 <= old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof  # the empty tree starts every tree
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old tree is a subtree of the new
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    first = second = path[0]
    for value in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first = node_hash(value, first)
            second = node_hash(value, second)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            second = node_hash(second, value)
        fn >>= 1
        sn >>= 1
    return sn == 0 and first == old_root and second == new_root
