"""Tournaments and users as the platform describes them: what a payload says of each, merged.

Every callback payload names its tournaments (``pool``) and users with descriptive fields the
money never depends on: names, the white label, a tournament's category, sport, status and
estimated end. The writer records them (:mod:`ledger.writer`) in the request's own unit of work,
one set-based upsert per table, so an operator can answer "who is this user?" and "what is this
tournament?" from the ledger itself.

The rule of a field that changes: the latest value seen wins, and a payload that does not carry
a field (a refund names no tournament) keeps what was known. It is applied twice, in one sense:
here between the payloads of one batch (:func:`merge`), and by the store's upsert
(``COALESCE(new, old)``) against what is already recorded.

These fields are informational: a malformed one is never a reason to refuse money. A text that
is not a string is dropped, a NUL-bearing one too (Postgres cannot store NUL), a long one is cut
to :data:`LABEL_MAX_LENGTH` characters, and an ``estimatedEndTime`` that is not ISO 8601 is
ignored (kept null).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "LABEL_MAX_LENGTH",
    "NOTHING_SEEN",
    "Seen",
    "TournamentSeen",
    "UserSeen",
    "described",
    "end_time",
    "label",
    "merge",
    "users_seen",
]

LABEL_MAX_LENGTH = 255


def label(value: Any) -> str | None:
    """A descriptive text as stored: a non-empty, NUL-free string of at most 255 characters."""
    if not isinstance(value, str) or not value or "\x00" in value:
        return None
    return value[:LABEL_MAX_LENGTH]


def end_time(value: Any) -> datetime | None:
    """``estimatedEndTime`` as an aware UTC datetime, or ``None`` when it is not ISO 8601.

    A time without a zone is taken as UTC (the platform's servers speak UTC).
    """
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        return None
    try:
        # Python 3.11 reads "Z" and the usual ISO 8601 forms.
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


# NamedTuples rather than frozen dataclasses: one of each is built for every Place Bet, and a
# NamedTuple is built several times faster.


class TournamentSeen(NamedTuple):
    """What one payload said of a tournament; ``None`` where it said nothing."""

    uid: int
    name: str | None = None
    currency: str | None = None
    category: str | None = None
    game_type: str | None = None
    status: str | None = None
    estimated_end: datetime | None = None


class UserSeen(NamedTuple):
    """What one payload said of a user; ``None`` where it said nothing."""

    uid: str
    name: str | None = None
    client: str | None = None


class Seen(NamedTuple):
    """The tournaments and users one request (or a batch of them) named.

    ``entered``: the users placed these bets (a Place Bet), so when they were last seen moves
    to now. A refund or a settle only describes its users: their names are recorded, but the
    time they were last seen stays that of their last entry. It is what an operator asks of a
    user ("when did they last play?"), and a settle of a million entries whose users the
    platform describes as it did when they entered then rewrites none of their rows."""

    tournaments: tuple[TournamentSeen, ...] = ()
    users: tuple[UserSeen, ...] = ()
    entered: bool = True

    def __bool__(self) -> bool:
        return bool(self.tournaments or self.users)


NOTHING_SEEN = Seen()


def users_seen(users: Iterable[Any]) -> list[UserSeen]:
    """Each user as one entry of a payload describes it (an object with ``uid``, ``name`` and
    ``client``), in the payload's order."""
    # tuple.__new__ straight: a NamedTuple's own __new__ is a Python call per user, a tenth of
    # a second at a million participants.
    new = tuple.__new__
    return [new(UserSeen, (user.uid, label(user.name), label(user.client))) for user in users]


def described(users: Iterable[UserSeen]) -> tuple[UserSeen, ...]:
    """One record per uid, sorted: within one payload the last description of a user wins whole
    (a payload describes a user the same way in each of its entries). The set-based close
    applies the same rule in SQL (``ledger.stores.directory.record_staged_users``)."""
    last = {user.uid: user for user in users}
    return tuple(user for _, user in sorted(last.items()))


S = TypeVar("S", TournamentSeen, UserSeen)


def _latest(records: Iterable[S]) -> tuple[S, ...]:
    """One record per uid: each field the latest non-``None`` value among the records, in order."""
    found: dict[Any, S] = {}
    for record in records:
        known = found.get(record.uid)
        if known is None:
            found[record.uid] = record
        elif known != record:
            latest = [
                new if new is not None else old for old, new in zip(known, record, strict=True)
            ]
            found[record.uid] = type(record)._make(latest)
    # Sorted: concurrent writers then lock directory rows in the same order.
    return tuple(sorted(found.values(), key=lambda record: record.uid))


def merge(seen: Iterable[Seen]) -> Seen:
    """What several requests named, in order: per uid, the latest value of each field."""
    parts = list(seen)
    return Seen(
        _latest(record for part in parts for record in part.tournaments),
        _latest(record for part in parts for record in part.users),
    )
