"""Place Bet: hold every new entry of a request, all or none; small ones decided together.

A request is read, decided by the domain (:func:`ledger.domain.place`) and written in one unit
of work. Consecutive small Place Bets of a group-commit batch are decided together against bets
and balances read once, and written set-based (:meth:`PlaceBets.apply_group`). A huge request is
chunked (:data:`CHUNK` bets at a time, in the one transaction), so that memory stays bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import directory, domain, events
from ..deliveries import Delivery
from ..directory import NOTHING_SEEN, Seen, TournamentSeen, UserSeen
from ..domain import (
    Entry,
    Gate,
    PlacedBets,
    PlaceDecision,
    PlaceRequest,
)
from ..errors import LedgerError
from ..stores import UnitOfWork
from ..writer import pipe
from ..writer.port import Single
from . import chunks
from .recording import journal, record_seen, request_id

log = logging.getLogger("ledger.writer")


@dataclass(frozen=True, slots=True)
class PlaceBets(Single):
    """Place Bet: hold every new entry of one request, all or none."""

    request: PlaceRequest
    # The delivery it came in (None: not journalled): its 200 row is written with its effects.
    delivery: Delivery | None = None
    # The tournaments and users the payload described, recorded with its effects.
    seen: Seen = NOTHING_SEEN

    @property
    def size(self) -> int:
        return len(self.request.entries)

    @property
    def batched(self) -> bool:
        return True

    @property
    def groupable(self) -> bool:
        return self.size <= chunks.CHUNK

    def apply(self, uow: UnitOfWork) -> PlacedBets:
        answers = []
        for part, entries in chunks.split(self.request.entries):
            # A later chunk reads what earlier ones wrote (same transaction): an entry repeated
            # across chunks is held once, and the balances are what is left.
            piece = PlaceRequest(entries, self.request.reference, part)
            [decision], gate = _decide_places(uow, [piece])
            if isinstance(decision, LedgerError):
                raise decision
            _write_places(uow, [(decision, self.delivery)], gate)
            answers.append(decision.answer)
        placed = domain.merge_placements(answers)
        # After the decisions: a refused request records nothing (its unit is rolled back).
        record_seen(uow, self.seen)
        journal(uow, [(self.delivery, placed)])
        return placed

    def apply_group(self, uow: UnitOfWork, group: Sequence[Any]) -> list[PlacedBets | LedgerError]:
        """Decide small Place Bets together against bets and balances read once, write set-based.

        A refused request gets its error in its place and writes nothing; the others are
        written together.
        """
        commands: list[PlaceBets] = [command for command in group if isinstance(command, PlaceBets)]
        assert len(commands) == len(group), "a group is of Place Bets only"
        decisions, gate = _decide_places(uow, [command.request for command in commands])
        _write_places(
            uow,
            [
                (decision, command.delivery)
                for command, decision in zip(commands, decisions, strict=True)
                if not isinstance(decision, LedgerError)
            ],
            gate,
        )
        outcomes = [d if isinstance(d, LedgerError) else d.answer for d in decisions]
        accepted = [
            (command, outcome)
            for command, outcome in zip(commands, outcomes, strict=True)
            if not isinstance(outcome, LedgerError)
        ]
        # One upsert per table for the whole group, of the requests that were not refused.
        record_seen(uow, directory.merge(command.seen for command, _ in accepted))
        # Only the accepted ones are journalled here; refusals are recorded after the fact.
        journal(uow, [(command.delivery, outcome) for command, outcome in accepted])
        return outcomes


def _decide_places(
    uow: UnitOfWork, requests: Sequence[PlaceRequest]
) -> tuple[list[PlaceDecision | LedgerError], Gate]:
    entries = [entry for request in requests for entry in request.entries]
    # The held balances the holds will credit are read too, in the same statement: the unit of
    # work then writes the whole group without reading a balance again. SQLite, one-bet Place
    # Bets in groups of 30 among 4,000 accounts: one read a group instead of two, 2.1 against
    # 2.6 us of CPU a bet; Postgres: the group's reads one round trip and its writes another.
    users = {entry.user for entry in entries}
    known, balances = uow.bets_and_balances(
        [entry.bet_uid for entry in entries],
        domain.debited_accounts(entries),
        domain.held_accounts(entries),
        users,
    )
    # After the accounts' locks: the users' limits (one probe for the group when none is
    # limited; a limited user's state read under the lock on it). A refused request is refused
    # alone, as for want of funds; a re-sent entry is no new bet and passes.
    gate = uow.limits.gate(users)
    admit = gate.admit_bets if gate else None
    return domain.place_many(requests, known, balances, admit), gate


def _write_places(
    uow: UnitOfWork, decisions: Sequence[tuple[PlaceDecision, Delivery | None]], gate: Gate
) -> None:
    uow.add_bets([bet for decision, _ in decisions for bet in decision.bets])
    uow.post([d.transaction for d, _ in decisions if d.transaction is not None])
    # One bulk append for the whole group: each new bet's event, with its delivery's id.
    uow.append_events(
        [
            row
            for decision, delivery in decisions
            for row in events.placed_rows(decision.bets, request_id(delivery))
        ]
    )
    if gate.recorded:
        uow.limits.record(gate)


# --- crossing to the writer process (ledger.writer.pipe) -----------------------------------------


def _reduce(command: PlaceBets) -> tuple[Callable[..., PlaceBets], tuple[Any, ...]]:
    # As plain tuples, pickled in C: a third of the cost of the named tuples' own pickling, once
    # per Place Bet on the event loop's side.
    request, seen = command.request, command.seen
    return _rebuild, (
        [tuple(entry) for entry in request.entries],
        request.reference,
        request.part,
        command.delivery,
        [tuple(tournament) for tournament in seen.tournaments],
        [tuple(user) for user in seen.users],
    )


def _rebuild(
    entries: list[tuple[Any, ...]],
    reference: str,
    part: int | None,
    delivery: Delivery | None,
    tournaments: list[tuple[Any, ...]],
    users: list[tuple[Any, ...]],
) -> PlaceBets:
    """A :class:`PlaceBets` from what :func:`_reduce` gave."""
    return PlaceBets(
        PlaceRequest([Entry(*entry) for entry in entries], reference, part),
        delivery,
        Seen(
            tuple([TournamentSeen(*tournament) for tournament in tournaments]),
            tuple([UserSeen(*user) for user in users]),
        ),
    )


pipe.register(PlaceBets, _reduce)
