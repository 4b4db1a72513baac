"""The write path's port: a command knows how to apply itself in one unit of work; a writer
applies commands and answers each with a future, resolved after the commit.

Three adapters of :class:`Writer`, chosen once by :func:`ledger.open_ledger`:
:class:`~ledger.writer.direct.DirectWriter` (each command in a unit of work of its own, and the
one retry loop), :class:`~ledger.writer.group_commit.GroupCommit` (one writer thread, many
commands per transaction) and :class:`~ledger.writer.process.ProcessWriter` (Place Bets applied
in a child process). None of them names a command: what each needs to know of one, the command
says through this protocol.

Correctness does not depend on the batching: the database's unique keys, conditional debits and
triggers guard every write as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from ..stores import UnitOfWork

__all__ = ["Command", "Single", "Writer"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Command(Protocol[R_co]):
    """A write, applied in one unit of work; it raises a :class:`LedgerError` to refuse."""

    @property
    def size(self) -> int:
        """How many bets it carries (1 for a deposit): its garbage-collector pause, and huge
        commands are never grouped."""
        ...

    @property
    def bulk(self) -> bool:
        """Whether its unit of work is a bulk one (a huge close, staged in the database): said
        before the unit opens (:meth:`ledger.stores.port.Store.unit_of_work`)."""
        ...

    @property
    def batched(self) -> bool:
        """Many small ones arrive at once (Place Bet): queued to the group commit on every
        store, applied in the writer process when there is one, and a batch that starts with
        them is applied without a savepoint. Others are queued only where the store admits one
        writer at a time, and are applied in the server."""
        ...

    @property
    def groupable(self) -> bool:
        """Consecutive ones are applied together by :meth:`apply_group`."""
        ...

    @property
    def deferred(self) -> bool:
        """It touches nothing another command reads (a refused delivery's journal row): a
        batch applies it after the others, so that it never splits a group."""
        ...

    def apply(self, uow: UnitOfWork) -> R_co:
        """Apply the command alone; nothing it wrote survives an exception."""
        ...

    def apply_group(self, uow: UnitOfWork, group: Sequence[Any]) -> Sequence[Any]:
        """Apply ``group`` (this command first, every one groupable and of this kind) together:
        each one's result, or the :class:`LedgerError` refusing it, in order. A group that
        raises wrote nothing, and its commands are applied alone."""
        ...


class Writer(Protocol):
    """Where commands go: every adapter answers with a future, resolved after the commit."""

    def submit(self, command: Command[R]) -> Future[R]:
        """Queue or start ``command``; its future holds the result or the error."""
        ...

    def run(self, command: Command[R]) -> R:
        """Apply ``command`` and wait for its durable result (or raise its error)."""
        ...

    def close(self) -> None:
        """Finish what was submitted, then stop."""
        ...


class Single:
    """What most commands are, as :class:`Command` asks: applied alone, in a unit of work of
    the usual kind, in its place in a batch. A command says otherwise by overriding."""

    __slots__ = ()

    @property
    def bulk(self) -> bool:
        return False

    @property
    def batched(self) -> bool:
        return False

    @property
    def groupable(self) -> bool:
        return False

    @property
    def deferred(self) -> bool:
        return False

    def apply_group(self, uow: UnitOfWork, group: Sequence[Any]) -> Sequence[Any]:
        raise TypeError(f"{type(self).__name__} is applied alone, never in a group")
