"""The event feed's pure rules: rows from decisions, exact rendering, the parameters' bounds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledger import events
from ledger.domain import Bet, BetState, Funding, deposit, withdrawal
from ledger.errors import InvalidRequest

SCALES = {"EUR": 2, "JPY": 0, "BTC": 8}
AT = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def bet(state: BetState, payout: int | None = None, payout_currency: str | None = None) -> Bet:
    return Bet(1, "u1", 7, "EUR", 1000, 100, Funding.CASH, state, payout, payout_currency)


def test_a_settled_bet_with_a_zero_payout_still_has_its_event() -> None:
    [row] = events.closed_rows([bet(BetState.SETTLED, 0, None)], None)
    assert (row.type, row.payout, row.payout_currency) == ("bet.settled", 0, None)
    assert events.to_event(5, AT, row, SCALES.__getitem__).payout == "0.00"


def test_a_payout_is_rendered_at_its_own_currencys_scale() -> None:
    [row] = events.closed_rows([bet(BetState.SETTLED, 1234, "JPY")], "rq")
    event = events.to_event(5, AT, row, SCALES.__getitem__)
    assert (event.amount, event.rake, event.payout) == ("10.00", "1.00", "1234")
    assert event.request_id == "rq"


def test_a_refunded_bet_has_no_payout() -> None:
    [row] = events.closed_rows([bet(BetState.REFUNDED)], None)
    assert (row.type, row.payout) == ("bet.refunded", None)


def test_movements_say_the_amount_moved_never_negative() -> None:
    [paid_in] = events.movement_rows(deposit("u1", "BTC", 1, "r1"), None)
    [paid_out] = events.movement_rows(withdrawal("u1", "BTC", 1, "r2"), "op")
    assert (paid_in.type, paid_in.amount) == ("deposit", 1)
    assert (paid_out.type, paid_out.amount, paid_out.request_id) == ("withdrawal", 1, "op")
    assert events.to_event(1, AT, paid_out, SCALES.__getitem__).amount == "0.00000001"


def test_a_long_poll_wait_is_capped_and_bad_waits_are_refused() -> None:
    assert events.parse_wait(None) == 0.0
    assert events.parse_wait("2.5") == 2.5
    assert events.parse_wait("3600") == events.MAX_WAIT
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(InvalidRequest):
            events.parse_wait(bad)


def test_after_is_an_event_id_from_zero() -> None:
    assert events.parse_after(None) == 0
    assert events.parse_after("42") == 42
    # "²" is a digit to str.isdigit() but not to int(): a 400 too, never a 500.
    for bad in ("-1", "1.5", "x", str(2**63), "²", "1²"):
        with pytest.raises(InvalidRequest):
            events.parse_after(bad)


def test_types_are_known_names_kept_once() -> None:
    assert events.parse_types("deposit, bet.placed,deposit") == ("deposit", "bet.placed")
    assert events.parse_types("") is None
    with pytest.raises(InvalidRequest):
        events.parse_types("bet.won")
