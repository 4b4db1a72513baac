"""Place Bet: hold every new entry of a request, all or none; a re-sent entry is answered as
it was."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import (
    BetConflict,
    InsufficientFunds,
    LedgerError,
)
from .accounts import HOUSE_TICKETS, held_account, is_house, user_account
from .bets import Bet, BetState, Entry, Funding
from .journal import Posting, Replay, Transaction, TxnKind, transfer


class Placement(NamedTuple):
    """What a new entry writes: the bet record and the legs of its hold (none when free)."""

    bet: Bet
    legs: tuple[Posting, ...]


def _matches(bet: Bet, entry: Entry) -> bool:
    return (
        bet.user == entry.user
        and bet.pool_uid == entry.pool_uid
        and bet.currency == entry.currency
        and bet.amount == entry.amount
        and bet.rake == entry.rake
    )


def place(entry: Entry, existing: Bet | None, secrets: Mapping[str, Any]) -> Placement | Replay:
    """Decide a Place Bet entry: a new placement, the replay it is, or an error.

    A bet already refunded or settled is never debited again: the re-send answers success.
    """
    if existing is not None:
        if existing.state == BetState.REFUNDED:
            return Replay.EXISTS_REFUNDED
        if existing.state == BetState.SETTLED:
            return Replay.EXISTS_SETTLED
        if not _matches(existing, entry):
            raise BetConflict(
                f"bet {entry.bet_uid} was placed with a different user, pool, amount or currency",
                bet_uid=entry.bet_uid,
            )
        return Replay.EXISTS
    total = entry.amount + entry.rake
    if entry.ticket:
        funding, source = Funding.TICKET, HOUSE_TICKETS
    elif total == 0:
        return Placement(_new_bet(entry, Funding.FREE, secrets), ())
    else:
        funding, source = Funding.CASH, user_account(entry.user)
    legs = transfer(source, held_account(entry.user), entry.currency, total, entry.bet_uid)
    return Placement(_new_bet(entry, funding, secrets), legs)


def _new_bet(entry: Entry, funding: Funding, secrets: Mapping[str, Any]) -> Bet:
    """The bet a new entry places: its fields in :class:`Bet`'s order, by position (by keyword,
    a named tuple of thirteen fields costs 1.2 us to build instead of 0.5; one per bet)."""
    uid, user, pool_uid, currency, amount, rake, ticket, request_uuid = entry
    return Bet(
        uid, user, pool_uid, currency, amount, rake, funding, BetState.PLACED, None, None,
        ticket, request_uuid, secrets,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class PlacedBets:
    """The answer to Place Bet: ``secrets`` go back to the platform and are stored per bet."""

    secrets: dict[str, Any]
    placed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


class PlaceRequest(NamedTuple):
    """One Place Bet request (or one chunk of a huge one), amounts in minor units."""

    entries: Sequence[Entry]
    reference: str  # the request's own: its secrets, and the key of its hold
    part: int | None = None  # the chunk of a huge request: each chunk's hold has its own key

    @property
    def key(self) -> str:
        suffix = "" if self.part is None else f":{self.part}"
        return f"hold:{self.reference}{suffix}"


class PlaceDecision(NamedTuple):
    """What an accepted Place Bet request writes (new bets, their holds) and what it answers."""

    bets: list[Bet]
    transaction: Transaction | None
    answer: PlacedBets


def debited_accounts(entries: Iterable[Entry]) -> set[tuple[str, str]]:
    """The ``(account, currency)`` pairs a Place Bet may debit: their balances decide overdrafts."""
    return {
        (user_account(entry.user), entry.currency)
        for entry in entries
        if not entry.ticket and entry.total
    }


def held_accounts(entries: Iterable[Entry]) -> set[tuple[str, str]]:
    """The ``(account, currency)`` pairs the holds of a Place Bet may credit."""
    return {
        (held_account(entry.user), entry.currency)
        for entry in entries
        if entry.ticket or entry.total
    }


def place_many(
    requests: Sequence[PlaceRequest],
    known: Mapping[int, Bet | None],
    balances: Mapping[tuple[str, str], int],
    admit: Callable[[list[Bet]], LedgerError | None] | None = None,
) -> list[PlaceDecision | LedgerError]:
    """Decide Place Bet requests in order, each all or nothing, as if they came one by one.

    ``known`` holds the recorded bets the requests name (absent or ``None``: unknown) and
    ``balances`` the available balances of their :func:`debited_accounts` (absent: zero; any
    other account in it is not looked at). A request that fails gets its error in its place and
    leaves no trace; one that holds is seen by the requests after it: its bets are known, its
    debits spent. The store's conditional debits and unique keys still guard what is finally
    written. ``admit`` (the responsible-gambling limits: :class:`.limit_gate.Gate`) is asked
    about each request's new bets once its funds are found; its error refuses that request
    alone. A re-sent entry is no new bet: a request that was accepted stays accepted.
    """
    seen = dict(known)
    available = dict(balances)
    decisions: list[PlaceDecision | LedgerError] = []
    for request in requests:
        try:
            decision, spent = _place_request(request, seen, available)
        except LedgerError as error:
            decisions.append(error)
            continue
        refused = None if admit is None or not decision.bets else admit(decision.bets)
        if refused is not None:
            decisions.append(refused)
            continue
        for bet in decision.bets:
            seen[bet.uid] = bet
        for account, amount in spent.items():
            available[account] = available.get(account, 0) + amount
        decisions.append(decision)
    return decisions


def _place_request(
    request: PlaceRequest,
    known: Mapping[int, Bet | None],
    available: Mapping[tuple[str, str], int],
) -> tuple[PlaceDecision, dict[tuple[str, str], int]]:
    secrets = {"ledger_ref": request.reference}
    mine: dict[int, Bet] = {}  # bets this request places: an entry named twice is held once
    legs: list[Posting] = []
    spent: dict[tuple[str, str], int] = defaultdict(int)
    placed: list[int] = []
    unchanged: list[int] = []
    stored: Mapping[str, Any] | None = None
    for entry in request.entries:
        existing = mine.get(entry.bet_uid) or known.get(entry.bet_uid)
        decided = place(entry, existing, secrets)
        if isinstance(decided, Replay):
            if stored is None and existing is not None:
                stored = existing.secrets
            unchanged.append(entry.bet_uid)
            continue
        mine[entry.bet_uid] = decided.bet
        placed.append(entry.bet_uid)
        legs += decided.legs
        for name, currency, amount, _ in decided.legs:
            if amount < 0 and not is_house(name):
                account = (name, currency)
                spent[account] += amount
                # No overdraft: the whole request fails when any entry would take the user's
                # available balance below zero (contract: 402, nothing applied).
                if available.get(account, 0) + spent[account] < 0:
                    raise InsufficientFunds(
                        f"user {entry.user} has insufficient {entry.currency} funds",
                        bet_uid=entry.bet_uid,
                    )
    transaction = Transaction.journal(request.key, TxnKind.HOLD, legs) if legs else None
    # A pure re-send answers with the secrets the platform already stored for its bets.
    answer = secrets if placed or not stored else dict(stored)
    decision = PlaceDecision(
        list(mine.values()), transaction, PlacedBets(answer, placed, unchanged)
    )
    return decision, spent


def merge_placements(parts: Sequence[PlacedBets]) -> PlacedBets:
    """One answer for a huge request decided chunk by chunk: placed or not, as a whole."""
    answer = next((part.secrets for part in parts if part.placed), parts[0].secrets)
    return PlacedBets(
        answer,
        [uid for part in parts for uid in part.placed],
        [uid for part in parts for uid in part.unchanged],
    )
