"""The set-based close through the service, on every store: from its threshold a refund or settle
is closed in the database and pays once, its items staged straight from the request; a refusal is
the domain's error and writes nothing; a huge body is decoded with the collector paused; on
Postgres its statements scale and its temporary tables are sampled lightly. (That it decides what
the domain decides: test_set_based.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

import ledger
from ledger import contract, directory
from ledger.commands import closes
from ledger.stores import closing, open_store
from ledger.stores.closing import statements as closing_statements
from ledger.stores.sql import SqlUnitOfWork
from support import payloads as P
from support.books import FailingStore, balance, house, raises_key


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


def test_no_store_sends_a_million_item_close_bet_by_bet(store_url: str) -> None:
    # Postgres once bounded the set-based close at 100,000 items (a 1,000,000-item settle
    # answered 503: a NOT IN the planner stopped hashing); no store bounds it now.
    with (
        contextlib.closing(open_store(store_url)) as store,
        store.unit_of_work(write=False) as uow,
    ):
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
