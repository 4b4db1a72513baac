"""Place Bets applied by a group commit in a child process (ledger.writer.process).

The server's default (``LEDGER_WRITER_PROCESS``): the end-to-end, crash and concurrency suites
run ``ledger serve`` with it. Here, its own rules: the same answers as in process, only Place
Bets cross, a child that dies costs a 503 and never a lost or doubled write, and closing
finishes what was sent.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future
from decimal import Decimal as D
from pathlib import Path
from typing import Any

import pytest

import ledger
from ledger import errors
from ledger.commands import Move, PlaceBets
from ledger.deliveries import Delivery
from ledger.directory import Seen, TournamentSeen, UserSeen
from ledger.domain import Entry, PlacedBets, PlaceRequest, deposit
from ledger.settings import Settings, SettingsError
from ledger.stores import base as store_base
from ledger.writer import GroupCommit
from ledger.writer.pipe import dumps, loads
from ledger.writer.process import ChildSpec, ProcessWriter
from support import payloads as P
from support.books import balance


@pytest.fixture
def book(store_url: str) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(store_url, writer_process=True) as opened:
        yield opened


def process_writer(book: ledger.Ledger) -> ProcessWriter:
    assert isinstance(book.writer, ProcessWriter)
    return book.writer


def child_pid(book: ledger.Ledger) -> int:
    child = process_writer(book)._child
    assert child is not None
    assert child.process.pid is not None
    return child.process.pid


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def commands_of_children(parent: int) -> list[bytes]:
    """The command lines of ``parent``'s child processes (others may come and go meanwhile)."""
    commands = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if parent_of(int(entry.name)) == parent:
                commands.append((entry / "cmdline").read_bytes())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited while we looked
    return commands


def test_place_bets_are_applied_in_a_child_process_with_the_answers_of_one_in_process(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "20.00", "seed-u1")
    futures = [
        book.submit_place_bets(P.place(P.entry(1, user="u1"))),
        # u2 has nothing: refused with 402 and its own error class, writing nothing.
        book.submit_place_bets(P.place(P.entry(2, user="u2"))),
    ]
    first = futures[0].result(timeout=60)
    assert first.placed == [1]
    refused = futures[1].exception(timeout=60)
    assert isinstance(refused, ledger.InsufficientFunds)
    assert (refused.key, refused.status) == ("user.insufficient_funds", 402)
    # A re-send: answered from what the child committed, the same secrets, nothing moved.
    again = book.place_bets(P.place(P.entry(1, user="u1")))
    assert (again.placed, again.unchanged, again.secrets) == ([], [1], first.secrets)
    assert balance(book, "u1") == (D("9.00"), D("11.00"))
    assert parent_of(child_pid(book)) == os.getpid()
    assert book.bet(2) is None
    assert book.check().ok


def test_opening_waits_for_the_child_to_be_ready_so_a_first_place_bet_pays_no_start_up(
    book: ledger.Ledger,
) -> None:
    writer = process_writer(book)
    assert writer._child is not None
    assert writer._child.ready.is_set()
    assert writer._child.process.is_alive()
    started = writer._child.process.pid
    book.deposit("u1", "EUR", "20.00", "seed-u1")
    assert book.place_bets(P.place(P.entry(1, user="u1"))).placed == [1]
    assert writer._child.process.pid == started


def test_only_place_bets_cross_to_the_child_the_rest_stays_on_the_servers_writer(
    book: ledger.Ledger,
) -> None:
    writer = process_writer(book)
    local = writer.local
    assert isinstance(local, GroupCommit) or not book.store.single_writer
    book.deposit("u1", "EUR", "20.00", "seed-u1")
    book.place_bets(P.place(P.entry(1, user="u1", pool=7)))
    sent = child_pid(book)
    # With the child frozen, everything but a Place Bet is still applied: it never crossed.
    os.kill(sent, signal.SIGSTOP)
    try:
        closed = book.submit_refund(P.refund(7, 1))
        assert closed.result(timeout=60).closed == [1]
        moved = writer.submit(Move(deposit("u1", "EUR", 100, "more")))
        assert moved.result(timeout=60) is True
        frozen = book.submit_place_bets(P.place(P.entry(2, user="u1", pool=7)))
        time.sleep(0.2)
        assert not frozen.done()
    finally:
        os.kill(sent, signal.SIGCONT)
    assert frozen.result(timeout=60).placed == [2]
    assert child_pid(book) == sent  # the same child throughout
    assert balance(book, "u1") == (D("10.00"), D("11.00"))


def test_a_child_that_dies_with_writes_in_hand_answers_them_503_and_a_resend_applies_once(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "50.00", "seed-u1")
    book.place_bets(P.place(P.entry(1, user="u1")))
    pid = child_pid(book)
    os.kill(pid, signal.SIGSTOP)  # what is sent now waits in the pipe
    try:
        pending = book.submit_place_bets(P.place(P.entry(2, user="u1")))
        time.sleep(0.2)
        assert not pending.done()
    finally:
        os.kill(pid, signal.SIGKILL)
    error = pending.exception(timeout=60)
    assert isinstance(error, ledger.StoreUnavailable)
    assert error.status == 503
    assert error.retryable
    # The next Place Bet starts another child; the platform's re-send is applied exactly once.
    resent = book.place_bets(P.place(P.entry(2, user="u1")))
    assert resent.placed == [2] or resent.unchanged == [2]
    assert child_pid(book) != pid
    assert balance(book, "u1") == (D("28.00"), D("22.00"))
    assert book.check().ok


def test_closing_finishes_and_answers_everything_the_child_was_sent(store_url: str) -> None:
    opened = ledger.open_ledger(store_url, writer_process=True)
    opened.deposit("u1", "EUR", "1000.00", "seed-u1")
    futures: list[Future[Any]] = [
        opened.submit_place_bets(P.place(P.entry(uid, user="u1"))) for uid in range(1, 41)
    ]
    child = process_writer(opened)._child
    assert child is not None
    opened.close()
    assert [f.result(timeout=0).placed for f in futures] == [[uid] for uid in range(1, 41)]
    assert not child.process.is_alive()
    with ledger.open_ledger(store_url) as reopened:
        assert balance(reopened, "u1") == (D("560.00"), D("440.00"))


def test_a_place_bet_after_closing_is_refused_503() -> None:
    writer = ProcessWriter(_NeverUsed(), spec=None)  # type: ignore[arg-type]
    writer.close()
    refused = writer.submit(_place()).exception(timeout=0)
    assert isinstance(refused, ledger.StoreUnavailable)


def test_a_child_that_cannot_open_the_database_answers_503_and_stays_up() -> None:
    writer = ProcessWriter(_NeverUsed(), ChildSpec("sqlite:////proc/no-such-place/ledger.db"))
    try:
        first = writer.submit(_place()).exception(timeout=60)
        assert isinstance(first, ledger.StoreUnavailable)
        assert writer._child is not None
        pid = writer._child.process.pid
        second = writer.submit(_place()).exception(timeout=60)
        assert isinstance(second, ledger.StoreUnavailable)
        # The same child answers: not a new process (and its imports) per refused request.
        assert writer._child.process.pid == pid
        assert writer._child.process.is_alive()
    finally:
        writer.close()


# The modules whose errors a write can raise (the kit's and the console's never reach a writer).
# Named, not found by walking subclasses: what else is imported depends on which tests ran
# before, and the two pytest-xdist workers must collect the same tests.
_WRITE_ERROR_MODULES = (errors, store_base)


def _all(cls: type[errors.LedgerError]) -> Iterator[type[errors.LedgerError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _all(sub)


def _write_errors() -> list[type[errors.LedgerError]]:
    names = {module.__name__ for module in _WRITE_ERROR_MODULES}
    found = {cls for cls in _all(errors.LedgerError) if cls.__module__ in names}
    return sorted(found, key=lambda cls: cls.__qualname__)


@pytest.mark.parametrize("cls", _write_errors())
def test_every_ledger_error_crosses_the_pipe_with_its_class_key_status_message_and_bet(
    cls: type[errors.LedgerError],
) -> None:
    sent = cls("what happened", key="some.key", bet_uid=7)
    received = loads(dumps(sent))
    assert type(received) is cls
    assert (received.key, received.status, received.message, received.bet_uid) == (
        "some.key",
        sent.status,
        "what happened",
        7,
    )
    assert received.retryable == sent.retryable


def test_the_server_applies_place_bets_in_a_child_unless_LEDGER_WRITER_PROCESS_is_off() -> None:
    assert Settings.from_env({}).writer_process is True
    assert Settings.from_env({}).ledger_options()["writer_process"] is True
    assert Settings.from_env({"LEDGER_WRITER_PROCESS": "off"}).writer_process is False
    assert Settings.from_env({"LEDGER_WRITER_PROCESS": "ON"}).writer_process is True
    with pytest.raises(SettingsError, match="LEDGER_WRITER_PROCESS"):
        Settings.from_env({"LEDGER_WRITER_PROCESS": "maybe"})


class _NeverUsed:
    def submit(self, command: Any) -> Future[Any]:
        raise AssertionError("a Place Bet must not reach the local writer")

    def run(self, command: Any) -> Any:
        raise AssertionError("a Place Bet must not reach the local writer")

    def close(self) -> None:
        return None


def _place() -> PlaceBets:
    return PlaceBets(PlaceRequest([], "a-reference"))


def test_the_server_started_by_ledger_serve_runs_its_place_bets_in_a_child(
    tmp_path: Path,
) -> None:
    from support.httpkit import PLACE, SECRET, dumps, headers, run_server

    env = {"LEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'l.db'}", "LEDGER_JWT_SECRET": SECRET}
    import httpx

    with run_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as http:
        response = http.post("/bets", content=dumps(P.place(P.entry(1))), headers=headers(PLACE))
        assert response.status_code == 402, response.text  # u1 has nothing: decided by the child
        commands = commands_of_children(server.process.pid)
        assert any(b"multiprocessing" in command for command in commands), commands


def test_a_place_bet_and_its_answer_cross_the_pipe_unchanged() -> None:
    from datetime import UTC, datetime

    delivery = Delivery.arrived("req-1", "create:fantasy_team", "/bets", "127.0.0.1").caller(
        "client", "platform"
    )
    seen = Seen(
        (TournamentSeen(7, "Cup", "EUR", "football", "classic", "open", datetime.now(UTC)),),
        (UserSeen("u1", "Ann", "client"), UserSeen("u2")),
    )
    entries = [Entry(1, "u1", 7, "EUR", 1000, 100), Entry(2, "u2", 7, "EUR", 5, 0, "t", "uuid")]
    commands = [
        PlaceBets(PlaceRequest(entries, "ref", 3), delivery, seen),
        PlaceBets(PlaceRequest([], "ref")),
    ]
    answer = PlacedBets({"1": "s"}, [1], [2])
    for value in [*commands, delivery, answer]:
        copy = loads(dumps(value))
        assert copy == value
        assert type(copy) is type(value)
    copy = loads(dumps(commands[0]))
    assert all(type(entry) is Entry for entry in copy.request.entries)
    assert type(copy.seen) is Seen
    assert all(type(user) is UserSeen for user in copy.seen.users)
    assert all(type(cup) is TournamentSeen for cup in copy.seen.tournaments)


def test_every_sqlite_connection_lets_large_sorts_use_a_helper_thread(tmp_path: Path) -> None:
    # A settle of a million participants sorts its legs, deltas and users: SQLite's sorter
    # sorts and merges runs on helper threads only when a connection allows them.
    from sqlalchemy import text

    from ledger.stores.sqlite import SORTER_THREADS, SqliteStore

    assert 1 <= SORTER_THREADS <= 8
    store = SqliteStore(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("PRAGMA threads")).scalar() == SORTER_THREADS
    finally:
        store.close()


def test_the_child_logs_plain_utc_lines_at_the_servers_level_when_the_server_configured_logging(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    from ledger.logformat import UtcFormatter
    from ledger.writer.child import configured_log_level, log_like_the_server

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        root.handlers[:] = []
        assert configured_log_level() is None  # an embedding program that configured nothing
        log_like_the_server(None)
        assert root.handlers == []
        log_like_the_server(logging.WARNING)
        [handler] = root.handlers
        assert isinstance(handler.formatter, UtcFormatter)
        assert configured_log_level() == logging.WARNING
        logging.getLogger("ledger.writer").warning("the child speaks")
        line = capsys.readouterr().err.strip()
        stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
        assert re.fullmatch(stamp + " WARNING ledger.writer: the child speaks", line), line
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_the_child_applies_and_answers_on_one_thread(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "50.00", "seed-u1")
    book.place_bets(P.place(P.entry(1, user="u1")))
    # No reader or reporter thread to take the GIL from the one that writes. (The store's
    # checkpointer copies the log on a thread of its own, which ends once it has.)
    pid = child_pid(book)
    deadline = time.monotonic() + 10
    while len(os.listdir(f"/proc/{pid}/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(f"/proc/{pid}/task") == [str(pid)]


def test_a_child_stuck_on_a_batch_past_max_wait_has_new_place_bets_refused_503_at_once(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with ledger.open_ledger(url, writer_process=True, max_wait=0.3) as book:
        book.place_bets(P.place(P.entry(1, amount="0", rake="0")))
        pid = child_pid(book)
        os.kill(pid, signal.SIGSTOP)  # stuck, as on a frozen database
        try:
            stuck = book.submit_place_bets(P.place(P.entry(2, amount="0", rake="0")))
            time.sleep(0.5)
            refused = book.submit_place_bets(P.place(P.entry(3, amount="0", rake="0")))
            error = refused.exception(timeout=0)  # answered at once, not after the deadline
            assert isinstance(error, ledger.StoreBusy)
            assert error.status == 503
            assert "busy on one batch" in error.message
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stuck.result(timeout=30).placed == [2]
        # Moving again: taken as before.
        assert book.place_bets(P.place(P.entry(3, amount="0", rake="0"))).placed == [3]
        assert child_pid(book) == pid


def test_the_child_freezes_the_heap_it_started_with_so_its_collector_walks_only_new_objects(
    book: ledger.Ledger,
) -> None:
    child = process_writer(book)._child
    assert child is not None
    # Its imports and open database: tens of thousands of objects, out of the collector's sight.
    assert child.frozen > 10_000


def test_a_batch_larger_than_the_last_is_cut_at_their_mean_and_the_rest_goes_first_next() -> None:
    from ledger.writer.batches import Batches

    batches = Batches()
    assert batches.take(list(range(27)), stopping=False) == list(range(14))  # mean of 0 and 27
    assert batches.holding
    assert batches.take([], stopping=False) == list(range(14, 27))  # nothing new: held go now
    assert not batches.holding
    # Uneven halves (27, then 37) even out: 32, and the 5 held lead the next batch.
    batches = Batches()
    assert batches.take(list(range(54)), stopping=False) == list(range(27))  # mean of 0 and 54
    assert batches.take([], stopping=False) == list(range(27, 54))  # the last batch: 27
    first = batches.take([f"a{n}" for n in range(37)], stopping=False)
    assert first == [f"a{n}" for n in range(32)]
    second = batches.take([f"b{n}" for n in range(27)], stopping=False)
    assert second == [f"a{n}" for n in range(32, 37)] + [f"b{n}" for n in range(27)]
    assert not batches.holding
    # A smaller batch is never cut, and a stop applies everything held and received.
    assert batches.take(["c"], stopping=False) == ["c"]
    batches.take(list(range(10)), stopping=False)
    assert batches.holding
    assert batches.take(["last"], stopping=True) == [*range(6, 10), "last"]
    assert not batches.holding


def test_the_child_applies_what_it_held_back_without_waiting_for_more(
    book: ledger.Ledger,
) -> None:
    # 40 Place Bets sent at once: the child cuts a batch larger than the one before it, and
    # what it held back must be applied although nothing more comes down the pipe.
    book.deposit("u1", "EUR", "1000.00", "seed-u1")
    futures = [book.submit_place_bets(P.place(P.entry(uid))) for uid in range(1, 41)]
    for future in futures:
        future.result(timeout=30)
    assert balance(book, "u1") == (D("560.00"), D("440.00"))  # 40 holds of 10.00 + 1.00 rake
