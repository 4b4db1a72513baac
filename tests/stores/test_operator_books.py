"""The operator's books on every store: running balances, balances at a moment, open and stale
holds, house summaries (``check`` proving every running balance: test_check_running_balances).

Each test runs once on SQLite and once on Postgres (the ``book`` fixture).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, event, text

import ledger
from ledger.paging import cursor
from ledger.stores import StaleRule
from ledger.stores.postgres import normalize_url
from support import payloads as P
from support.books import raises_key, settled_and_refunded

D = Decimal


pytestmark = pytest.mark.usefixtures("books_stay_balanced")


def now() -> datetime:
    return datetime.now(UTC)


# --- running balances in statements ---------------------------------------------------------------


def test_each_statement_line_carries_the_balance_after_it_and_its_bets_pool(
    book: ledger.Ledger,
) -> None:
    settled_and_refunded(book)
    lines = book.statement("u1")
    rows = {
        (line.kind, line.account, line.amount, line.balance_after, line.bet_uid, line.pool_uid)
        for line in lines
    }
    assert rows == {
        ("deposit", "available", D("100.00"), D("100.00"), None, None),
        ("hold", "available", D("-11.00"), D("89.00"), 1, 7),
        ("hold", "held", D("11.00"), D("11.00"), 1, 7),
        ("hold", "available", D("-11.00"), D("78.00"), 2, 8),
        ("hold", "held", D("11.00"), D("22.00"), 2, 8),
        ("settle", "held", D("-11.00"), D("11.00"), 1, 7),
        ("settle", "available", D("4.00"), D("82.00"), 1, 7),
        ("refund", "held", D("-11.00"), D("0.00"), 2, 8),
        ("refund", "available", D("11.00"), D("93.00"), 2, 8),
    }
    # Per account, each balance equals the one before plus the line, from zero.
    running: dict[str, Decimal] = defaultdict(Decimal)
    for line in reversed(lines):
        running[line.account] += line.amount
        assert line.balance_after == running[line.account]
    assert running["available"] == D("93.00")
    assert running["held"] == D("0.00")
    dicts = [line.to_dict() for line in lines]
    assert dicts[0]["balance_after"] == "93.00"
    assert dicts[0]["pool_uid"] == 8
    assert dicts[-1]["pool_uid"] is None


def test_statement_pages_by_opaque_cursor_and_still_by_line_id(book: ledger.Ledger) -> None:
    for n in range(5):
        book.deposit("u1", "EUR", f"{n + 1}.00", reference=f"r{n}")
    seen: list[str | None] = []
    page = book.statement_page("u1", limit=2)
    while True:
        seen.extend(line.reference for line in page.items)
        if page.next is None:
            break
        page = book.statement_page("u1", limit=2, before=page.next)
    assert seen == ["r4", "r3", "r2", "r1", "r0"]
    everything = book.statement("u1")
    # The numeric form keeps working: a line id, as an integer or as text.
    assert [line.reference for line in book.statement("u1", before=everything[1].id)] == [
        "r2",
        "r1",
        "r0",
    ]
    assert book.statement_page("u1", before=str(everything[3].id)).items[0].reference == "r0"
    assert book.statement_page("u1", before=cursor(everything[0].id)).items[0].reference == "r3"
    assert [line.reference for line in book.statement_export("u1")] == seen


def test_statement_with_a_cursor_it_did_not_give_is_refused(book: ledger.Ledger) -> None:
    with raises_key("request.invalid_cursor"):
        book.statement_page("u1", before="not-a-cursor")
    with raises_key("request.invalid_cursor"):
        book.statement_page("u1", before=cursor("text"))


def test_house_postings_carry_running_balances_too(book: ledger.Ledger, store_url: str) -> None:
    settled_and_refunded(book)
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT amount, balance_after FROM postings WHERE account = 'house:cash' "
                    "ORDER BY id"
                )
            ).all()
    finally:
        engine.dispose()
    assert [(int(amount), int(after)) for amount, after in rows] == [(-10000, -10000)]


# --- balances at a moment -------------------------------------------------------------------------


def test_balances_at_a_moment_are_those_of_the_last_posting_by_then(book: ledger.Ledger) -> None:
    before_anything = now()
    book.deposit("u1", "EUR", "100.00", reference="seed")
    after_deposit = now()
    book.place_bets(P.place(P.entry(1, pool=7)))
    after_hold = now()
    book.settle(P.settle(7, (1, "4.00")))
    book.deposit("u1", "JPY", "500", reference="yen")

    def at(moment: datetime, currency: str | None = None) -> list[tuple[str, Decimal, Decimal]]:
        found = book.balance_at("u1", moment, currency)
        return [(b.currency, b.available, b.held) for b in found]

    assert at(before_anything) == []
    assert at(before_anything, "EUR") == [("EUR", D("0.00"), D("0.00"))]
    assert at(after_deposit) == [("EUR", D("100.00"), D("0.00"))]
    assert at(after_hold) == [("EUR", D("89.00"), D("11.00"))]
    assert at(now()) == [("EUR", D("93.00"), D("0.00")), ("JPY", D("500"), D("0"))]
    # The same moment in another zone is the same moment.
    paris = after_hold.astimezone(timezone(timedelta(hours=2)))
    assert at(paris) == at(after_hold)
    assert book.balance_at("u1", after_deposit.isoformat()) == book.balance_at("u1", after_deposit)


@pytest.mark.parametrize("moment", ["2026-11-20T00:00:00", "yesterday", "2026-13-01T00:00Z"])
def test_a_moment_without_a_zone_or_unreadable_is_refused(book: ledger.Ledger, moment: str) -> None:
    with raises_key("request.invalid"):
        book.balance_at("u1", moment)


# One user per example: the database is shared by every example of the test.
_examples = iter(range(10**6))

operation = st.one_of(
    st.tuples(st.just("deposit"), st.integers(1, 5000)),
    st.tuples(st.just("withdraw"), st.integers(1, 5000)),
    st.tuples(st.just("place"), st.integers(1, 3000)),
    st.tuples(st.just("settle"), st.integers(0, 9000)),
    st.tuples(st.just("refund"), st.integers(0, 0)),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=1, max_size=8))
def test_balances_at_any_moment_match_a_recomputation_from_the_postings(
    book: ledger.Ledger, store_url: str, operations: list[tuple[str, int]]
) -> None:
    example = next(_examples)
    user = f"h{example}"
    moments = [now()]
    open_bets: list[int] = []
    for n, (kind, cents) in enumerate(operations):
        amount = str(D(cents).scaleb(-2))
        try:
            if kind == "deposit":
                book.deposit(user, "EUR", amount, reference=f"{user}-{n}")
            elif kind == "withdraw":
                book.withdraw(user, "EUR", amount, reference=f"{user}-{n}")
            elif kind == "place":
                uid = example * 100 + n + 1
                book.place_bets(
                    P.place(P.entry(uid, user=user, pool=uid, amount=D(amount), rake=D("0.10")))
                )
                open_bets.append(uid)
            elif open_bets:
                uid = open_bets.pop(0)
                if kind == "settle":
                    book.settle(P.settle(uid, (uid, amount, user)))
                else:
                    book.refund(P.refund(uid, (uid, user)))
        except ledger.LedgerError as error:
            # Refused, with nothing written: the only refusal these operations can meet.
            if error.key != "user.insufficient_funds":
                raise
        moments.append(now())
    # The recomputation: every posting of the user's accounts with its transaction's time,
    # summed by hand up to each moment.
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as connection:
            postings = connection.execute(
                text(
                    "SELECT p.account, p.amount, t.created_at FROM postings p "
                    "JOIN transactions t ON t.id = p.txn_id "
                    "WHERE p.account IN (:available, :held) ORDER BY p.id"
                ),
                {"available": f"user:{user}", "held": f"user:{user}:held"},
            ).all()
    finally:
        engine.dispose()
    for moment in moments:
        expected: dict[str, int] = {}
        for account, amount, created_at in postings:
            stamp = created_at if isinstance(created_at, datetime) else None
            if stamp is None:
                stamp = datetime.fromisoformat(str(created_at))
            stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
            if stamp <= moment:
                name = "held" if account.endswith(":held") else "available"
                expected[name] = expected.get(name, 0) + int(amount)
        found = book.balance_at(user, moment)
        if not expected:
            assert found == []
            continue
        (only,) = found
        assert (only.available, only.held) == (
            D(expected.get("available", 0)).scaleb(-2),
            D(expected.get("held", 0)).scaleb(-2),
        )


# --- open and stale holds -------------------------------------------------------------------------


def test_open_holds_and_the_stale_count_read_the_open_bets(book: ledger.Ledger) -> None:
    """The open holds come from open_bets (the open bets only), oldest first by its
    (placed_at, uid) index, on every store; on SQLite, whose planner does not weigh table sizes,
    each bet is then read by its key (Postgres chooses by its statistics: on a few rows,
    walking a whole table is cheaper, on a real ledger the open holds are a sliver of its bets)."""
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=8)))
    book.settle(P.settle(8, (2, "0")))
    statements: list[tuple[str, Any]] = []
    engine = book.store.engine  # type: ignore[attr-defined]

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "FROM open_bets" in statement:
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        book.holds(limit=10)
        book.count_stale_holds()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(statements) == 2
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as connection:
        if not sqlite:
            # On a few rows a sequential scan and a sort are cheaper: forbid them, and the
            # index must still be usable, in its order.
            connection.exec_driver_sql("SET enable_seqscan = off")
            connection.exec_driver_sql("SET enable_sort = off")
        plans = []
        for statement, parameters in statements:
            explain = "EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN "
            rows = connection.exec_driver_sql(explain + statement, parameters).fetchall()
            plans.append(" ".join(str(row) for row in rows))
    listing, stale = plans
    assert "open_bets_placed" in listing, listing
    assert "open_bets" in stale, stale
    if sqlite:
        for plan in plans:
            assert "SEARCH bets USING INDEX sqlite_autoindex_bets_1 (uid=?)" in plan, plan


def test_open_holds_are_the_placed_bets_oldest_first_paged_by_cursor(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.deposit("u2", "EUR", "100.00", reference="b")
    book.place_bets(P.place(P.entry(1, pool=7)))
    book.place_bets(P.place(P.entry(2, pool=8, user="u2")))
    book.place_bets(P.place(P.entry(3, pool=7), P.entry(4, pool=7, user="u2")))
    book.place_bets(P.place(P.entry(5, pool=9)))
    book.settle(P.settle(9, (5, "0")))
    seen: list[int] = []
    page = book.holds(limit=2)
    while True:
        seen.extend(hold.uid for hold in page.items)
        if page.next is None:
            break
        page = book.holds(limit=2, before=page.next)
    assert seen == [1, 2, 3, 4]  # 5 was settled
    assert [h.uid for h in book.holds(user="u2").items] == [2, 4]
    assert [h.uid for h in book.holds(pool_uid=7).items] == [1, 3, 4]
    assert [h.uid for h in book.holds(user="u2", pool_uid=7).items] == [4]
    first = book.holds().items[0]
    assert (first.amount, first.rake, first.currency, first.funding) == (
        D("10.00"),
        D("1.00"),
        "EUR",
        "cash",
    )
    assert not first.stale  # placed just now: neither end time nor 7 days have passed
    assert book.holds(stale=True).items == []
    assert book.holds(older_than="1d").items == []
    assert [h.uid for h in book.holds(older_than=timedelta(0)).items] == [1, 2, 3, 4]
    assert [h.uid for h in book.holds_export(user="u2")] == [2, 4]


def test_holds_older_than_the_stale_age_are_stale(book: ledger.Ledger, store_url: str) -> None:
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=7)))
    book.refund(P.refund(7, 2))
    # A ledger whose stale age has already passed for every hold placed before it looks.
    with ledger.open_ledger(store_url, stale_hold_days=1e-12) as strict:
        stale = strict.holds(stale=True).items
        assert [hold.uid for hold in stale] == [1]
        assert stale[0].stale
        assert strict.count_stale_holds() == 1
    assert book.count_stale_holds() == 0


def test_the_stale_rule_is_the_stores_one_home(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.place_bets(P.place(P.entry(1, pool=7)))
    week = timedelta(days=7)
    later = StaleRule(now=now() + week + timedelta(hours=1), grace=timedelta(hours=6), max_age=week)
    sooner = StaleRule(
        now=now() + week - timedelta(hours=1), grace=timedelta(hours=6), max_age=week
    )
    with book.store.reading() as reads:
        assert reads.count_stale_holds(later) == 1
        assert reads.count_stale_holds(sooner) == 0

        def holds(rule: StaleRule, only_stale: bool) -> list[bool]:
            found = reads.holds(
                limit=10,
                after=None,
                user=None,
                pool_uid=None,
                placed_by=None,
                rule=rule,
                only_stale=only_stale,
            )
            return [hold.stale for hold in found]

        assert holds(later, only_stale=False) == [True]
        assert holds(sooner, only_stale=False) == [False]
        assert holds(sooner, only_stale=True) == []


@pytest.mark.parametrize(
    ("filters", "key"),
    [
        ({"before": "garbage"}, "request.invalid_cursor"),
        ({"older_than": "soon"}, "request.invalid"),
        ({"limit": 0}, "request.invalid"),
        ({"user": "u1:held"}, "request.invalid"),
    ],
)
def test_holds_with_bad_filters_are_refused(
    book: ledger.Ledger, filters: dict[str, Any], key: str
) -> None:
    with raises_key(key):
        book.holds(**filters)


# --- the house ------------------------------------------------------------------------------------


def test_house_summary_totals_the_period_exactly_from_the_postings(book: ledger.Ledger) -> None:
    start = now()
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.deposit("u2", "EUR", "50.00", reference="b")
    book.withdraw("u2", "EUR", "20.00", reference="c")
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=7, user="u2")))
    ticket = P.entry(3, pool=7, ticket="jwt.ticket.token", amount=D("5.00"), rake=D("0.50"))
    book.place_bets(P.place(ticket))
    book.place_bets(P.place(P.entry(4, pool=8)))
    book.settle(P.settle(7, (1, "15.00"), (2, "0", "u2"), (3, "2.00")))
    book.refund(P.refund(8, 4))
    book.deposit("u3", "JPY", "700", reference="yen")
    report = book.house(since=start)
    eur, jpy = report.currencies
    assert eur == {
        "currency": "EUR",
        "balances": {
            "house:cash": "-130.00",
            "house:entries": "25.00",
            "house:prizes": "-17.00",
            "house:rake": "2.50",
            "house:tickets": "-5.50",
        },
        "deposits": "150.00",
        "withdrawals": "20.00",
        "stakes_captured": "25.00",
        "rake_earned": "2.50",
        "prizes_paid": "17.00",
        "ticket_funded": "5.50",
        "refunds": "11.00",
        "entries": 4,
        "ticket_entries": 1,
        "unique_players": 2,
    }
    assert jpy["deposits"] == "700"
    assert jpy["balances"] == {"house:cash": "-700"}
    assert [item["currency"] for item in book.house(currency="jpy").currencies] == ["JPY"]
    # A period after everything: balances now, and nothing happened in it.
    empty = book.house(since=now()).currencies[0]
    assert empty["balances"]["house:rake"] == "2.50"
    assert (empty["rake_earned"], empty["entries"], empty["unique_players"]) == ("0.00", 0, 0)
    before = book.house(until=start).currencies
    assert all(item["deposits"] in ("0.00", "0") for item in before)


def test_house_period_ending_before_it_starts_is_refused(book: ledger.Ledger) -> None:
    with raises_key("request.invalid"):
        book.house(since="2026-11-20T00:00:00Z", until="2026-11-19T00:00:00Z")
    with raises_key("request.invalid"):
        book.house(since="2026-11-20")
