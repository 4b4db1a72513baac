"""The journal's chain on every store: each commit that writes transactions or bets is sealed in
commit order, ``ledger verify`` recomputes it from the tables, and every kind of tampering an
intruder with the database's credentials can do is named at the commit it touched, or caught by
a checkpoint signed before it.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from datetime import UTC, datetime
from decimal import Decimal as D

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, create_engine, select, text, update

import ledger
from ledger import writer
from ledger.errors import LedgerError
from ledger.integrity import merkle
from ledger.integrity.canonical import GENESIS, record_hash, row_json
from ledger.integrity.checkpoints import (
    Checkpoint,
    NoteError,
    generate_key,
    open_checkpoint,
    sign,
)
from ledger.stores import chain
from ledger.stores.chain_tables import journal_chain, journal_head
from ledger.stores.integrity import JournalIntegrity
from ledger.stores.postgres.urls import normalize_url
from support import payloads as P
from support.books import fail_commits


def scenario(book: ledger.Ledger) -> None:
    """Deposits, bets placed, settled (one paid), refunded, a withdrawal: one commit each."""
    book.deposit("u1", "EUR", "100.00", "dep-1")
    book.deposit("u2", "EUR", "50.00", "dep-2")
    book.place_bets(P.place(P.entry(1), P.entry(2), P.entry(3, user="u2")))
    book.settle(P.settle(7, (1, "30.00"), (2, "0")))
    book.refund(P.refund(7, (3, "u2")))
    book.withdraw("u1", "EUR", "5.00", "wd-1")


def records(book: ledger.Ledger) -> list[chain.ChainRecord]:
    with book.store.engine.connect() as connection:  # type: ignore[attr-defined]
        return list(chain.records(connection))


def verify(book: ledger.Ledger, checkpoint: Checkpoint | None = None) -> tuple[bool, str, int]:
    report = JournalIntegrity(book.store).verify(checkpoint)
    problem = report.problem or "; ".join(report.balance_problems)
    return report.ok, problem, report.seq or 0


def tamper(book: ledger.Ledger, *statements: str) -> None:
    """Change the books by hand past every guard (triggers dropped or disabled), as only an
    intruder with the database's credentials could."""
    engine = create_engine(normalize_url(book.store.url))
    try:
        with engine.begin() as connection:
            if book.store.url.startswith("sqlite"):
                names = connection.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                ).scalars()
                for name in list(names):
                    connection.execute(text(f'DROP TRIGGER "{name}"'))
            else:
                connection.execute(text("SET LOCAL session_replication_role = replica"))
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def rechain(book: ledger.Ledger) -> None:
    """What someone without the signing key can do after tampering: recompute every record,
    so that the chain itself is consistent again."""
    engine = create_engine(normalize_url(book.store.url))
    try:
        with engine.begin() as connection:
            _rechain(connection)
    finally:
        engine.dispose()


def _rechain(connection: Connection) -> None:
    prev, seq = GENESIS, 0
    for record in list(chain.records(connection)):
        seq = record.seq
        content = chain.commit_content(connection, record.grp)
        digest = content.digest()
        new = record_hash(seq, prev, digest, record.committed_at)
        connection.execute(
            update(journal_chain)
            .where(journal_chain.c.seq == seq)
            .values(
                prev_hash=prev.hex(),
                content_hash=digest.hex(),
                record_hash=new.hex(),
                row_count=content.rows,
            )
        )
        prev = new
    connection.execute(
        update(journal_head).where(journal_head.c.id == 1).values(seq=seq, record_hash=prev.hex())
    )


@pytest.fixture
def signer() -> tuple[str, str]:
    return generate_key("auditor-test")


def signed_now(book: ledger.Ledger, key: tuple[str, str]) -> Checkpoint:
    size, root = JournalIntegrity(book.store).head()
    note = sign(Checkpoint("ledger", size, root, datetime.now(UTC)), key[0])
    return open_checkpoint(note, key[1])


def seq_of(book: ledger.Ledger, sql: str) -> int:
    """The chain's record of the commit whose group ``sql`` selects."""
    engine = create_engine(normalize_url(book.store.url))
    try:
        with engine.connect() as connection:
            grp = connection.execute(text(sql)).scalar_one()
            return int(
                connection.execute(
                    select(journal_chain.c.seq).where(journal_chain.c.grp == grp)
                ).scalar_one()
            )
    finally:
        engine.dispose()


# --- the chain as written -----------------------------------------------------------------------


def test_every_commit_that_moves_money_or_changes_a_bet_gets_one_record_in_order(
    book: ledger.Ledger,
) -> None:
    scenario(book)
    found = records(book)
    assert [record.seq for record in found] == [1, 2, 3, 4, 5, 6]
    assert found[0].prev_hash == GENESIS
    for before, after in itertools.pairwise(found):
        assert after.prev_hash == before.record_hash
    assert verify(book) == (True, "", 0)


def test_a_re_sent_request_changes_nothing_and_adds_no_record(book: ledger.Ledger) -> None:
    scenario(book)
    book.deposit("u1", "EUR", "100.00", "dep-1")
    book.place_bets(P.place(P.entry(1), P.entry(2), P.entry(3, user="u2")))
    book.settle(P.settle(7, (1, "30.00"), (2, "0")))
    assert len(records(book)) == 6
    assert verify(book)[0]


def test_a_set_based_settle_is_one_record_whose_content_verifies(book: ledger.Ledger) -> None:
    book.place_bets(P.place(*(P.entry(n, amount=0, rake=0) for n in range(1, 1001))))
    book.settle(P.settle(7, *((n, "1.00") for n in range(1, 1001))))
    found = records(book)
    assert len(found) == 2
    # 1000 bets closed, 1000 winnings legs and the house's, the settle's transaction.
    assert found[1].row_count > 2000
    assert verify(book)[0]


def test_the_tree_head_is_the_merkle_root_of_the_record_hashes(book: ledger.Ledger) -> None:
    scenario(book)
    size, root = JournalIntegrity(book.store).head()
    assert size == 6
    assert root == merkle.root(record.record_hash for record in records(book))


# --- tampering, each named at the commit it touched ----------------------------------------------


def change_the_last_deposit_and_rebalance(book: ledger.Ledger) -> int:
    """Make the last deposit (5.00 to u3) 500.00, its house leg and both balances to match, so
    that ``ledger check`` stays clean; the number of its commit."""
    seq = seq_of(book, "SELECT commit_grp FROM transactions WHERE reference = 'dep-3'")
    txn = "(SELECT id FROM transactions WHERE reference = 'dep-3')"
    tamper(
        book,
        f"UPDATE postings SET amount = 50000, balance_after = 50000 "
        f"WHERE txn_id = {txn} AND account = 'user:u3'",
        f"UPDATE postings SET amount = -50000, balance_after = balance_after - 49500 "
        f"WHERE txn_id = {txn} AND account <> 'user:u3'",
        "UPDATE accounts SET balance = 50000 WHERE name = 'user:u3'",
        "UPDATE accounts SET balance = balance - 49500 WHERE name = 'house:cash'",
    )
    assert book.check().ok, book.check().problems
    return seq


def test_a_posting_changed_and_the_accounts_rebalanced_fails_verify_though_check_is_clean(
    book: ledger.Ledger,
) -> None:
    scenario(book)
    book.deposit("u3", "EUR", "5.00", "dep-3")  # the last commit: no later running balance
    seq = change_the_last_deposit_and_rebalance(book)
    ok, problem, found = verify(book)
    assert (ok, found) == (False, seq)
    assert f"commit {seq}" in problem
    assert "a value of one of its" in problem


def test_a_bets_payout_changed_fails_verify_at_the_commit_that_settled_it(
    book: ledger.Ledger,
) -> None:
    scenario(book)
    seq = seq_of(book, "SELECT grp FROM bet_closes WHERE uid = 1")
    tamper(book, "UPDATE bets SET payout = 300000 WHERE uid = 1")
    ok, problem, found = verify(book)
    assert (ok, found) == (False, seq)
    assert f"commit {seq}" in problem


def test_a_row_deleted_fails_verify_naming_the_commit_and_the_missing_row(
    book: ledger.Ledger,
) -> None:
    scenario(book)
    seq = seq_of(book, "SELECT placed_grp FROM bets WHERE uid = 2")
    tamper(
        book,
        "DELETE FROM postings WHERE bet_uid = 2",
        "DELETE FROM open_bets WHERE uid = 2",
        "DELETE FROM bets WHERE uid = 2",
    )
    ok, problem, found = verify(book)
    assert (ok, found) == (False, seq)
    assert "a row is missing or added" in problem


def test_two_commits_reordered_fail_verify_at_the_first_of_them(book: ledger.Ledger) -> None:
    scenario(book)
    tamper(
        book,
        "UPDATE journal_chain SET seq = -1 WHERE seq = 3",
        "UPDATE journal_chain SET seq = 3 WHERE seq = 4",
        "UPDATE journal_chain SET seq = 4 WHERE seq = -1",
    )
    ok, problem, found = verify(book)
    assert (ok, found) == (False, 3)
    assert "does not follow commit 2" in problem


def test_a_commit_record_deleted_fails_verify(book: ledger.Ledger) -> None:
    scenario(book)
    tamper(book, "DELETE FROM journal_chain WHERE seq = 2")
    ok, problem, found = verify(book)
    assert (ok, found) == (False, 2)
    assert "commit 2 is missing" in problem


def test_the_last_commits_cut_off_pass_alone_and_fail_against_a_saved_checkpoint(
    book: ledger.Ledger, signer: tuple[str, str]
) -> None:
    scenario(book)
    book.deposit("u3", "EUR", "7.00", "dep-3")
    saved = signed_now(book, signer)
    grp = "(SELECT commit_grp FROM transactions WHERE reference = 'dep-3')"
    tamper(
        book,
        f"DELETE FROM postings WHERE txn_id IN (SELECT id FROM transactions "
        f"WHERE commit_grp = {grp})",
        f"DELETE FROM journal_chain WHERE grp = {grp}",
        f"DELETE FROM transactions WHERE commit_grp = {grp}",
        "DELETE FROM accounts WHERE name = 'user:u3'",
        "UPDATE accounts SET balance = balance + 700 WHERE name = 'house:cash'",
        "UPDATE journal_head SET seq = 6, record_hash = "
        "(SELECT record_hash FROM journal_chain WHERE seq = 6)",
    )
    assert book.check().ok, book.check().problems
    assert verify(book)[0]
    ok, problem, found = verify(book, saved)
    assert (ok, found) == (False, 7)
    assert "cut off" in problem


def test_the_whole_chain_recomputed_without_the_key_fails_against_a_saved_checkpoint(
    book: ledger.Ledger, signer: tuple[str, str]
) -> None:
    scenario(book)
    book.deposit("u3", "EUR", "5.00", "dep-3")
    saved = signed_now(book, signer)
    change_the_last_deposit_and_rebalance(book)
    rechain(book)
    assert verify(book)[0]  # consistent again, alone
    ok, problem, _ = verify(book, saved)
    assert not ok
    assert "the history was rewritten" in problem


def test_a_forged_checkpoint_fails_its_signature(
    book: ledger.Ledger, signer: tuple[str, str]
) -> None:
    scenario(book)
    size, root = JournalIntegrity(book.store).head()
    note = sign(Checkpoint("ledger", size, root, datetime.now(UTC)), signer[0])
    forged = note.replace(f"\n{size}\n", f"\n{size - 1}\n", 1)
    with pytest.raises(NoteError):
        open_checkpoint(forged, signer[1])
    other = generate_key("auditor-test")
    with pytest.raises(NoteError):
        open_checkpoint(
            sign(Checkpoint("ledger", size, root, datetime.now(UTC)), other[0]), signer[1]
        )


def test_a_journal_that_only_grew_extends_its_saved_checkpoint(
    book: ledger.Ledger, signer: tuple[str, str]
) -> None:
    book.deposit("u1", "EUR", "100.00", "dep-1")
    saved = signed_now(book, signer)
    scenario(book)
    assert verify(book, saved)[0]


# --- any sequence of callbacks and re-sends leaves a chain that verifies -------------------------

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["deposit", "place", "settle", "refund", "withdraw"]), st.integers(1, 4)
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_any_sequence_of_callbacks_and_re_sends_leaves_a_chain_that_verifies(
    book: ledger.Ledger, steps: list[tuple[str, int]]
) -> None:
    for kind, n in steps:
        try:
            if kind == "deposit":
                book.deposit("u1", "EUR", f"{n}.00", f"d{n}")
            elif kind == "withdraw":
                book.withdraw("u1", "EUR", "1.00", f"w{n}")
            elif kind == "place":
                book.place_bets(P.place(P.entry(n, amount=D("1.00"), rake=D("0.10"))))
            elif kind == "settle":
                book.settle(P.settle(7, (n, f"{n}.00")))
            else:
                book.refund(P.refund(7, n))
        except LedgerError:
            pass  # refused (no funds, unknown bet): nothing written, nothing chained
        ok, problem, _ = verify(book)
        assert ok, problem


def test_concurrent_writers_leave_one_record_each_in_commit_order_that_verifies(
    book: ledger.Ledger,
) -> None:
    def deposits(user: str) -> None:
        for n in range(10):
            book.deposit(user, "EUR", "1.00", f"{user}-{n}")

    threads = [threading.Thread(target=deposits, args=(f"u{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = records(book)
    assert [record.seq for record in found] == list(range(1, len(found) + 1))
    # One record per database transaction: group commit may have batched some deposits.
    assert 1 <= len(found) <= 60
    assert verify(book) == (True, "", 0)


def test_amounts_past_64_bits_texts_beyond_ascii_and_tickets_chain_as_verify_recomputes_them(
    book: ledger.Ledger,
) -> None:
    # The content as the database hashes it when sealing (SQL on Postgres) and as verify
    # recomputes it (Python) must agree on every kind of value.
    book.deposit("jürgen-東京", "EUR", "100000000000000000000.00", "wide")
    book.place_bets(
        P.place(P.entry(1, user="jürgen-東京", amount=D("1e19"), rake=D("1e18"), ticket="t-ü"))
    )
    book.settle(P.settle(7, (1, "20000000000000000000", "jürgen-東京")))
    assert verify(book) == (True, "", 0)


def test_a_commit_that_fails_leaves_no_record_and_its_retry_chains_once(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario(book)
    fail_commits(book, monkeypatch)
    with pytest.raises(LedgerError):
        book.place_bets(P.place(P.entry(9)))
    monkeypatch.undo()
    assert len(records(book)) == 6
    book.place_bets(P.place(P.entry(9)))
    book.place_bets(P.place(P.entry(9)))  # the platform's re-send: unchanged
    assert len(records(book)) == 7
    assert verify(book) == (True, "", 0)


def test_texts_that_json_escapes_chain_as_verify_recomputes_them(book: ledger.Ledger) -> None:
    # Quotes, backslashes, control characters and separators beyond ASCII: Postgres's
    # to_json must escape them exactly as the Python encoder verify runs does.
    awkward = 'q"b\\s\tn\nc\x01\x1f d\x7f \u2028 é 東'
    book.deposit('u"\\1', "EUR", "10.00", awkward)
    book.withdraw('u"\\1', "EUR", "1.00", awkward + "-out")
    assert verify(book) == (True, "", 0)


def test_a_batch_whose_every_command_is_refused_adds_no_record(book: ledger.Ledger) -> None:
    scenario(book)
    before = records(book)
    group = book.writer
    assert isinstance(group, writer.GroupCommit)
    # No funds: each Place Bet is refused in its savepoint; the batch commits its refusals'
    # delivery rows and no money, so its commit is no record (the rows come to none).
    commands = [book._place_command(P.place(P.entry(uid, user="broke"))) for uid in (40, 41)]
    answers = group.apply_now(commands)
    assert [answer[0] for answer in answers if isinstance(answer, tuple)] == [False, False]
    assert records(book) == before
    assert verify(book) == (True, "", 0)


@given(values=st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=6))
def test_sqlites_json_array_spells_any_row_as_the_canonical_form_does(
    values: list[str | None],
) -> None:
    # SQLite builds each row's JSON text (json_array) for the chain; an independent verifier
    # writes it as Python's json does: the two must agree on every text.
    with sqlite3.connect(":memory:") as connection:
        marks = ", ".join("?" * len(values))
        (built,) = connection.execute(f"SELECT json_array({marks})", values).fetchone()
    assert built == row_json(values)


def test_postgres_to_json_spells_any_row_as_the_canonical_form_does(postgres_url: str) -> None:
    # Postgres builds each row's JSON text with to_json, when sealing and when verify reads:
    # an independent verifier writes it as Python's json does, and the two must agree.
    engine = create_engine(normalize_url(postgres_url))

    @settings(max_examples=60, deadline=None)
    @given(values=st.lists(st.one_of(st.none(), st.text()), min_size=1, max_size=6))
    def agrees(values: list[str | None]) -> None:
        # Text Postgres cannot hold (NUL) is replaced before it is stored (docs/security.md).
        values = [None if value is None else value.replace("\x00", "\ufffd") for value in values]
        spelled = " || ',' || ".join(
            f"coalesce(to_json(CAST(:v{n} AS text))::text, 'null')" for n in range(len(values))
        )
        with engine.connect() as connection:
            built = connection.execute(
                text(f"SELECT '[' || {spelled} || ']'"),
                {f"v{n}": value for n, value in enumerate(values)},
            ).scalar_one()
        assert built == row_json(values)

    try:
        agrees()
    finally:
        engine.dispose()
