"""Stale holds by the tournament's estimated end (the directory and the books together)."""

from __future__ import annotations

import ledger
from support import payloads as P


def placed_in(book: ledger.Ledger, bet: int, pool: int, end: str | None) -> None:
    body = P.place(P.entry(bet, pool=pool, amount="0", rake="0"))
    if end is not None:
        body["bets"][0]["pool"]["estimatedEndTime"] = end
    book.place_bets(body)


def test_a_hold_is_stale_once_its_tournaments_end_plus_grace_has_passed_whatever_its_age(
    book: ledger.Ledger,
) -> None:
    placed_in(book, 1, 70, "2020-01-01T00:00:00Z")  # ended long ago: stale though just placed
    placed_in(book, 2, 71, "2999-01-01T00:00:00Z")  # ends far ahead: not stale
    placed_in(book, 3, 72, None)  # no end time: the age rule (7 days), young: not stale
    holds = {hold.uid: hold.stale for hold in book.holds(limit=10).items}
    assert holds == {1: True, 2: False, 3: False}
    assert [hold.uid for hold in book.holds(stale=True, limit=10).items] == [1]
    assert book.count_stale_holds() == 1
