"""The server's side of one writer process: the child, its pipe, and the two threads that feed
it and read its answers.

Invariant: every future handed to a link is resolved exactly once: with the child's outcome, or,
when the child dies first, with 503 ``store.unavailable`` (committed or not, nobody can tell, and
the platform's re-send is idempotent); a link holding too much, or stuck on one batch past
``max_wait``, refuses at once with 503 ``store.busy``. Proved by
``tests/service/test_writer_process.py`` (a child that dies with writes in hand, a child stuck
past ``max_wait``, closing finishing what was sent).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import queue
import threading
import time
import weakref
from concurrent.futures import Future, InvalidStateError
from typing import Any

from ..errors import StoreBusy, StoreUnavailable
from .child import ChildSpec, Ready, child_main, configured_log_level
from .pipe import dumps, loads
from .port import Command

log = logging.getLogger("ledger.writer")

# How long close() waits for the child to finish what it was sent and exit.
CLOSE_TIMEOUT = 30.0


class ChildLink:
    """One child process, its pipe, and the server-side threads that feed it and read it."""

    def __init__(self, spec: ChildSpec) -> None:
        # spawn, never fork: the server has threads (a forked lock held by one of them would
        # stay held in the child forever).
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self.process = context.Process(
            target=child_main,
            args=(spec, child_end, configured_log_level()),
            name="ledger-writer-process",
            daemon=True,
        )
        self.process.start()
        child_end.close()
        self.waiting: dict[int, Future[Any]] = {}
        self.spec = spec
        # When the child last answered, or was handed work while holding none.
        self._progress = time.monotonic()
        self.outbox: queue.SimpleQueue[tuple[int, Command[Any]] | None] = queue.SimpleQueue()
        self.alive = True
        self.ready = threading.Event()  # set by its Ready message, or when it is gone
        self.frozen = 0  # as its Ready message says
        self._lock = threading.Lock()  # between take() and the receiver's end
        _LIVE.add(self)
        self._sender = threading.Thread(target=self._send, name="ledger-writer-send", daemon=True)
        self._receiver = threading.Thread(
            target=self._receive, name="ledger-writer-receive", daemon=True
        )
        self._sender.start()
        self._receiver.start()

    def take(self, ident: int, command: Command[Any], future: Future[Any], bound: int) -> bool:
        """Send ``command`` to the child, its outcome to ``future``; False if the child is dead."""
        with self._lock:
            if not self.alive:
                return False
            refusal = self._refusal(bound)
            if refusal is not None:
                future.set_exception(refusal)
                return True
            if not self.waiting:
                self._progress = time.monotonic()
            self.waiting[ident] = future
        self.outbox.put((ident, command))
        return True

    def _refusal(self, bound: int) -> StoreBusy | None:
        # Bounded, as the group-commit writer is: an overload or a frozen database answers 503
        # at once (the platform re-sends later) instead of growing memory and outlasting the
        # platform's timeout. The child applies batch after batch and answers each, so one
        # that has answered nothing for max_wait seconds while holding work is stuck on one.
        if len(self.waiting) >= bound:
            return StoreBusy(f"{len(self.waiting)} writes are queued: re-send later")
        max_wait = self.spec.max_wait
        if self.waiting and time.monotonic() - self._progress > max_wait:
            return StoreBusy(
                f"the writer has been busy on one batch for over {max_wait:g} s: re-send later"
            )
        return None

    def _send(self) -> None:
        # One pickle and one write per burst of submissions, not per command.
        while True:
            items = _drain(self.outbox)
            batch = [item for item in items if item is not None]
            try:
                if batch:
                    self._conn.send_bytes(self._pickled(batch))
                if None in items:
                    self._conn.send_bytes(dumps(None))
                    return
            except (OSError, ValueError):
                return  # the child is gone: the receiver sees the pipe close, fails the rest

    def _pickled(self, batch: list[tuple[int, Command[Any]]]) -> bytes:
        try:
            return dumps(batch)
        except Exception:  # noqa: BLE001 - fail only the command that does not pickle
            kept = []
            for ident, command in batch:
                try:
                    dumps(command)
                    kept.append((ident, command))
                except Exception as error:  # noqa: BLE001 - a bug: answered 500, as in process
                    self._settle(ident, False, error)
            return dumps(kept)

    def _settle(self, ident: int, ok: bool, value: Any) -> None:
        with self._lock:
            future = self.waiting.pop(ident, None)
        if future is None:
            return
        with contextlib.suppress(InvalidStateError):  # its caller cancelled its wait
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _receive(self) -> None:
        try:
            while True:
                message = loads(self._conn.recv_bytes())
                if isinstance(message, Ready):
                    self.frozen = message.frozen
                    self.ready.set()
                    continue
                self._progress = time.monotonic()
                for ident, ok, value in message:
                    self._settle(ident, ok, value)
        except (EOFError, OSError):
            pass
        self.ready.set()  # nobody waits for a child that is gone
        with self._lock:
            self.alive = False
            lost, self.waiting = self.waiting, {}
        _LIVE.discard(self)
        if lost:
            # Committed or not, nobody can tell: a 503 makes the platform re-send, idempotently.
            log.error("the writer process stopped with %d writes unanswered", len(lost))
        for future in lost.values():
            with contextlib.suppress(InvalidStateError):
                future.set_exception(
                    StoreUnavailable("the writer process stopped before answering: re-send")
                )

    def close(self) -> None:
        """Let the child finish what it was sent, answer it, and exit."""
        _LIVE.discard(self)
        self.outbox.put(None)
        self._receiver.join(CLOSE_TIMEOUT)
        self.process.join(1.0)
        if self.process.is_alive():
            log.warning("the writer process did not exit within %g s; killing it", CLOSE_TIMEOUT)
            self.process.kill()
            self.process.join()
        self._conn.close()


# Children still running: closed at exit, before multiprocessing joins them (it would wait for
# ever, the child waiting for the pipe to close).
_LIVE: weakref.WeakSet[ChildLink] = weakref.WeakSet()


@atexit.register
def _close_children() -> None:
    for child in list(_LIVE):
        child.close()


def _drain(source: queue.SimpleQueue[Any]) -> list[Any]:
    """Every item waiting in ``source``, at least one (blocks for it)."""
    items = [source.get()]
    while True:
        try:
            items.append(source.get_nowait())
        except queue.Empty:
            return items
