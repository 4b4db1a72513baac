"""The event feed's values: what one committed change says to the operator's other systems.

Every committed write appends events in its own transaction (DESIGN section 8): one per bet
placed (``bet.placed``), refunded (``bet.refunded``) or settled (``bet.settled``, a zero payout
included: the bet closed, and a bonus engine counts closed entries), and one per ``deposit`` and
``withdrawal``. A replay (a re-sent request) and a refused one append nothing, since nothing
changed. Events are numbered in commit order as readers see it: a reader that has seen id N never
later meets an event below N.

How an event row is built (the ``events`` table; :data:`ROW_COLUMNS` after ``grp, ordinal``):

- ``grp`` (bigint): the writing transaction's group key, taken once per transaction from the
  store (``SqlUnitOfWork.event_slots``); ``ordinal`` (int): 0, 1, 2, ... within the transaction,
  contiguous, in the order events are appended. ``(grp, ordinal)`` is the primary key.
- ``type``: one of :data:`TYPES`.
- ``user_uid`` (the user's uid, without ``user:``), ``pool_uid`` and ``bet_uid`` (NULL for
  deposits and withdrawals), ``currency`` (the bet's or the movement's).
- ``amount`` (minor units, exact): the bet's stake (``bets.amount``), the moved amount.
- ``rake`` (minor units): the bet's rake; NULL for movements.
- ``payout`` and ``payout_currency``: a settled bet's, as ``bets`` holds them (0 for none);
  NULL for the other types.
- ``reference``: a movement's reference; NULL for bets.
- ``request_id``: the delivery's ``X-Request-Id`` (NULL without one).

A set-based writer may emit rows itself, e.g. ``INSERT INTO events SELECT :grp, :first +
row_number() OVER (ORDER BY uid) - 1, 'bet.settled', user_uid, pool_uid, uid, currency, amount,
rake, payout, payout_currency, NULL, :request_id FROM ...``, with ``(grp, first)`` from
``uow.event_slots(count)``, which reserves ``count`` ordinals.

At commit the store gives the transaction's events their ids (``event_commits``: the group's
first and last id and its commit time), from a counter row updated as the last statement before
commit: ids are contiguous and follow commit order on both stores (see ``stores/events.py``).

Amounts are kept in minor units and answered as exact decimal strings at the currency's scale.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from .domain import Bet, BetState, Transaction, TxnKind, user_account
from .errors import InvalidRequest
from .money import render

__all__ = [
    "BET_PLACED",
    "BET_REFUNDED",
    "BET_SETTLED",
    "CHECKPOINT",
    "DEFAULT_RETENTION_DAYS",
    "DEPOSIT",
    "EXCLUSION_ENDED",
    "LIMIT_CHANGED",
    "MAX_WAIT",
    "ROW_COLUMNS",
    "TYPES",
    "USER_EXCLUDED",
    "WITHDRAWAL",
    "Event",
    "EventPage",
    "EventRow",
    "checkpoint_row",
    "closed_rows",
    "event_dict",
    "event_text",
    "excluded_row",
    "exclusion_ended_row",
    "limit_row",
    "movement_rows",
    "page_dict",
    "parse_after",
    "parse_types",
    "parse_wait",
    "placed_rows",
    "to_event",
]

BET_PLACED = "bet.placed"
BET_REFUNDED = "bet.refunded"
BET_SETTLED = "bet.settled"
DEPOSIT = "deposit"
WITHDRAWAL = "withdrawal"
LIMIT_CHANGED = "limit.changed"
USER_EXCLUDED = "user.excluded"
EXCLUSION_ENDED = "user.exclusion_ended"
CHECKPOINT = "journal.checkpoint"
TYPES = (
    BET_PLACED,
    BET_REFUNDED,
    BET_SETTLED,
    DEPOSIT,
    WITHDRAWAL,
    LIMIT_CHANGED,
    USER_EXCLUDED,
    EXCLUSION_ENDED,
    CHECKPOINT,
)

# Like the delivery journal: seamless-wallet providers keep transaction records four months.
DEFAULT_RETENTION_DAYS = 120

# The longest a long-poll waits (seconds): below the idle timeouts of common proxies (60 s).
MAX_WAIT = 55.0

ROW_COLUMNS = (
    "type",
    "user_uid",
    "pool_uid",
    "bet_uid",
    "currency",
    "amount",
    "rake",
    "payout",
    "payout_currency",
    "reference",
    "request_id",
)


class EventRow(NamedTuple):
    """One event as written, amounts in minor units (the columns of :data:`ROW_COLUMNS`).

    A NamedTuple: one is made per bet inside the writer's transaction, where it is the cheapest
    record to build, and it is the row tuple the driver receives as is.
    """

    type: str
    user_uid: str
    pool_uid: int | None
    bet_uid: int | None
    currency: str
    amount: int
    rake: int | None
    payout: int | None
    payout_currency: str | None
    reference: str | None
    request_id: str | None


class Event(NamedTuple):
    """One event as read: its id, commit time, and amounts as exact decimal strings."""

    id: int
    type: str
    committed_at: datetime
    user: str
    pool: int | None
    bet: int | None
    currency: str
    amount: str
    rake: str | None
    payout: str | None
    payout_currency: str | None
    reference: str | None
    request_id: str | None


class EventPage(NamedTuple):
    """Events in id order, and the id to read on from (the last one's; ``after`` if none)."""

    events: list[Event]
    next: int


def _bet_row(
    kind: str, bet: Bet, payout: int | None, payout_currency: str | None, request_id: str | None
) -> EventRow:
    return EventRow(
        kind,
        bet.user,
        bet.pool_uid,
        bet.uid,
        bet.currency,
        bet.amount,
        bet.rake,
        payout,
        payout_currency,
        None,
        request_id,
    )


def placed_rows(bets: Iterable[Bet], request_id: str | None) -> list[EventRow]:
    """A ``bet.placed`` row per new bet (a re-sent entry is not new, and is not here)."""
    return [_bet_row(BET_PLACED, bet, None, None, request_id) for bet in bets]


def closed_rows(bets: Iterable[Bet], request_id: str | None) -> list[EventRow]:
    """A ``bet.refunded`` or ``bet.settled`` row per bet closed now, in their new state."""
    return [
        _bet_row(BET_SETTLED, bet, bet.payout or 0, bet.payout_currency or None, request_id)
        if bet.state is BetState.SETTLED
        else _bet_row(BET_REFUNDED, bet, None, None, request_id)
        for bet in bets
    ]


def movement_rows(transaction: Transaction, request_id: str | None) -> list[EventRow]:
    """The ``deposit`` or ``withdrawal`` row of a movement applied now (nothing for others)."""
    if transaction.kind not in (TxnKind.DEPOSIT, TxnKind.WITHDRAWAL) or transaction.user is None:
        return []
    account = user_account(transaction.user)
    [leg] = [leg for leg in transaction.postings if leg.account == account]
    return [
        EventRow(
            transaction.kind.value,
            transaction.user,
            None,
            None,
            leg.currency,
            abs(leg.amount),
            None,
            None,
            None,
            transaction.reference,
            request_id,
        )
    ]


def to_event(
    event_id: int, committed_at: datetime, row: EventRow, scale: Callable[[str], int]
) -> Event:
    """The event of a stored row: amounts rendered exactly at their currency's scale."""
    unit = scale(row.currency)
    payout = None
    if row.payout is not None:
        payout = render(row.payout, scale(row.payout_currency) if row.payout_currency else unit)
    return Event(
        event_id,
        row.type,
        committed_at if committed_at.tzinfo else committed_at.replace(tzinfo=UTC),
        row.user_uid,
        row.pool_uid,
        row.bet_uid,
        row.currency,
        render(row.amount, unit),
        None if row.rake is None else render(row.rake, unit),
        payout,
        row.payout_currency,
        row.reference,
        row.request_id,
    )


def event_dict(event: Event) -> dict[str, Any]:
    """The JSON shape of an event (the feed's and the webhooks' bodies)."""
    body = event._asdict()
    body["committed_at"] = event.committed_at.isoformat()
    return body


def page_dict(page: EventPage) -> dict[str, Any]:
    """The feed's JSON answer: ``{"events": [...], "next": <id>}``."""
    return {"events": [event_dict(event) for event in page.events], "next": page.next}


def event_text(event: Event) -> str:
    """One line per event for a terminal: id, time, type, then what it names."""
    parts = [str(event.id), event.committed_at.isoformat(), event.type, f"user={event.user}"]
    if event.pool is not None:
        parts.append(f"pool={event.pool}")
    if event.bet is not None:
        parts.append(f"bet={event.bet}")
    parts.append(f"amount={event.amount} {event.currency}")
    if event.rake is not None:
        parts.append(f"rake={event.rake}")
    if event.payout is not None:
        parts.append(f"payout={event.payout} {event.payout_currency or event.currency}")
    if event.reference is not None:
        parts.append(f"reference={event.reference}")
    if event.request_id is not None:
        parts.append(f"request_id={event.request_id}")
    return " ".join(parts)


def parse_types(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Event types from ``a,b`` text or a list; ``None`` (all) when empty; an unknown is a 400."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else list(value)
    wanted = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    for name in wanted:
        if name not in TYPES:
            raise InvalidRequest(f"types: expected some of {', '.join(TYPES)}, got {name[:64]!r}")
    return wanted or None


def parse_after(value: str | int | None) -> int:
    """The id a reader has seen (0: none yet); anything but a whole number from 0 is a 400."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = str(value).strip()
        # ASCII only: str.isdigit() also admits "²", which int() then refuses (a 500).
        if not (text.isascii() and text.isdigit()) or len(text) > 19:
            raise InvalidRequest(f"after: expected an event id (0 or more), got {text[:64]!r}")
        number = int(text)
    if number < 0 or number > 2**63 - 1:
        raise InvalidRequest(f"after: expected an event id (0 or more), got {number}")
    return number


def parse_wait(value: str | float | None) -> float:
    """Seconds a long-poll may wait: 0 to :data:`MAX_WAIT` (more is cut to it); else a 400."""
    if value is None or value == "":
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        raise InvalidRequest(f"wait: expected seconds, got {str(value)[:64]!r}") from None
    if not seconds >= 0:  # NaN too
        raise InvalidRequest(f"wait: expected seconds from 0 to {MAX_WAIT:g}, got {value!r}")
    return min(seconds, MAX_WAIT)


def limit_row(
    user: str, currency: str, kind: str, period: str, amount: int | None, effective: str | None
) -> EventRow:
    """The ``limit.changed`` row of a limit asked (``amount`` ``None``: removed; ``effective``
    the ISO instant a change waiting for its cooling-off takes effect)."""
    reference = f"{kind}/{period}" if effective is None else f"{kind}/{period}@{effective}"
    return EventRow(
        LIMIT_CHANGED, user, None, None, currency, amount or 0, None, None, None, reference, None
    )


def exclusion_ended_row(user: str, reason: str) -> EventRow:
    """The ``user.exclusion_ended`` row of exclusions lifted early (``reason`` why)."""
    return EventRow(EXCLUSION_ENDED, user, None, None, "", 0, None, None, None, reason, None)


def excluded_row(user: str, until: str | None) -> EventRow:
    """The ``user.excluded`` row of an exclusion (``until`` ISO, ``None``: indefinite)."""
    return EventRow(
        USER_EXCLUDED, user, None, None, "", 0, None, None, None, until or "indefinite", None
    )


# The longest signed note an event carries (its reference column).
NOTE_ROOM = 300


def checkpoint_row(note: str) -> EventRow:
    """The ``journal.checkpoint`` row of a signed checkpoint: ``note`` in full (its second
    line is the tree's size), no user, no money."""
    if len(note) > NOTE_ROOM:
        raise ValueError(f"a checkpoint's note is {NOTE_ROOM} characters at most")
    return EventRow(CHECKPOINT, "", None, None, "", 0, None, None, None, note, None)
