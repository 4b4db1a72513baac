"""Request references: unique, unguessable, and in time order so that their keys append."""

from __future__ import annotations

import time

from ledger._process import new_reference


def test_a_reference_is_128_bits_of_hex_with_the_millisecond_first() -> None:
    before = time.time_ns() // 1_000_000
    reference = new_reference()
    after = time.time_ns() // 1_000_000
    assert len(reference) == 32
    assert before <= int(reference[:12], 16) <= after


def test_references_of_later_milliseconds_sort_after_earlier_ones() -> None:
    first = new_reference()
    time.sleep(0.002)
    assert new_reference() > first


def test_references_of_the_same_millisecond_stay_unique() -> None:
    drawn = [new_reference() for _ in range(50_000)]
    assert len(set(drawn)) == len(drawn)
    # The random tail: no two share it, so a reference is not guessable from another.
    assert len({reference[12:] for reference in drawn}) == len(drawn)
