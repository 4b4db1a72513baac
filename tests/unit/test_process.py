"""Process-wide tweaks (ledger._process): when the cyclic garbage collector is paused."""

from __future__ import annotations

import gc

from ledger._process import BULK, paused_gc


def test_a_request_of_more_than_bulk_bets_runs_with_the_collector_paused_and_resumes_it() -> None:
    assert gc.isenabled()
    with paused_gc(BULK + 1):
        assert not gc.isenabled()
        with paused_gc(1_000_000):  # nested pauses are counted
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_request_of_at_most_bulk_bets_leaves_the_collector_alone() -> None:
    with paused_gc(BULK):
        assert gc.isenabled()


def test_a_place_bet_of_a_thousand_entries_runs_with_the_collector_paused() -> None:
    # The embedded batch size of benchmark (b): its collector passes were 8% of its CPU.
    with paused_gc(1_000):
        assert not gc.isenabled()
    assert gc.isenabled()
