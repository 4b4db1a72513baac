"""The delivery journal's values: what a callback delivery was, and how it can be searched.

Every callback delivery that reaches the ledger leaves one row (DESIGN section 8): when it was
received, its ``X-Request-Id``, event, path, the caller (client name, token subject, address),
the status answered, the error key, how many bets it named and the first :data:`NAMED_BETS` of
them, and how long it took. The HTTP layer describes a delivery as it arrives (:class:`Delivery`);
the writer turns it into a :class:`DeliveryRecord` once the outcome is known. A 2xx record is
written by the command itself, in the transaction of its effects, so the journal never claims
what the books do not hold; a refused delivery's record is written after the fact, best effort.

Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from .contract import EVENTS, check_id
from .domain import ClosedBets, PlacedBets
from .errors import InvalidRequest

__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "NAMED_BETS",
    "Delivery",
    "DeliveryFilter",
    "DeliveryRecord",
    "answered_uids",
    "parse_time",
    "retention_cutoff",
]

# A row names at most this many bet uids (a settle may carry a million); findable by each.
NAMED_BETS = 20

# Seamless-wallet providers expect transaction records kept for at least four months.
DEFAULT_RETENTION_DAYS = 120


def answered_uids(result: PlacedBets | ClosedBets) -> list[int]:
    """The bet uids a successful delivery answered for, in the order of its answer."""
    if isinstance(result, PlacedBets):
        return [*result.placed, *result.unchanged]
    return [*result.closed, *result.unchanged]


class DeliveryRecord(NamedTuple):
    """One journal row. ``duration_us`` of a 2xx row runs up to the moment the row is written,
    in the transaction of its effects: the commit that follows is not in it.

    A NamedTuple, not a frozen dataclass: one is made per accepted delivery inside the writer's
    transaction, where a frozen dataclass' field-by-field construction costs several times more.
    """

    received_at: datetime
    request_id: str | None
    event: str
    path: str
    client: str | None
    subject: str | None
    address: str | None
    status: int
    error: str | None
    bet_count: int
    bet_uids: tuple[int, ...]
    duration_us: int
    id: int | None = None  # assigned by the store


@dataclass(frozen=True, slots=True)
class Delivery:
    """A callback delivery as the HTTP layer saw it arrive; the outcome comes later."""

    received_at: datetime
    started: float  # time.perf_counter() on arrival: durations are measured from it
    request_id: str | None
    event: str
    path: str
    client: str | None = None
    subject: str | None = None
    address: str | None = None

    @classmethod
    def arrived(
        cls,
        request_id: str | None,
        event: str,
        path: str,
        address: str | None,
    ) -> Delivery:
        """A delivery arriving now; texts from the request are bounded (a hostile header must
        not become a huge row)."""
        return cls(
            received_at=datetime.now(UTC),
            started=time.perf_counter(),
            request_id=None if request_id is None else request_id[:255],
            event=event[:64],
            path=path[:300],
            address=None if address is None else address[:64],
        )

    def caller(self, client: str, subject: str | None) -> Delivery:
        """This delivery, its token verified: who sent it (bounded like every text)."""
        # Spelled out: dataclasses.replace costs several times more, once per delivery.
        return Delivery(
            self.received_at,
            self.started,
            self.request_id,
            self.event,
            self.path,
            client[:255],
            None if subject is None else subject[:255],
            self.address,
        )

    def record(self, status: int, error: str | None, bet_uids: Sequence[int]) -> DeliveryRecord:
        """The journal row of this delivery, answered ``status``, measured up to now."""
        return DeliveryRecord(
            self.received_at,
            self.request_id,
            self.event,
            self.path,
            self.client,
            self.subject,
            self.address,
            status,
            error,
            len(bet_uids),
            tuple(bet_uids[:NAMED_BETS]),
            max(0, int((time.perf_counter() - self.started) * 1_000_000)),
        )


def parse_time(text: str, name: str) -> datetime:
    """An ISO-8601 moment (UTC when it names no zone), else a 400 naming the parameter."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidRequest(
            f"{name}: expected an ISO-8601 time such as 2026-11-22T09:00:00Z, got {text[:64]!r}"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def retention_cutoff(days: int, now: datetime | None = None) -> datetime:
    """Rows received before this moment are past a retention of ``days`` days."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise InvalidRequest("the retention must be a whole number of days, at least 1")
    return (now or datetime.now(UTC)) - timedelta(days=days)


@dataclass(frozen=True, slots=True)
class DeliveryFilter:
    """Which deliveries to list; every field set narrows the list (all of them: AND)."""

    request_id: str | None = None
    bet: int | None = None
    status: int | None = None
    event: str | None = None
    since: datetime | None = None  # received at or after
    until: datetime | None = None  # received before
    error: str | None = None  # the error key answered
    # The start of the X-Request-Id, any case: what a support agent pastes is often cut short
    # or retyped. Read by scanning the newest rows, not through the request id's index.
    request_prefix: str | None = None

    @classmethod
    def parse(
        cls,
        *,
        request_id: str | None = None,
        bet: str | int | None = None,
        status: str | int | None = None,
        event: str | None = None,
        since: str | None = None,
        until: str | None = None,
        error: str | None = None,
        request_prefix: str | None = None,
    ) -> DeliveryFilter:
        """A filter from query-string or command-line text; a bad value is a 400."""
        return cls(
            error=_bounded(error, "error", 64),
            request_prefix=_bounded(request_prefix, "request id", 255),
            request_id=request_id or None,
            bet=None if bet in (None, "") else check_id(_integer(bet, "bet"), "bet"),
            status=None if status in (None, "") else _status(status),
            event=_event(event) if event else None,
            since=parse_time(since, "since") if since else None,
            until=parse_time(until, "until") if until else None,
        )


def _integer(value: str | int | None, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidRequest(f"{name}: expected an integer, got {str(value)[:64]!r}") from None


def _bounded(value: str | None, name: str, most: int) -> str | None:
    if value is None or not value.strip():
        return None
    if len(value) > most:
        raise InvalidRequest(f"{name}: at most {most} characters")
    return value.strip()


def _status(value: str | int) -> int:
    status = _integer(value, "status")
    if not 100 <= status <= 599:
        raise InvalidRequest(f"status: expected an HTTP status (100 to 599), got {status}")
    return status


def _event(value: str) -> str:
    if value not in EVENTS:
        raise InvalidRequest(f"event: expected one of {', '.join(EVENTS)}, got {value[:64]!r}")
    return value
