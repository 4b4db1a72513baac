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
import threading
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

import ledger
from ledger import contract, directory, domain
from ledger.commands import Move, PlaceBets, RefundBets, SettleBets, chunks, closes
from ledger.directory import Seen, UserSeen
from ledger.domain import Entry, PlaceRequest, RefundItem, SettleClaim
from ledger.errors import LedgerError, UnknownCurrency
from ledger.stores import Store, closing, open_store
from ledger.stores.closing import statements as closing_statements
from ledger.stores.sql import SqlUnitOfWork
from support import payloads as P
from support.books import FailingStore, balance, house, raises_key

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


# --- through the service, at the threshold ------------------------------------------------


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which way each set-based close went: ``ClosingOutcome``, ``int`` or ``NoneType``."""
    seen: list[str] = []
    staged = SqlUnitOfWork.close_staged

    def close_staged(self: SqlUnitOfWork, *args: Any) -> Any:
        found = staged(self, *args)
        seen.append(type(found).__name__)
        return found

    monkeypatch.setattr(SqlUnitOfWork, "close_staged", close_staged)
    return seen


def _placed(book: ledger.Ledger, count: int) -> None:
    book.deposit("u1", "EUR", "1000.00", reference="seed")
    book.place_bets(P.place(*(P.entry(uid) for uid in range(1, count + 1))))


def test_a_settle_at_the_threshold_is_closed_in_the_database_and_pays_once(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    seen = _spy(monkeypatch)
    _placed(book, 4)
    body = P.settle(7, *((uid, "5.00") for uid in range(1, 5)))
    first = book.settle(body)
    again = book.settle(body)
    assert seen == ["ClosingOutcome", "ClosingOutcome"]
    assert (first.closed, first.unchanged) == ([1, 2, 3, 4], [])
    assert (again.closed, again.unchanged) == ([], [1, 2, 3, 4])
    # 1,000.00 - 4 x 11.00 held, + 4 x 5.00 paid; nothing held any more.
    assert balance(book, "u1") == (Decimal("976.00"), Decimal("0.00"))
    assert house(book, "house:entries") == 4000
    assert house(book, "house:rake") == 400
    assert house(book, "house:prizes") == -2000
    assert book.check().ok


def test_a_huge_close_is_staged_from_the_request_and_its_items_built_only_for_the_domain(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The items and users as the domain reads them are a million tuples each in a huge close:
    # the set-based close reads the request itself and never needs them; the domain does.
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    built: list[str] = []
    for module, name in (
        (closes, "settle_claims"),
        (closes, "refund_items"),
        (directory, "users_seen"),
    ):
        original = getattr(module, name)

        def spy(*args: Any, original: Any = original, name: str = name) -> Any:
            built.append(name)
            return original(*args)

        monkeypatch.setattr(module, name, spy)
    seen = _spy(monkeypatch)
    _placed(book, 6)
    built.clear()  # Place Bet describes its users as it always did
    settled = book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    assert (seen, built, settled.closed) == (["ClosingOutcome"], [], [1, 2, 3, 4])
    book.refund(P.refund(7, 5))  # 1 item: the domain decides
    assert built == ["users_seen", "refund_items"]
    built.clear()
    with raises_key("bet.not_found"):  # refused set-based, the error is the domain's
        book.settle(P.settle(7, (6, "5.00"), (1, "5.00"), (2, "5.00"), (99, "5.00")))
    assert seen[-1] == "int"
    assert built == ["settle_claims"]
    assert book.check().ok


def test_a_set_based_close_reads_its_items_again_while_the_database_joins_them(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The join (collect) waits until the close's own passes over the items have run: they
    # must run beside it, not after it, or it waits in vain and the close takes none of them.
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    passed = threading.Event()
    per_user, collect = closing.one_item_per_user, closing.collect

    def one_item_per_user(rows: Sequence[Any]) -> bool:
        passed.set()
        return per_user(rows)

    def joined(*args: Any) -> closing.Collected:
        assert passed.wait(10), "the passes over the items wait for the join"
        return collect(*args)

    monkeypatch.setattr(closing, "one_item_per_user", one_item_per_user)
    monkeypatch.setattr(closing, "collect", joined)
    _placed(book, 4)
    settled = book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    assert (settled.closed, settled.unchanged) == ([1, 2, 3, 4], [])
    assert balance(book, "u1") == (Decimal("976.00"), Decimal("0.00"))
    assert book.check().ok


AWKWARD_TEXTS = ("tab\there", "back\\slash", "new\nline\r", "quote'\"", "é ü 😀", "\\N", "a|b,c")


def test_a_set_based_close_stages_every_character_of_a_users_description_exactly(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The items are staged in one bulk load (on Postgres a binary COPY): whatever a name or
    client holds (COPY's text separators, escapes, its NULL marker, characters beyond ASCII),
    the directory records it as the payload said."""
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    seen = _spy(monkeypatch)
    count = len(AWKWARD_TEXTS)
    entries = (P.entry(uid, user=f"w{uid}", ticket="t") for uid in range(1, count + 1))
    book.place_bets(P.place(*entries))
    parts = [
        {
            "user": {"uid": f"w{uid}", "name": text_, "client": text_[::-1]},
            "bet": {"uid": uid, "payout": "0.00", "currency": "EUR", "secrets": {}},
        }
        for uid, text_ in enumerate(AWKWARD_TEXTS, start=1)
    ]
    answer = book.settle(P.pools(P.pool_of(7, parts, status="closed")))
    assert seen == ["ClosingOutcome"]
    assert answer.closed == list(range(1, count + 1))
    for uid, text_ in enumerate(AWKWARD_TEXTS, start=1):
        user = book.user(f"w{uid}")
        assert user is not None
        assert (user.name, user.client) == (text_, text_[::-1])


def test_a_close_above_the_stores_set_based_bound_is_decided_bet_by_bet(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.stores.postgres import PostgresDialect
    from ledger.stores.sqlite import SqliteDialect

    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    for dialect in (SqliteDialect, PostgresDialect):
        monkeypatch.setattr(dialect, "set_based_up_to", 5)
    seen = _spy(monkeypatch)
    _placed(book, 6)
    book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 6))))  # 5 items: in SQL
    book.refund(P.refund(7, 6))  # 1 item: under the threshold
    assert seen == ["ClosingOutcome"]
    seen.clear()
    for dialect in (SqliteDialect, PostgresDialect):
        monkeypatch.setattr(dialect, "set_based_up_to", 4)
    again = book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 6))))
    assert seen == []  # 5 items above a bound of 4: the domain decided, and found the replays
    assert again.unchanged == [1, 2, 3, 4, 5]
    assert book.check().ok


def test_a_set_based_refusal_is_the_domains_error_and_writes_nothing(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    seen = _spy(monkeypatch)
    _placed(book, 4)
    before = book.check()
    body = P.settle(7, (1, "5.00"), (2, "5.00"), (3, "5.00", "u2"), (99, "5.00"))
    with raises_key("bet.conflict"):
        book.settle(body)
    assert seen == ["int"]
    after = book.check()
    assert (after.transactions, after.postings) == (before.transactions, before.postings)
    assert balance(book, "u1") == (Decimal("956.00"), Decimal("44.00"))


def test_a_failure_after_a_set_based_close_wrote_leaves_nothing(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    _placed(book, 4)
    before = book.check()
    broken = ledger.Ledger(FailingStore(book.store))
    with pytest.raises(RuntimeError, match="injected"):
        broken.refund(P.refund(7, 1, 2, 3, 4))
    after = book.check()
    assert (after.transactions, after.postings) == (before.transactions, before.postings)
    view = book.bet(1)
    assert view is not None
    assert view.state == "placed"


def test_no_store_sends_a_million_item_close_bet_by_bet(store: Store) -> None:
    # Postgres once bounded the set-based close at 100,000 items (a 1,000,000-item settle
    # answered 503: a NOT IN the planner stopped hashing); no store bounds it now.
    with store.unit_of_work(write=False) as uow:
        bound = uow.set_based_up_to()
    assert closes.closes_set_based(1_000_000, bound)
    assert closes.closes_set_based(closes.SET_BASED_FROM, bound)
    assert not closes.closes_set_based(closes.SET_BASED_FROM - 1, bound)


def test_a_bound_sends_a_bigger_close_bet_by_bet() -> None:
    assert closes.closes_set_based(100_000, 100_000)
    assert not closes.closes_set_based(100_001, 100_000)
    assert closes.closes_set_based(10**9, None)


def test_a_huge_body_is_decoded_and_closed_with_the_collector_paused_and_resumed_after(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import json

    from ledger import contract
    from ledger.service import payloads, writes

    enabled: list[bool] = []
    validate = contract.validate

    def spy(model: Any, payload: Any) -> Any:
        if model is contract.SettleRequest:
            enabled.append(gc.isenabled())
        return validate(model, payload)

    monkeypatch.setattr(writes, "validate", spy)
    _placed(book, 4)
    small = P.settle(7, *((uid, "5.00") for uid in range(1, 5)))
    book.settle(json.dumps(small).encode())
    # Unknown bets, refused after the command was built: enough bytes for 1,001 bets.
    huge = P.settle(7, *((uid, "0") for uid in range(100, 100 + payloads.BYTES_PER_BET * 30)))
    with raises_key("bet.not_found"):
        book.settle(json.dumps(huge).encode())
    assert enabled == [True, False]
    assert gc.isenabled()


def test_a_huge_parsed_payload_is_validated_with_the_collector_paused_a_small_one_is_not(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An embedding program hands dicts: a Place Bet of 1,000 entries built its command (some
    # 5,000 objects) with the collector walking the heap, 2 us a bet of the caller's CPU.
    import gc

    from ledger import contract
    from ledger.service import writes

    enabled: list[tuple[str, bool]] = []
    validate = contract.validate

    def spy(model: Any, payload: Any) -> Any:
        enabled.append((model.__name__, gc.isenabled()))
        return validate(model, payload)

    monkeypatch.setattr(writes, "validate", spy)
    book.deposit("u1", "EUR", "100000.00", "fund")
    book.place_bets(P.place(*(P.entry(uid) for uid in range(1, 3))))
    book.place_bets(P.place(*(P.entry(uid) for uid in range(3, 1_003))))
    book.settle(P.settle(7, *((uid, "0.00") for uid in range(3, 1_003))))
    book.refund(P.refund(7, 1, 2))
    assert enabled == [
        ("PlaceBetsRequest", True),
        ("PlaceBetsRequest", False),
        ("SettleRequest", False),
        ("RefundRequest", True),
    ]
    assert gc.isenabled()


def test_how_many_bets_a_payload_carries_at_most() -> None:
    from ledger import contract
    from ledger.service.payloads import BYTES_PER_BET, bets_in

    assert bets_in(b"x" * BYTES_PER_BET * 3) == 3
    assert bets_in(P.place(*(P.entry(uid) for uid in range(5)))) == 5
    assert bets_in(P.pools(P.pool_of(1, [P.participant(1)]), P.pool_of(2, []))) == 1
    assert bets_in(contract.validate(contract.RefundRequest, P.refund(7, 1, 2))) == 2
    # Shapes that validation refuses count nothing here.
    assert bets_in({"bets": "many"}) == 0
    assert bets_in({"pools": [1, {"bets": None}]}) == 0


def test_on_postgres_no_set_based_statement_compares_every_item_with_every_other(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The 503 of a 1,000,000-item settle: Postgres hashes a NOT IN (subquery) only while the
    # hash fits work_mem, and otherwise runs the subquery for every row (quadratic, past the
    # statement timeout). With a tiny work_mem, 10,000 items are enough to see such a plan.
    from ledger.stores.postgres import dialect as pg_dialect

    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    monkeypatch.setattr(pg_dialect, "CLOSE_WORK_MEM", "64kB")
    plans: list[tuple[str, str]] = []
    run = closing_statements.run

    def explained(connection: Any, sql: str, **params: Any) -> Any:
        if not sql.lstrip().startswith("DROP"):
            lines = run(connection, "EXPLAIN " + sql, **params)
            plans.append((" ".join(sql.split()), "\n".join(line[0] for line in lines)))
        return run(connection, sql, **params)

    monkeypatch.setattr(closing_statements, "run", explained)
    count = 10_000
    with ledger.open_ledger(postgres_url, migrate=True) as book:
        book.deposit("u1", "EUR", "110000.00", reference="seed")
        book.place_bets(P.place(*(P.entry(uid) for uid in range(1, count + 1))))
        answer = book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, count + 1))))
        assert len(answer.closed) == count
    assert any("close_rows" in sql for sql, _ in plans)
    per_item = [sql for sql, plan in plans if "SubPlan" in plan and "hashed SubPlan" not in plan]
    assert per_item == []


def test_on_postgres_a_set_based_close_samples_its_temporary_tables_lightly_for_itself_only(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ANALYZE of the close's temporary tables reads 300 rows per unit of the statistics target:
    # 30,000 by default, most of a 100,000-item close. Only the close's transaction samples less.
    from ledger.stores import postgres
    from ledger.stores.postgres import dialect as pg_dialect

    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    targets: list[str] = []
    analyze = postgres.PostgresDialect.analyze

    def seen(self: Any, connection: Any, names: Sequence[str]) -> None:
        targets.append(connection.exec_driver_sql("SHOW default_statistics_target").scalar())
        analyze(self, connection, names)

    monkeypatch.setattr(postgres.PostgresDialect, "analyze", seen)
    with ledger.open_ledger(postgres_url, migrate=True) as book:
        _placed(book, 4)
        book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
        store = book.store
        with store.engine.connect() as connection:  # type: ignore[attr-defined]
            after = connection.exec_driver_sql("SHOW default_statistics_target").scalar()
    # close_stage, close_rows, close_legs, close_deltas; then back to the server's default.
    assert targets == [str(pg_dialect.CLOSE_STATISTICS)] * 4
    assert after == "100"
