"""The pure domain, no I/O: what each request does to a bet in each state (DESIGN 4 and 5)."""

from __future__ import annotations

import pytest

from ledger import domain
from ledger.domain import (
    Bet,
    BetState,
    Entry,
    Funding,
    Posting,
    RefundItem,
    SettleItem,
    Transaction,
    TxnKind,
)
from ledger.errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    InvalidAmount,
    LedgerError,
    ReferenceConflict,
    UnbalancedTransaction,
)

ENTRY = Entry(bet_uid=1, user="u1", pool_uid=7, currency="EUR", amount=1000, rake=100)


def placed(entry: Entry = ENTRY) -> Bet:
    placement = domain.place(entry, None, {})
    assert placement is not None
    return placement.bet


def legs(postings: tuple[Posting, ...] | Transaction) -> set[tuple[str, int]]:
    if isinstance(postings, Transaction):
        postings = postings.postings
    return {(p.account, p.amount) for p in postings}


# --- Place Bet -----------------------------------------------------------------------------------


def test_paid_entry_holds_amount_plus_rake_from_the_user() -> None:
    placement = domain.place(ENTRY, None, {"k": "v"})
    assert placement is not None
    assert placement.bet.funding is Funding.CASH
    assert placement.bet.secrets == {"k": "v"}
    assert legs(placement.legs) == {("user:u1", -1100), ("user:u1:held", 1100)}
    # Legs on user accounts name their bet, so every bet's money can be traced.
    assert {leg.bet_uid for leg in placement.legs} == {1}


def test_ticket_entry_is_held_from_house_tickets() -> None:
    placement = domain.place(ENTRY._replace(ticket="jwt"), None, {})
    assert placement is not None
    assert placement.bet.funding is Funding.TICKET
    assert legs(placement.legs) == {("house:tickets", -1100), ("user:u1:held", 1100)}


def test_free_entry_is_recorded_without_postings() -> None:
    placement = domain.place(ENTRY._replace(amount=0, rake=0), None, {})
    assert placement is not None
    assert placement.bet.funding is Funding.FREE
    assert placement.legs == ()


@pytest.mark.parametrize("state", list(BetState))
def test_identical_place_bet_resend_does_nothing_in_any_state(state: BetState) -> None:
    assert domain.place(ENTRY, placed()._replace(state=state), {}) is None


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
    assert domain.place(ENTRY._replace(amount=5), closed, {}) is None


# --- Refund --------------------------------------------------------------------------------------


REFUND = RefundItem(bet_uid=1, user="u1", pool_uid=7)


def test_refund_of_unknown_bet_is_not_found() -> None:
    with pytest.raises(BetNotFound):
        domain.refund(REFUND, None)


def test_refund_reverses_the_hold_to_where_it_came_from() -> None:
    closing = domain.refund(REFUND, placed())
    assert closing is not None
    assert closing.bet.state is BetState.REFUNDED
    assert legs(closing.legs) == {("user:u1:held", -1100), ("user:u1", 1100)}
    ticket = domain.refund(REFUND, placed(ENTRY._replace(ticket="jwt")))
    assert ticket is not None
    assert legs(ticket.legs) == {("user:u1:held", -1100), ("house:tickets", 1100)}
    free = domain.refund(REFUND, placed(ENTRY._replace(amount=0, rake=0)))
    assert free is not None
    assert free.legs == ()


def test_refund_of_refunded_bet_does_nothing() -> None:
    assert domain.refund(REFUND, placed()._replace(state=BetState.REFUNDED)) is None


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
    assert closing is not None
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
    assert closing is not None
    assert all(p.account != "user:u1" for p in closing.legs)


def test_settle_of_unknown_bet_is_not_found() -> None:
    with pytest.raises(BetNotFound):
        domain.settle(SETTLE, None)


def test_settle_of_refunded_bet_is_already_refunded() -> None:
    with pytest.raises(BetAlreadyRefunded):
        domain.settle(SETTLE, placed()._replace(state=BetState.REFUNDED))


def test_settle_resent_with_same_payout_does_nothing_and_other_payout_conflicts() -> None:
    done = domain.settle(SETTLE, placed())
    assert done is not None
    assert domain.settle(SETTLE, done.bet) is None
    with pytest.raises(BetConflict):
        domain.settle(SETTLE._replace(payout=2501), done.bet)
    zero = domain.settle(SETTLE._replace(payout=0), placed())
    assert zero is not None
    # Zero is zero whatever currency the re-send names.
    assert domain.settle(SETTLE._replace(payout=0, payout_currency="USD"), zero.bet) is None


def test_settle_naming_another_owner_is_a_conflict() -> None:
    with pytest.raises(BetConflict):
        domain.settle(SETTLE._replace(user="u2"), placed())


# --- deposits, withdrawals, balancing -------------------------------------------------------


def test_deposit_and_withdrawal_move_money_between_cash_and_the_user() -> None:
    deposit = domain.deposit("u1", "EUR", 500, "r1")
    assert deposit.key == "deposit:r1"
    assert legs(deposit) == {("house:cash", -500), ("user:u1", 500)}
    withdrawal = domain.withdrawal("u1", "EUR", 500, "r1")
    assert withdrawal.key == "withdrawal:r1"
    assert legs(withdrawal) == {("user:u1", -500), ("house:cash", 500)}


@pytest.mark.parametrize("amount", [0, -1])
def test_non_positive_movement_is_refused(amount: int) -> None:
    with pytest.raises(InvalidAmount):
        domain.deposit("u1", "EUR", amount, "r")


def test_same_reference_same_movement_is_a_resend_otherwise_a_conflict() -> None:
    first = domain.deposit("u1", "EUR", 500, "r1")
    assert domain.same_movement(first, domain.deposit("u1", "EUR", 500, "r1")) is first
    for other in (
        domain.deposit("u2", "EUR", 500, "r1"),
        domain.deposit("u1", "USD", 500, "r1"),
        domain.deposit("u1", "EUR", 501, "r1"),
    ):
        with pytest.raises(ReferenceConflict):
            domain.same_movement(first, other)


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
    assert first is not None
    assert second is not None
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
    assert not domain.is_valid_user_uid("u1:held")
    assert domain.is_valid_user_uid("u1:held:x")


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
