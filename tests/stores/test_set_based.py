"""The set-based close of huge refunds and settles is the domain's, on every store.

``ledger.commands`` closes a refund or settle of at least ``SET_BASED_FROM`` items in the database
(``ledger.stores.closing``), and smaller ones through the domain's per-bet decisions. The domain
is the specification: random books and random requests (valid, replays, bets named twice,
unknown bets, other users or tournaments, payouts in other or unknown currencies, amounts too
fine or too wide, echoed secrets) go through both, on the same book, and must give the same
answer or error, bet states, postings, running balances, balances, events and notes.

Both paths run in one unit of work, each inside a savepoint that is rolled back afterwards:
the same book for both, and no database to create per example.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from ledger import contract, domain
from ledger.commands import Move, PlaceBets, RefundBets, SettleBets, chunks, closes
from ledger.directory import Seen, UserSeen
from ledger.domain import Entry, PlaceRequest, RefundItem, SettleClaim
from ledger.errors import LedgerError, UnknownCurrency
from ledger.stores import Store, open_store
from ledger.stores.closing import statements as closing_statements
from ledger.stores.sql import SqlUnitOfWork

SCALES = {"EUR": 2, "JPY": 0, "ETH": 18}
USERS = ("u0", "u1", "u2")
POOLS = (1, 2)


def scale(code: str) -> int:
    if code not in SCALES:
        raise UnknownCurrency(f"currency {code!r} has no known scale")
    return SCALES[code]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()


# --- random books and requests ------------------------------------------------------------


# Mostly small; now and then wide enough that SQL sums of them could pass 64 bits (the set-based
# close then leaves the request to the domain) or the house's capacity.
AMOUNTS = st.integers(0, 59).flatmap(
    lambda n: st.integers(0, 5_000) if n > 1 else st.sampled_from([10**12, 10**20, 10**30])
)


@st.composite
def books(draw: st.DrawFn) -> dict[str, Any]:
    """Funded users, placed bets, some of them already refunded or settled."""
    currencies = draw(st.sampled_from([["EUR"], ["EUR"], ["JPY"], ["ETH"], ["EUR", "JPY"]]))
    count = draw(st.integers(1, 12))
    uids = draw(st.lists(st.integers(1, 40), min_size=count, max_size=count, unique=True))
    bets = []
    for uid in uids:
        amount, rake = draw(AMOUNTS), draw(st.integers(0, 300))
        bets.append(
            Entry(
                uid,
                draw(st.sampled_from(USERS)),
                draw(st.sampled_from(POOLS)),
                draw(st.sampled_from(currencies)),
                amount,
                rake,
                "ticket-1" if draw(st.integers(0, 3)) == 0 else None,
            )
        )
    earlier = draw(st.lists(st.sampled_from(uids), max_size=4, unique=True))
    closed = [(uid, draw(st.booleans()), draw(st.sampled_from([0, 0, 150]))) for uid in earlier]
    # Enough for every cash bet; balances wide only when the bets are.
    funds = 10**32 if any(entry.amount > 10**6 for entry in bets) else 10**7
    return {"currencies": currencies, "bets": bets, "closed": closed, "funds": funds}


def _amount(draw: st.DrawFn) -> Decimal:
    return draw(
        st.sampled_from(
            [
                Decimal("0"),
                Decimal("0.00"),
                Decimal("1.5"),
                Decimal("25"),
                Decimal("0.001"),  # finer than EUR and JPY
                Decimal("1E-19"),  # finer than every scale
                Decimal("123456789012345678901234567890"),  # wide in every scale
                Decimal("-1"),
            ]
        )
    )


@st.composite
def requests(draw: st.DrawFn, book: dict[str, Any]) -> tuple[str, list[Any], list[UserSeen]]:
    """A refund or a settle naming the book's bets (mostly as recorded) and others, and how it
    describes each item's user (the directory's)."""
    kind = draw(st.sampled_from(["refund", "settle"]))
    known = {entry.bet_uid: entry for entry in book["bets"]}
    items: list[Any] = []
    users: list[UserSeen] = []
    for _ in range(draw(st.integers(1, 14))):
        uid = draw(st.sampled_from([*known, 999]))
        entry = known.get(uid)
        user = entry.user if entry and draw(st.integers(0, 9)) else draw(st.sampled_from(USERS))
        pool = entry.pool_uid if entry and draw(st.integers(0, 9)) else draw(st.sampled_from(POOLS))
        secrets = draw(st.sampled_from([None, {}, {"ledger_ref": "other"}]))
        if kind == "refund":
            amount = draw(st.one_of(st.none(), st.just(Decimal("1.00")), st.just(Decimal(0))))
            rake = draw(st.one_of(st.none(), st.just(Decimal("0.001")), st.just(Decimal(0))))
            items.append(RefundItem(uid, user, pool, amount, rake, secrets))
        else:
            own = entry.currency if entry else "EUR"
            currency = draw(st.sampled_from([None, None, own, own, "JPY", "XXX"]))
            items.append(SettleClaim(uid, user, pool, _amount(draw), currency, secrets))
        name = draw(st.sampled_from([None, "Ann", "Bob"]))
        users.append(UserSeen(items[-1].user, name, draw(st.sampled_from([None, "brand"]))))
    return kind, items, users


# --- running both paths -------------------------------------------------------------------


def _request(kind: str, items: Sequence[Any], users: Sequence[UserSeen] = ()) -> Any:
    """The request that says ``items``, each item's user as ``users`` describes it (or by its
    uid alone): its pools are the runs of items of one tournament, in order."""
    pools: list[Any] = []
    for pool_uid, run in itertools.groupby(enumerate(items), key=lambda pair: pair[1].pool_uid):
        parts: list[Any] = []
        for n, item in run:
            described = users[n] if users else UserSeen(item.user)
            user = contract.User(uid=item.user, name=described.name, client=described.client)
            if kind == "refund":
                bet = contract.RefundBet(
                    uid=item.bet_uid, amount=item.amount, rake=item.rake, secrets=item.secrets
                )
                parts.append(contract.RefundParticipant(user=user, bet=bet))
            else:
                claim = contract.SettleBet(
                    uid=item.bet_uid,
                    payout=item.payout,
                    currency=item.currency,
                    secrets=item.secrets,
                )
                parts.append(contract.SettleParticipant(user=user, bet=claim))
        pool = contract.Pool(uid=pool_uid)
        pools.append(
            contract.RefundPool(pool=pool, bets=parts)
            if kind == "refund"
            else contract.SettlePool(pool=pool, bets=parts)
        )
    if kind == "refund":
        return contract.RefundRequest(pools=pools)
    return contract.SettleRequest(pools=pools)


def _build(uow: SqlUnitOfWork, book: dict[str, Any]) -> None:
    # Described before: a request's description replaces a field, its silence keeps it.
    uow.record_seen(Seen((), (UserSeen("u0", "Old", "brand"), UserSeen("u1", None, "old"))))
    for user in USERS:
        for currency in book["currencies"]:
            deposit = domain.deposit(user, currency, book["funds"], f"fund-{user}-{currency}")
            Move(deposit).apply(uow)
    PlaceBets(PlaceRequest(book["bets"], "book")).apply(uow)
    entries = {entry.bet_uid: entry for entry in book["bets"]}
    for n, (uid, refunded, payout) in enumerate(book["closed"]):
        entry = entries[uid]
        if refunded:
            item = RefundItem(uid, entry.user, entry.pool_uid)
            RefundBets(_request("refund", [item]), f"earlier-{n}", scale).apply(uow)
        else:
            claim = SettleClaim(uid, entry.user, entry.pool_uid, Decimal(payout), entry.currency)
            SettleBets(_request("settle", [claim]), f"earlier-{n}", scale).apply(uow)


def _state(uow: SqlUnitOfWork) -> dict[str, Any]:
    """Everything a close may have written, without ids and times."""
    connection = uow._conn  # the test reads the raw tables inside the unit of work
    queries = {
        "bets": "SELECT uid, state, payout, payout_currency FROM bets ORDER BY uid",
        "postings": "SELECT t.idempotency_key, t.kind, p.account, p.currency, p.amount, "
        "p.bet_uid, p.balance_after FROM postings p JOIN transactions t ON t.id = p.txn_id "
        # In order within each transaction (and so within each account): the set-based close
        # writes every chunk's user legs in one statement, then the house legs chunk by chunk.
        "ORDER BY t.idempotency_key, p.id",
        "accounts": "SELECT name, currency, kind, balance FROM accounts ORDER BY name, currency",
        "users": "SELECT uid, name, client FROM users ORDER BY uid",
        "transactions": "SELECT idempotency_key, kind, user_uid, reference FROM transactions "
        "ORDER BY id",
        "links": "SELECT d.bet_uids, d.bet_count, d.status FROM deliveries d ORDER BY d.id",
        # The event feed's rows (ledger.events), in the order they were appended.
        "events": "SELECT ordinal, type, user_uid, pool_uid, bet_uid, currency, amount, rake, "
        "payout, payout_currency, reference, request_id FROM events ORDER BY grp, ordinal",
    }
    # Amounts as Python integers: SQLite's text beyond 64 bits, Postgres' Decimal.
    state = {
        name: [tuple(_plain(value) for value in row) for row in connection.execute(text(sql))]
        for name, sql in queries.items()
    }
    # The open holds are the placed bets, whichever way the close went.
    opened = connection.execute(text("SELECT uid FROM open_bets ORDER BY uid")).scalars().all()
    assert list(opened) == [bet[0] for bet in state["bets"] if bet[1] == "placed"]
    return state


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def _close(
    uow: SqlUnitOfWork,
    kind: str,
    items: Sequence[Any],
    users: Sequence[UserSeen],
    threshold: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> tuple[Any, dict[str, Any], list[str]]:
    monkeypatch.setattr(closes, "SET_BASED_FROM", threshold)
    staged = SqlUnitOfWork.close_staged

    def close_staged(self: SqlUnitOfWork, *args: Any) -> Any:
        # Which way the set-based close went, in hypothesis' statistics.
        found = staged(self, *args)
        event(f"set-based: {type(found).__name__}")
        return found

    monkeypatch.setattr(SqlUnitOfWork, "close_staged", close_staged)
    command: RefundBets | SettleBets = (
        RefundBets(_request(kind, items, users), "request", scale)
        if kind == "refund"
        else SettleBets(_request(kind, items, users), "request", scale)
    )
    caplog.clear()
    outcome: Any
    state: dict[str, Any] = {}

    class Undo(Exception):
        pass

    try:
        with uow.savepoint():
            try:
                result = command.apply(uow)
                outcome = ("ok", result.closed, result.unchanged)
                state = _state(uow)
            except LedgerError as error:
                # What a refused command wrote is rolled back with its unit of work (or its
                # savepoint in a group commit), whatever it was: only the error counts.
                outcome = ("error", type(error).__name__, error.key, error.status, str(error))
            raise Undo
    except Undo:
        pass
    # Notes of a refused request are left out: the domain logs those of the chunks it wrote
    # before the refusal, the set-based close writes nothing before it.
    notes = [record.getMessage() for record in caplog.records if record.name == "ledger.writer"]
    return outcome, state, notes if outcome[0] == "ok" else []


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_set_based_close_answers_and_writes_what_the_domain_decides(
    store: Store,
    data: st.DataObject,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = data.draw(books())
    kind, items, users = data.draw(requests(book))
    # Small chunks: a request of several transactions, each with its own summed house legs.
    monkeypatch.setattr(chunks, "CHUNK", data.draw(st.sampled_from([3, chunks.CHUNK])))
    caplog.set_level(logging.WARNING, logger="ledger.writer")
    with store.unit_of_work() as uow:
        assert isinstance(uow, SqlUnitOfWork)
        _build(uow, book)
        expected = _close(uow, kind, items, users, 10**9, monkeypatch, caplog)
        actual = _close(uow, kind, items, users, 0, monkeypatch, caplog)
    assert actual == expected


_CLOSING_RUN = closing_statements.run


def _both_ways(
    store: Store,
    kind: str,
    entries_of_u0: int,
    payouts: list[int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> list[str]:
    """Close a bet of each of three users (``u0`` with ``entries_of_u0`` of them) through the
    domain and set-based: both must answer and write the same; the set-based statements run."""
    users = ["u0", "u1", "u2"] + ["u0"] * (entries_of_u0 - 1)
    bets = [Entry(uid, user, 1, "EUR", 100 * uid, 10, None) for uid, user in enumerate(users, 1)]
    book = {"currencies": ["EUR"], "bets": bets, "closed": [], "funds": 10**6}
    items = [
        RefundItem(entry.bet_uid, entry.user, 1)
        if kind == "refund"
        else SettleClaim(entry.bet_uid, entry.user, 1, Decimal(payout), "EUR")
        for entry, payout in zip(bets, payouts, strict=False)
    ]
    seen: list[str] = []

    def spy(connection: Any, sql: str, **params: Any) -> Any:
        seen.append(sql)
        return _CLOSING_RUN(connection, sql, **params)

    monkeypatch.setattr(closing_statements, "run", spy)
    with store.unit_of_work() as uow:
        assert isinstance(uow, SqlUnitOfWork)
        _build(uow, book)
        expected = _close(uow, kind, items, [], 10**9, monkeypatch, caplog)
        actual = _close(uow, kind, items, [], 0, monkeypatch, caplog)
    assert actual == expected
    assert expected[0][0] == "ok"
    return seen


_FEW_CLOSES = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_PAYOUTS = st.lists(st.sampled_from([0, 7, 25]), min_size=4, max_size=4)


@_FEW_CLOSES
@given(payouts=_PAYOUTS)
@pytest.mark.parametrize("entries_of_u0", [1, 2])
def test_a_leg_s_running_balance_is_its_account_s_when_no_account_takes_two_legs(
    store: Store,
    entries_of_u0: int,
    payouts: list[int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One entry per user: each account takes one leg, whose balance after is the account's
    # (no window over the legs). A user with two entries: the window counts them up.
    seen = _both_ways(store, "settle", entries_of_u0, payouts, monkeypatch, caplog)
    (postings,) = [sql for sql in seen if "INSERT INTO postings" in sql]
    assert ("OVER" in postings) is (entries_of_u0 > 1)


@_FEW_CLOSES
@given(payouts=_PAYOUTS)
@pytest.mark.parametrize("kind", ["refund", "settle"])
@pytest.mark.parametrize("entries_of_u0", [1, 2])
def test_accounts_change_by_their_one_leg_unsummed_when_no_two_items_name_one_user(
    store: Store,
    kind: str,
    entries_of_u0: int,
    payouts: list[int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Distinct users: each account takes one leg, and the balances change by it straight from
    # the legs (no per-account sum written). A user named twice: the legs are summed first.
    # Either way the domain's answer, postings, running balances and balances.
    seen = _both_ways(store, kind, entries_of_u0, payouts, monkeypatch, caplog)
    summed = any("INSERT INTO close_deltas" in sql for sql in seen)
    assert summed is (entries_of_u0 > 1)
