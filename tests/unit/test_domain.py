"""The pure domain, no I/O: what each request does to a bet in each state (DESIGN 4 and 5)."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from ledger import domain
from ledger.domain import (
    Bet,
    BetState,
    Entry,
    Funding,
    Posting,
    RefundItem,
    Replay,
    SettleItem,
    Transaction,
    TxnKind,
)
from ledger.errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    InsufficientFunds,
    InvalidAmount,
    LedgerError,
    ReferenceConflict,
    UnbalancedTransaction,
)

ENTRY = Entry(bet_uid=1, user="u1", pool_uid=7, currency="EUR", amount=1000, rake=100)


def placed(entry: Entry = ENTRY) -> Bet:
    placement = domain.place(entry, None, {})
    assert not isinstance(placement, Replay)
    return placement.bet


def legs(postings: tuple[Posting, ...] | Transaction) -> set[tuple[str, int]]:
    if isinstance(postings, Transaction):
        postings = postings.postings
    return {(p.account, p.amount) for p in postings}


# --- Place Bet -----------------------------------------------------------------------------------


def test_paid_entry_holds_amount_plus_rake_from_the_user() -> None:
    placement = domain.place(ENTRY, None, {"k": "v"})
    assert not isinstance(placement, Replay)
    assert placement.bet.funding is Funding.CASH
    assert placement.bet.secrets == {"k": "v"}
    assert legs(placement.legs) == {("user:u1", -1100), ("user:u1:held", 1100)}
    # Legs on user accounts name their bet, so every bet's money can be traced.
    assert {leg.bet_uid for leg in placement.legs} == {1}


def test_ticket_entry_is_held_from_house_tickets() -> None:
    placement = domain.place(ENTRY._replace(ticket="jwt"), None, {})
    assert not isinstance(placement, Replay)
    assert placement.bet.funding is Funding.TICKET
    assert legs(placement.legs) == {("house:tickets", -1100), ("user:u1:held", 1100)}


def test_free_entry_is_recorded_without_postings() -> None:
    placement = domain.place(ENTRY._replace(amount=0, rake=0), None, {})
    assert not isinstance(placement, Replay)
    assert placement.bet.funding is Funding.FREE
    assert placement.legs == ()


@pytest.mark.parametrize(
    ("state", "replay"),
    [
        (BetState.PLACED, Replay.EXISTS),
        (BetState.REFUNDED, Replay.EXISTS_REFUNDED),
        (BetState.SETTLED, Replay.EXISTS_SETTLED),
    ],
)
def test_identical_place_bet_resend_is_a_named_replay_in_any_state(
    state: BetState, replay: Replay
) -> None:
    assert domain.place(ENTRY, placed()._replace(state=state), {}) is replay


@pytest.mark.parametrize(
    "change",
    [{"user": "u2"}, {"pool_uid": 8}, {"amount": 1001}, {"rake": 0}, {"currency": "USD"}],
)
def test_different_place_bet_for_a_placed_bet_is_a_conflict(change: dict[str, object]) -> None:
    with pytest.raises(BetConflict):
        domain.place(ENTRY._replace(**change), placed(), {})  # type: ignore[arg-type]


@pytest.mark.parametrize("state", [BetState.REFUNDED, BetState.SETTLED])
def test_place_bet_for_a_closed_bet_is_never_debited_again(state: BetState) -> None:
    closed = placed()._replace(state=state)
    assert isinstance(domain.place(ENTRY._replace(amount=5), closed, {}), Replay)


# --- Refund --------------------------------------------------------------------------------------


REFUND = RefundItem(bet_uid=1, user="u1", pool_uid=7)


def test_refund_of_unknown_bet_is_not_found() -> None:
    with pytest.raises(BetNotFound):
        domain.refund(REFUND, None)


def test_refund_reverses_the_hold_to_where_it_came_from() -> None:
    closing = domain.refund(REFUND, placed())
    assert not isinstance(closing, Replay)
    assert closing.bet.state is BetState.REFUNDED
    assert legs(closing.legs) == {("user:u1:held", -1100), ("user:u1", 1100)}
    ticket = domain.refund(REFUND, placed(ENTRY._replace(ticket="jwt")))
    assert not isinstance(ticket, Replay)
    assert legs(ticket.legs) == {("user:u1:held", -1100), ("house:tickets", 1100)}
    free = domain.refund(REFUND, placed(ENTRY._replace(amount=0, rake=0)))
    assert not isinstance(free, Replay)
    assert free.legs == ()


def test_refund_of_refunded_bet_does_nothing() -> None:
    assert domain.refund(REFUND, placed()._replace(state=BetState.REFUNDED)) is (
        Replay.ALREADY_REFUNDED
    )


def test_refund_of_settled_bet_is_already_settled() -> None:
    with pytest.raises(BetAlreadySettled):
        domain.refund(REFUND, placed()._replace(state=BetState.SETTLED, payout=0))


@pytest.mark.parametrize("item", [REFUND._replace(user="u2"), REFUND._replace(pool_uid=8)])
def test_refund_naming_another_owner_is_a_conflict(item: RefundItem) -> None:
    with pytest.raises(BetConflict):
        domain.refund(item, placed())


# --- Settle --------------------------------------------------------------------------------------


SETTLE = SettleItem(bet_uid=1, user="u1", pool_uid=7, payout=2500, payout_currency="EUR")


def test_settle_captures_the_hold_and_pays_the_payout() -> None:
    closing = domain.settle(SETTLE, placed())
    assert not isinstance(closing, Replay)
    assert closing.bet.state is BetState.SETTLED
    assert closing.bet.payout == 2500
    # One leg releases the whole hold; the buy-in and the rake go to their house accounts.
    assert legs(closing.legs) == {
        ("user:u1:held", -1100),
        ("house:entries", 1000),
        ("house:rake", 100),
        ("house:prizes", -2500),
        ("user:u1", 2500),
    }


def test_zero_payout_captures_and_credits_nothing() -> None:
    closing = domain.settle(SETTLE._replace(payout=0), placed())
    assert not isinstance(closing, Replay)
    assert all(p.account != "user:u1" for p in closing.legs)


def test_settle_of_unknown_bet_is_not_found() -> None:
    with pytest.raises(BetNotFound):
        domain.settle(SETTLE, None)


def test_settle_of_refunded_bet_is_already_refunded() -> None:
    with pytest.raises(BetAlreadyRefunded):
        domain.settle(SETTLE, placed()._replace(state=BetState.REFUNDED))


def test_settle_resent_with_same_payout_does_nothing_and_other_payout_conflicts() -> None:
    done = domain.settle(SETTLE, placed())
    assert not isinstance(done, Replay)
    assert domain.settle(SETTLE, done.bet) is Replay.ALREADY_SETTLED
    with pytest.raises(BetConflict):
        domain.settle(SETTLE._replace(payout=2501), done.bet)
    zero = domain.settle(SETTLE._replace(payout=0), placed())
    assert not isinstance(zero, Replay)
    # Zero is zero whatever currency the re-send names.
    resent = domain.settle(SETTLE._replace(payout=0, payout_currency="USD"), zero.bet)
    assert resent is Replay.ALREADY_SETTLED


def test_settle_naming_another_owner_is_a_conflict() -> None:
    with pytest.raises(BetConflict):
        domain.settle(SETTLE._replace(user="u2"), placed())


# --- deposits, withdrawals, balancing -------------------------------------------------------


def test_deposit_and_withdrawal_move_money_between_cash_and_the_user() -> None:
    deposit = domain.deposit("u1", "EUR", 500, "r1")
    assert deposit.key == "movement:r1"
    assert legs(deposit) == {("house:cash", -500), ("user:u1", 500)}
    withdrawal = domain.withdrawal("u1", "EUR", 500, "r1")
    # One namespace of references for both kinds: a unique key the two cannot both claim.
    assert withdrawal.key == "movement:r1"
    assert legs(withdrawal) == {("user:u1", -500), ("house:cash", 500)}


@pytest.mark.parametrize("amount", [0, -1])
def test_non_positive_movement_is_refused(amount: int) -> None:
    with pytest.raises(InvalidAmount):
        domain.deposit("u1", "EUR", amount, "r")


def test_same_reference_same_movement_is_a_replay_otherwise_a_conflict() -> None:
    first = domain.deposit("u1", "EUR", 500, "r1")
    assert domain.movement(first, None) is first
    assert domain.movement(domain.deposit("u1", "EUR", 500, "r1"), first) is Replay.MOVEMENT_EXISTS
    for other in (
        domain.deposit("u2", "EUR", 500, "r1"),
        domain.deposit("u1", "USD", 500, "r1"),
        domain.deposit("u1", "EUR", 501, "r1"),
        domain.withdrawal("u1", "EUR", 500, "r1"),
    ):
        with pytest.raises(ReferenceConflict):
            domain.movement(other, first)


def test_unbalanced_transaction_cannot_be_built() -> None:
    with pytest.raises(UnbalancedTransaction):
        Transaction(
            key="x",
            kind=TxnKind.DEPOSIT,
            postings=(Posting("house:cash", "EUR", -5), Posting("user:u1", "EUR", 4)),
        )
    # Balanced per currency, not across currencies.
    assert domain.residual([Posting("a", "EUR", 5), Posting("b", "JPY", -5)]) == {
        "EUR": 5,
        "JPY": -5,
    }


def test_a_request_journal_sums_house_legs_and_keeps_one_user_leg_per_bet() -> None:
    first = domain.place(ENTRY._replace(ticket="jwt"), None, {})
    second = domain.place(ENTRY._replace(bet_uid=2, ticket="jwt"), None, {})
    assert not isinstance(first, Replay)
    assert not isinstance(second, Replay)
    journal = Transaction.journal("hold:r", TxnKind.HOLD, [*first.legs, *second.legs])
    assert sorted(journal.postings) == sorted(
        [
            Posting("user:u1:held", "EUR", 1100, 1),
            Posting("user:u1:held", "EUR", 1100, 2),
            Posting("house:tickets", "EUR", -2200),
        ]
    )
    with pytest.raises(UnbalancedTransaction):
        Transaction.journal("x", TxnKind.HOLD, first.legs[:1])


def test_account_names_and_kinds() -> None:
    assert domain.account_kind(domain.user_account("u1")) == "available"
    assert domain.account_kind(domain.held_account("u1")) == "held"
    assert domain.account_kind(domain.HOUSE_PRIZES) == "house"
    # The one uid shape whose available account would be someone else's held account.
    assert domain.user_account("u1:held") == domain.held_account("u1")


def test_every_rejection_carries_a_stable_key_and_status() -> None:
    expected = {
        BetNotFound: ("bet.not_found", 404),
        BetConflict: ("bet.conflict", 409),
        BetAlreadyRefunded: ("bet.already_refunded", 409),
        BetAlreadySettled: ("bet.already_settled", 409),
        ReferenceConflict: ("reference.conflict", 409),
        InvalidAmount: ("amount.invalid", 400),
    }
    for error_type, (key, status) in expected.items():
        error: LedgerError = error_type()
        assert (error.key, error.status) == (key, status)
        assert error.to_dict() == {"error": key, "message": key}


# --- batch decisions (what the writer asks the domain; no database) ---------------------------


def request(*entries: Entry, reference: str = "r1") -> domain.PlaceRequest:
    return domain.PlaceRequest(list(entries), reference)


def test_place_many_refuses_an_overdraft_and_later_requests_see_earlier_debits() -> None:
    u1 = ("user:u1", "EUR")
    decisions = domain.place_many(
        [
            request(ENTRY, reference="a"),  # 11.00 of u1's 20.00
            request(ENTRY._replace(bet_uid=2), reference="b"),  # 11.00 more: short
            request(ENTRY._replace(bet_uid=3, amount=800, rake=100), reference="c"),  # 9.00 fits
        ],
        known={},
        balances={u1: 2000},
    )
    first, second, third = decisions
    assert isinstance(first, domain.PlaceDecision)
    assert first.answer.placed == [1]
    assert first.answer.secrets == {"ledger_ref": "a"}
    assert first.transaction is not None
    assert first.transaction.key == "hold:a"
    assert isinstance(second, InsufficientFunds)
    assert second.bet_uid == 2
    assert isinstance(third, domain.PlaceDecision)
    assert third.answer.placed == [3]


def test_place_many_answers_a_pure_resend_with_the_secrets_stored_at_placement() -> None:
    stored = placed()._replace(secrets={"ledger_ref": "original"})
    [decision] = domain.place_many([request(ENTRY, reference="new")], {1: stored}, {})
    assert isinstance(decision, domain.PlaceDecision)
    assert (decision.answer.placed, decision.answer.unchanged) == ([], [1])
    assert decision.answer.secrets == {"ledger_ref": "original"}
    assert decision.bets == []
    assert decision.transaction is None


def test_place_many_holds_an_entry_named_twice_in_one_request_once() -> None:
    [decision] = domain.place_many([request(ENTRY, ENTRY)], {}, {("user:u1", "EUR"): 5000})
    assert isinstance(decision, domain.PlaceDecision)
    assert (decision.answer.placed, decision.answer.unchanged) == ([1], [1])
    assert [bet.uid for bet in decision.bets] == [1]


def test_a_refused_request_in_a_group_leaves_no_trace_for_the_next() -> None:
    conflicting = ENTRY._replace(bet_uid=2, user="u2")
    decisions = domain.place_many(
        [
            request(ENTRY._replace(bet_uid=2), conflicting, reference="a"),  # conflict inside
            request(ENTRY._replace(bet_uid=2), reference="b"),  # so bet 2 is still new here
        ],
        known={},
        balances={("user:u1", "EUR"): 5000},
    )
    assert isinstance(decisions[0], BetConflict)
    assert isinstance(decisions[1], domain.PlaceDecision)
    assert decisions[1].answer.placed == [2]


def test_merged_chunks_answer_the_new_secrets_when_any_chunk_placed() -> None:
    resent = domain.PlacedBets({"ledger_ref": "old"}, [], [1])
    fresh = domain.PlacedBets({"ledger_ref": "new"}, [2], [])
    merged = domain.merge_placements([resent, fresh])
    assert (merged.secrets, merged.placed, merged.unchanged) == ({"ledger_ref": "new"}, [2], [1])


def test_refund_many_notes_a_disagreeing_payload_and_refunds_the_record() -> None:
    bet = placed()._replace(secrets={"ledger_ref": "x"})
    item = REFUND._replace(amount=D("9.99"), rake=D("1.00"), secrets={"ledger_ref": "y"})
    decision = domain.refund_many([item, item], {1: bet}, "refund:r:0", lambda _: 2)
    assert (decision.answer.closed, decision.answer.unchanged) == ([1], [1])
    assert decision.transaction is not None
    assert legs(decision.transaction) == {("user:u1:held", -1100), ("user:u1", 1100)}
    assert decision.notes == [
        "bet 1: the secrets echoed differ from those returned at placement",
        "bet 1: the refund's amount 9.99 differs from the recorded 10.00 EUR",
    ]


def test_an_empty_secrets_echo_is_no_claim() -> None:
    decision = domain.refund_many([REFUND._replace(secrets={})], {1: placed()}, "k", lambda _: 2)
    assert decision.notes == []


def test_settle_many_pays_in_the_bets_currency_when_the_payout_names_none() -> None:
    claim = domain.SettleClaim(1, "u1", 7, D("25.00"), None)
    decision = domain.settle_many([claim], {1: placed()}, "settle:r:0", lambda _: 2)
    assert decision.bets[0].payout == 2500
    assert decision.bets[0].payout_currency == "EUR"
    with pytest.raises(BetNotFound):
        domain.settle_many([claim], {}, "settle:r:0", lambda _: 2)
