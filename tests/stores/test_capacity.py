"""Capacity: sums beyond 64 bits are kept exactly, and what a store cannot hold is a clean 422.

Every money column holds 38 digits on both stores (Postgres NUMERIC with a CHECK; SQLite an
INTEGER while the value fits 64 bits, else its canonical decimal text; see
ledger.stores.schema). Single amounts stay at most ``MAX_MINOR`` (10^30 minor units), so
reaching the 38-digit limit takes 10^8 maximal operations: the refusal tests seed a near-full
account through the store's own port (a legitimate, balanced journal) and then drive every path
through the library.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

import ledger
from ledger.domain import (
    HOUSE_CASH,
    HOUSE_TICKETS,
    Bet,
    Funding,
    Posting,
    Transaction,
    TxnKind,
    deposit,
    held_account,
    withdrawal,
)
from ledger.money import MAX_MINOR
from ledger.stores.schema import CAPACITY, INT64_MIN, from_stored, to_stored
from ledger.stores.sql import SqlStore
from support import payloads as P
from support.books import Hold, balance, house, raises_key
from support.httpkit import OPERATOR_HEADERS, Wallet, serve

D = Decimal
KEY = "amount.capacity_exceeded"
INT64_MAX = 2**63 - 1
ETH = ledger.CurrencyTable(overrides={"ETH": 18})


@pytest.fixture
def eth_book(store_url: str) -> Iterator[ledger.Ledger]:
    """A ledger on ``store_url`` where ETH has 18 decimals (``LEDGER_CURRENCY_SCALES=ETH=18``)."""
    with ledger.open_ledger(store_url, currencies=ETH) as opened:
        yield opened


def rows(book: ledger.Ledger) -> list[tuple[Any, ...]]:
    """Every account and its balance, and the journal's size: what "nothing changed" compares."""
    store = book.store
    assert isinstance(store, SqlStore)
    with store.engine.connect() as connection:
        found = connection.execute(
            text(
                "SELECT name, currency, balance FROM accounts UNION ALL "
                "SELECT 'count', 'postings', count(*) FROM postings UNION ALL "
                "SELECT 'count', 'bets', count(*) FROM bets ORDER BY 1, 2"
            )
        ).all()
    return [(name, currency, int(amount)) for name, currency, amount in found]


def stored_types(book: ledger.Ledger) -> set[tuple[str, bool]]:
    """SQLite only: ``(typeof, fits 64 bits)`` of every stored money value."""
    store = book.store
    assert isinstance(store, SqlStore)
    with store.engine.connect() as connection:
        found = connection.execute(
            text(
                "SELECT typeof(balance), balance FROM accounts UNION ALL "
                "SELECT typeof(amount), amount FROM postings UNION ALL "
                "SELECT typeof(amount), amount FROM bets UNION ALL "
                "SELECT typeof(payout), payout FROM bets WHERE payout IS NOT NULL"
            )
        ).all()
    return {(kind, -(2**63) <= int(value) <= INT64_MAX) for kind, value in found}


def seed(book: ledger.Ledger, *transactions: Transaction, bets: tuple[Bet, ...] = ()) -> None:
    """Write history straight through the store's port, bypassing the single-amount limit."""
    with book.store.unit_of_work() as uow:
        uow.add_bets(bets)
        uow.post(transactions)
        uow.commit()


def assert_sound(book: ledger.Ledger) -> None:
    report = book.check()
    assert report.ok, report.problems
    if book.store.url.startswith("sqlite"):
        # Exact integers only: 64-bit values as INTEGER, wider ones as their decimal text.
        assert stored_types(book) <= {("integer", True), ("text", False)}


# --- the audit's reproductions: sums past 64 bits are now stored exactly ---------------------


def test_place_bet_holding_more_than_64_bits_is_kept_exactly(book: ledger.Ledger) -> None:
    # 47 ticket entries of 1e15 + 1e15 EUR: 9.4e18 cents held, past int64 (500/503 before).
    entries = [P.entry(n, amount=D("1e15"), rake=D("1e15"), ticket="t") for n in range(1, 48)]
    assert book.place_bets(P.place(*entries)).placed == list(range(1, 48))
    assert balance(book, "u1") == (D(0), D("94000000000000000.00"))
    assert house(book, HOUSE_TICKETS) == -94 * 10**17
    assert_sound(book)
    assert book.refund(P.refund(7, *range(1, 48))).closed == list(range(1, 48))
    assert balance(book, "u1") == (D(0), D(0))
    assert house(book, HOUSE_TICKETS) == 0
    assert_sound(book)


def test_settle_paying_more_than_64_bits_is_kept_exactly(book: ledger.Ledger) -> None:
    # 100 payouts of 1e15 EUR in one settle: the house:prizes leg is -1e19 cents.
    book.place_bets(P.place(*(P.entry(n, amount=0, rake=0) for n in range(1, 101))))
    paid = book.settle(P.settle(7, *((n, "1000000000000000") for n in range(1, 101))))
    assert len(paid.closed) == 100
    assert balance(book, "u1") == (D("100000000000000000.00"), D(0))
    assert house(book, "house:prizes") == -(10**19)
    assert_sound(book)


def test_deposits_past_64_bits_keep_an_exact_integer_balance(book: ledger.Ledger) -> None:
    # 93 deposits of 1e15 EUR: the SQLite balance became REAL, then withdrawals did not move it.
    for n in range(93):
        book.deposit("u1", "EUR", "1000000000000000", reference=f"big-{n}")
    assert balance(book, "u1") == (D("93000000000000000.00"), D(0))
    book.withdraw("u1", "EUR", "1.00", reference="small")
    assert balance(book, "u1") == (D("92999999999999999.00"), D(0))
    assert house(book, HOUSE_CASH) == -9_299_999_999_999_999_900
    assert_sound(book)


def test_house_accounts_carry_a_trillion_eth_of_lifetime_volume(
    eth_book: ledger.Ledger,
) -> None:
    # 18 decimals: house:cash passed 2^63 after 9.2 ETH. Here 10^12 ETH (10^30 minor units) of
    # deposits and as much again of withdrawals, entries, rake and payouts pass the house.
    unit = 10**18
    model = {HOUSE_CASH: 0, "house:entries": 0, "house:rake": 0, "house:prizes": 0}
    volume = 0
    for n in range(50):
        big = 2 * 10**10 * unit  # 2e10 ETH
        eth_book.deposit("u1", "ETH", str(big // unit), reference=f"in-{n}")
        stake, rake, payout = 5 * 10**9 * unit, 10**9 * unit, 3 * 10**9 * unit
        entry = P.entry(1000 + n, amount=str(stake // unit), rake=str(rake // unit), currency="ETH")
        eth_book.place_bets(P.place(entry))
        eth_book.settle(P.settle(7, (1000 + n, str(payout // unit)), currency="ETH"))
        out = big - stake - rake + payout
        eth_book.withdraw("u1", "ETH", str(out // unit), reference=f"out-{n}")
        model[HOUSE_CASH] += -big + out
        model["house:entries"] += stake
        model["house:rake"] += rake
        model["house:prizes"] -= payout
        volume += big + out
    assert volume >= 10**30
    for account, expected in model.items():
        assert house(eth_book, account, "ETH") == expected
    assert model["house:entries"] > INT64_MAX
    assert eth_book.balance("u1", "ETH")[0].available == 0
    assert_sound(eth_book)


def test_largest_single_amount_is_accepted_and_one_more_unit_is_not(
    eth_book: ledger.Ledger,
) -> None:
    largest = str(D(f"{MAX_MINOR}E-18"))  # 10^12 ETH (scaleb would round to 28 digits)
    assert eth_book.deposit("u1", "ETH", largest, reference="max").applied
    with raises_key("amount.invalid"):
        eth_book.deposit("u1", "ETH", str(D(f"{MAX_MINOR + 1}E-18")), reference="over")
    assert eth_book.balance("u1", "ETH")[0].available == D(largest)
    assert_sound(eth_book)


def test_sixty_four_bit_boundaries_round_trip_exactly(book: ledger.Ledger) -> None:
    # Across the switch between the INTEGER and the text form on SQLite, both ways; moves over
    # the single-amount limit go straight through the port.
    steps = [INT64_MAX - 5, 5, 1, -1, -5, 2**63 + 7, -(2**63 + 7), 10**37, -(10**37)]
    expected = 0
    for n, step in enumerate(steps):
        expected += step
        if abs(step) > MAX_MINOR:
            seed(book, (deposit if step > 0 else withdrawal)("u1", "EUR", abs(step), f"m{n}"))
        elif step > 0:
            book.deposit("u1", "EUR", D(f"{step}E-2"), reference=f"m{n}")
        else:
            book.withdraw("u1", "EUR", D(f"{-step}E-2"), reference=f"m{n}")
        assert house(book, "user:u1") == expected
        assert house(book, HOUSE_CASH) == -expected
        assert_sound(book)


# --- beyond capacity: refused with 422 before anything is written, on every path -------------


def test_deposit_beyond_capacity_is_422_and_changes_nothing(book: ledger.Ledger) -> None:
    seed(book, deposit("u1", "EUR", CAPACITY - 10, "seed"))
    before = rows(book)
    with raises_key(KEY) as info:
        book.deposit("u1", "EUR", "0.11", reference="over")
    assert info.value.status == 422
    # The house side is a limit too: house:cash cannot take another user's deposit either.
    with raises_key(KEY):
        book.deposit("u2", "EUR", "0.11", reference="over-2")
    assert rows(book) == before
    assert_sound(book)
    # What fits still goes through, up to the last unit, and the refused references are free.
    assert book.deposit("u1", "EUR", "0.10", reference="over").applied
    assert house(book, "user:u1") == CAPACITY
    assert_sound(book)


def test_withdrawal_beyond_capacity_is_422_and_changes_nothing(book: ledger.Ledger) -> None:
    # house:cash can only near +capacity when the house moved that much out of another house
    # account; seed such a move, then pay u1 a prize and let u1 take it out.
    house_move = Transaction.journal(
        "seed",
        TxnKind.DEPOSIT,
        [Posting(HOUSE_CASH, "EUR", CAPACITY - 5), Posting(HOUSE_TICKETS, "EUR", 5 - CAPACITY)],
    )
    seed(book, house_move)
    book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    book.settle(P.settle(7, (1, "0.10")))
    before = rows(book)
    with raises_key(KEY):
        book.withdraw("u1", "EUR", "0.10", reference="out")
    assert rows(book) == before
    book.withdraw("u1", "EUR", "0.05", reference="out")
    assert house(book, HOUSE_CASH) == CAPACITY
    assert_sound(book)


def test_place_bet_beyond_capacity_is_422_and_changes_nothing(book: ledger.Ledger) -> None:
    # u9's open ticket entry has brought house:tickets to one cent short of -capacity.
    stake = CAPACITY - 1
    seed(
        book,
        Transaction.journal("hold:seed", TxnKind.HOLD, [*_ticket_hold("u9", 900, stake)]),
        bets=(_ticket_bet("u9", 900, stake),),
    )
    book.deposit("u1", "EUR", "100.00", reference="funds")
    before = rows(book)
    with raises_key(KEY):
        book.place_bets(P.place(P.entry(1, ticket="t"), P.entry(2, amount=0, rake=0)))
    assert rows(book) == before
    assert book.bet(1) is None
    assert book.bet(2) is None
    # A cash entry does not touch house:tickets: it goes through.
    assert book.place_bets(P.place(P.entry(3))).placed == [3]
    assert_sound(book)


def test_held_balance_beyond_capacity_is_422(book: ledger.Ledger) -> None:
    seed(
        book,
        Transaction.journal("hold:seed", TxnKind.HOLD, [*_ticket_hold("u1", 900, CAPACITY)]),
        bets=(_ticket_bet("u1", 900, CAPACITY),),
    )
    # A house move brings house:tickets back to zero: only u1's held account is full.
    seed(
        book,
        Transaction.journal(
            "seed-move",
            TxnKind.DEPOSIT,
            [Posting(HOUSE_TICKETS, "EUR", CAPACITY), Posting("house:prizes", "EUR", -CAPACITY)],
        ),
    )
    book.deposit("u1", "EUR", "5.00", reference="funds")
    before = rows(book)
    with raises_key(KEY):
        book.place_bets(P.place(P.entry(1, amount=D("1.00"), rake=0)))
    assert rows(book) == before
    assert_sound(book)


def test_settle_beyond_capacity_is_422_and_changes_nothing(book: ledger.Ledger) -> None:
    seed(book, deposit("u1", "EUR", CAPACITY - 5, "seed"))
    book.place_bets(P.place(P.entry(1, amount=0, rake=0), P.entry(2, amount=0, rake=0)))
    before = rows(book)
    with raises_key(KEY):
        book.settle(P.settle(7, (1, "0.01"), (2, "0.05")))
    assert rows(book) == before
    assert book.bet(1) is not None
    assert book.bet(1).state == "placed"  # type: ignore[union-attr]
    # The platform's corrected settle (or a smaller one) goes through.
    assert book.settle(P.settle(7, (1, "0.01"), (2, "0.04"))).closed == [1, 2]
    assert house(book, "user:u1") == CAPACITY
    assert_sound(book)


def test_refund_beyond_capacity_is_422_and_changes_nothing(book: ledger.Ledger) -> None:
    # u1 won the money for the entry (house:cash is then free to take the seeded deposit).
    book.place_bets(P.place(P.entry(9, amount=0, rake=0)))
    book.settle(P.settle(7, (9, "11.00")))
    book.place_bets(P.place(P.entry(1)))
    seed(book, deposit("u1", "EUR", CAPACITY - 5, "seed"))
    before = rows(book)
    with raises_key(KEY):
        book.refund(P.refund(7, 1))
    assert rows(book) == before
    assert book.bet(1).state == "placed"  # type: ignore[union-attr]
    assert_sound(book)


def test_capacity_refusal_in_a_group_commit_batch_spares_its_neighbours(
    book: ledger.Ledger,
) -> None:
    seed(
        book,
        Transaction.journal("hold:seed", TxnKind.HOLD, [*_ticket_hold("u9", 900, CAPACITY)]),
        bets=(_ticket_bet("u9", 900, CAPACITY),),
    )
    book.deposit("u1", "EUR", "100.00", reference="funds")
    # Hold the writer busy so that the three requests below are queued and batched together
    # (on SQLite; Postgres groups Place Bets only, so there they are merely concurrent).
    hold = Hold()
    blocker = book.writer.submit(hold)
    futures = [
        book.submit_place_bets(P.place(P.entry(1))),
        book.submit_place_bets(P.place(P.entry(2, ticket="t"))),  # house:tickets is full
        book.submit_place_bets(P.place(P.entry(3))),
    ]
    hold.release.set()
    blocker.result(timeout=30)
    assert futures[0].result(timeout=30).placed == [1]
    with raises_key(KEY):
        futures[1].result(timeout=30)
    assert futures[2].result(timeout=30).placed == [3]
    assert book.bet(2) is None
    assert balance(book, "u1") == (D("78.00"), D("22.00"))
    assert_sound(book)


def test_settle_beyond_capacity_over_http_is_422_with_the_key(
    tmp_path: Path, store_url: str
) -> None:
    with serve(tmp_path, database_url=store_url) as client:
        wallet = Wallet(client)
        book = client.app.state.runtime.ledger()
        seed(book, deposit("u1", "EUR", CAPACITY - 5, "seed"))
        assert wallet.place(P.place(P.entry(1, amount=0, rake=0))).status_code == 200
        before = rows(book)
        response = wallet.settle(P.settle(7, (1, "1.00")))
        assert response.status_code == 422
        assert response.json()["error"] == KEY
        assert rows(book) == before
        # The 93 deposits of the audit, through the operator API (in USD: house:cash in EUR is
        # full): exact, and the check is clean.
        for n in range(93):
            wallet.deposit("u2", "1000000000000000", currency="USD", ref=f"big-{n}")
        assert wallet.balance("u2", "USD") == ("93000000000000000.00", "0.00")
        check = client.get("/admin/check", headers=OPERATOR_HEADERS)
        assert check.status_code == 200, check.text


# --- a balance that is not an exact integer is impossible ------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE accounts SET balance = balance + 0.5 WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = 1e38 WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = -1e38 WHERE name = 'house:cash'",
        "UPDATE bets SET payout = 0.5, state = 'settled' WHERE uid = 1",
    ],
)
def test_no_store_keeps_an_amount_that_is_not_an_exact_integer_of_38_digits(
    book: ledger.Ledger, statement: str
) -> None:
    # Refused by the database itself, not rounded (NUMERIC(38, 0) would round 0.5).
    book.deposit("u1", "EUR", "100.00", reference="funds")
    book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    store = book.store
    assert isinstance(store, SqlStore)
    with pytest.raises(DBAPIError), store.engine.begin() as connection:
        connection.execute(text(statement))
    assert balance(book, "u1") == (D("100.00"), D(0))
    assert book.bet(1).state == "placed"  # type: ignore[union-attr]
    assert_sound(book)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE accounts SET balance = 1.5 WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = balance + 9223372036854775807 WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = '12' WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = '0100000000000000000000' WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = '1' || substr('{}', 1, 38) WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = '-100000000000000000000' WHERE name = 'user:u1'",
        "UPDATE accounts SET balance = x'00' WHERE name = 'user:u1'",
    ],
)
def test_sqlite_refuses_a_balance_that_is_not_an_exact_integer(
    tmp_path: Path, statement: str
) -> None:
    with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
        book.deposit("u1", "EUR", "1000000000000000", reference="big")
        store = book.store
        assert isinstance(store, SqlStore)
        with pytest.raises(DBAPIError), store.engine.begin() as connection:
            connection.execute(text(statement.replace("{}", "9" * 40)))
        assert balance(book, "u1") == (D("1000000000000000.00"), D(0))
        assert_sound(book)


def _ticket_hold(user: str, uid: int, total: int) -> tuple[Posting, ...]:
    return (
        Posting(HOUSE_TICKETS, "EUR", -total),
        Posting(held_account(user), "EUR", total, uid),
    )


def _ticket_bet(user: str, uid: int, total: int) -> Bet:
    return Bet(uid, user, 7, "EUR", total, 0, Funding.TICKET, ticket="t")


def test_a_full_38_digit_balance_reads_back_exactly(book: ledger.Ledger) -> None:
    seed(book, deposit("u1", "EUR", CAPACITY, "seed"))
    full = D("999999999999999999999999999999999999.99")
    assert balance(book, "u1") == (full, D(0))
    assert book.statement("u1")[0].amount == full
    assert house(book, HOUSE_CASH) == -CAPACITY
    assert_sound(book)


# --- the SQLite representation, proved over random values ---------------------------------------

WIDE = st.integers(min_value=-CAPACITY, max_value=CAPACITY)
EDGES = st.sampled_from(
    [0, 1, -1, INT64_MAX, INT64_MAX + 1, -(2**63), -(2**63) - 1, CAPACITY, -CAPACITY]
)


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    book = ledger.open_ledger(f"sqlite:///{tmp_path_factory.mktemp('wide')}/ledger.db")
    assert isinstance(book.store, SqlStore)
    yield book.store
    book.close()


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(WIDE, EDGES), min_size=1, max_size=12))
def test_sqlite_keeps_every_38_digit_integer_and_its_sums_exact(
    sqlite_store: SqlStore, values: list[int]
) -> None:
    with sqlite_store.engine.connect() as connection:
        connection.begin()
        for n, value in enumerate(values):
            connection.exec_driver_sql(
                "INSERT INTO accounts (name, currency, kind, balance) "
                "VALUES (?, 'EUR', 'house', ?)",
                (f"house:p{n}", to_stored(value)),
            )
        found = connection.exec_driver_sql(
            "SELECT balance, typeof(balance) FROM accounts WHERE name GLOB 'house:p*' "
            "ORDER BY CAST(substr(name, 8) AS INTEGER)"
        ).all()
        assert [from_stored(value) for value, _ in found] == values
        assert all(
            (kind == "integer") == (INT64_MIN <= v <= INT64_MAX)
            for v, (_, kind) in zip(values, found, strict=True)
        )
        total = connection.exec_driver_sql(
            "SELECT ledger_sum(balance) FROM accounts WHERE name GLOB 'house:p*'"
        ).scalar()
        assert total == to_stored(sum(values))
        # Equal values have one stored form: SQL equality is value equality.
        same = connection.exec_driver_sql(
            "SELECT count(*) FROM accounts WHERE name GLOB 'house:p*' AND balance = ?",
            (to_stored(values[0]),),
        ).scalar()
        assert same == values.count(values[0])
        connection.rollback()


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(WIDE, EDGES), form=st.sampled_from(["text", "zero", "plus", "real", "long"]))
def test_sqlite_refuses_every_other_form_of_an_amount(
    sqlite_store: SqlStore, value: int, form: str
) -> None:
    wrong: object = {
        "text": str(value),  # text although it may fit 64 bits
        "zero": "0" + str(abs(value)),
        "plus": "+" + str(abs(value)),
        "real": float(value),
        "long": str(CAPACITY + 1 + abs(value)),
    }[form]
    if form == "text" and not INT64_MIN <= value <= INT64_MAX:
        wrong = "-0" + str(-value) if value < 0 else " " + str(value)
    with sqlite_store.engine.connect() as connection:
        connection.begin()
        with pytest.raises(DBAPIError, match="accounts_balance_exact"):
            connection.exec_driver_sql(
                "INSERT INTO accounts (name, currency, kind, balance) "
                "VALUES ('house:x', 'EUR', 'house', ?)",
                (wrong,),
            )
        connection.rollback()
