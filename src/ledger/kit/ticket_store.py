"""The simulated platform's tickets in memory: the ticket administration API's rules (contract
section 4.2), and what the simulator does with a ticket (its JWT, its use by an entry).

Invariant: every refusal is a :class:`TicketProblem` with the contract's ``{message, error}``
body (422 ``tournament_ticket.*`` for a bad ticket, 403 for deleting a used one); ids count up
from 1 and a listing is sorted by id, newest first. Thread-safe: the API's event loop and the
simulator both use it. Proved by ``tests/kit/test_tickets.py``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from .platform import sign_ticket
from .tickets import TICKET_TYPES

__all__ = ["MAX_LIMIT", "StoredTicket", "TicketProblem", "TicketStore"]

DEFAULT_LIMIT: Final = 50
# Not shown by the contract: we cap a page at 1000 tickets and a creation at 1000 uids.
MAX_LIMIT: Final = 1000
MAX_UIDS: Final = 1000


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class StoredTicket:
    id: int
    type: str
    currency: str
    buy_in: Decimal
    due_at: datetime
    created_at: datetime
    updated_at: datetime
    user_uid: str
    user_id: int
    user_name: str
    ref: str
    affiliate_id: int
    tournament_id: int | None = None
    season_id: int | None = None
    comment: str | None = None
    fantasy_team_id: int | None = None

    @property
    def kind(self) -> str:
        """The derived scope (contract 2.6): a tournament beats a season; neither is open."""
        if self.tournament_id is not None:
            return "tournament"
        if self.season_id is not None:
            return "season"
        return "open"

    def listed(self) -> dict[str, Any]:
        """The ticket as a listing shows it, null fields omitted."""
        return _without_nulls(
            {
                "id": self.id,
                "type": self.type,
                "kind": self.kind,
                "tournamentId": self.tournament_id,
                "seasonId": self.season_id,
                "currency": self.currency,
                "buyIn": str(self.buy_in),
                "cost": {"amount": str(self.buy_in), "currency": self.currency},
                "dueAt": _stamp(self.due_at),
                "createdAt": _stamp(self.created_at),
                "updatedAt": _stamp(self.updated_at),
                "fantasyTeamId": self.fantasy_team_id,
                "comment": self.comment,
                "user": {"id": self.user_id, "uid": self.user_uid, "name": self.user_name},
            }
        )

    def deleted(self) -> dict[str, Any]:
        """The ticket as a deletion returns it (contract 4.2), null fields omitted."""
        return _without_nulls(
            {
                "id": self.id,
                "type": self.type,
                "currency": self.currency,
                "tournamentId": self.tournament_id,
                "seasonId": self.season_id,
                "affiliateId": self.affiliate_id,
                "buyIn": str(self.buy_in),
                "dueAt": _stamp(self.due_at),
                "comment": self.comment,
                "createdAt": _stamp(self.created_at),
                "updatedAt": _stamp(self.updated_at),
            }
        )


def _without_nulls(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


class TicketProblem(Exception):
    """A refusal with the contract's ``{message, error}`` body."""

    def __init__(self, status: int, message: str, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.message = message
        self.error = error


def _reject(message: str, error: str) -> TicketProblem:
    return TicketProblem(422, f"tournament_ticket.{message}", error)


def _optional_id(data: dict[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _reject(f"invalid_{name.lower()}", f"{name} must be a positive integer")
    return value


class TicketStore:
    """Tickets in memory, thread-safe: the API's event loop and the simulator both use it."""

    def __init__(
        self,
        *,
        secret: str,
        affiliate_id: int = 1,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.secret = secret
        self.affiliate_id = affiliate_id
        self.clock = clock
        self._lock = threading.Lock()
        self._tickets: dict[int, StoredTicket] = {}
        self._next_id = 1
        self._users: dict[str, tuple[int, str]] = {}

    def clear(self) -> None:
        """Forget every ticket and user (tests share one server between cases)."""
        with self._lock:
            self._tickets.clear()
            self._users.clear()
            self._next_id = 1

    def register_user(self, uid: str, name: str) -> None:
        """Give a user a display name (listings show ``user: {id, uid, name}``)."""
        with self._lock:
            self._user(uid, name)

    def _user(self, uid: str, name: str | None = None) -> tuple[int, str]:
        known = self._users.get(uid)
        if known is None or name is not None:
            internal = known[0] if known else len(self._users) + 1
            known = (internal, name or (known[1] if known else uid))
            self._users[uid] = known
        return known

    # --- the three operations -------------------------------------------------------------------

    def create(self, body: Any) -> dict[str, Any]:
        """Validate a ``{tournamentTicket: {...}}`` body and create one ticket per uid."""
        if not isinstance(body, dict) or not isinstance(body.get("tournamentTicket"), dict):
            raise _reject("invalid", "the body must be {tournamentTicket: {...}}")
        data: dict[str, Any] = body["tournamentTicket"]
        kind = data.get("type", "marketing")
        if kind not in TICKET_TYPES:
            raise _reject("invalid_type", f"type must be one of {', '.join(TICKET_TYPES)}")
        uids = data.get("uids")
        if not isinstance(uids, list) or not uids:
            raise _reject("uids_required", "uids must be a non-empty array of user ids")
        if len(uids) > MAX_UIDS:
            raise _reject("too_many_uids", f"at most {MAX_UIDS} uids per request")
        if not all(isinstance(uid, str) and uid.strip() for uid in uids):
            raise _reject("invalid_uids", "every uid must be a non-empty string")
        due_at = self._due_at(data.get("dueAt"))
        currency = data.get("currency")
        if not isinstance(currency, str) or not currency.isalnum() or not 1 <= len(currency) <= 16:
            raise _reject("invalid_currency", "currency must be a currency code such as EUR")
        buy_in = self._buy_in(data.get("buyIn"))
        tournament_id = _optional_id(data, "tournamentId")
        season_id = _optional_id(data, "seasonId")
        comment = data.get("comment")
        if comment is not None and not isinstance(comment, str):
            raise _reject("invalid_comment", "comment must be a string")
        ref = data.get("ref")
        if ref is None:
            ref = str(uuid.uuid4())  # generated when omitted (contract 4.2)
        else:
            try:
                ref = str(uuid.UUID(str(ref)))
            except ValueError:
                raise _reject("invalid_ref", "ref must be a UUID") from None
        created: list[dict[str, Any]] = []
        with self._lock:
            now = self.clock()
            for uid in uids:
                internal, name = self._user(uid)
                ticket = StoredTicket(
                    id=self._next_id,
                    type=kind,
                    currency=currency.upper(),
                    buy_in=buy_in,
                    due_at=due_at,
                    created_at=now,
                    updated_at=now,
                    user_uid=uid,
                    user_id=internal,
                    user_name=name,
                    ref=ref,
                    affiliate_id=self.affiliate_id,
                    tournament_id=tournament_id,
                    season_id=season_id,
                    comment=comment,
                )
                self._tickets[ticket.id] = ticket
                self._next_id += 1
                created.append({"id": ticket.id, "uid": uid})
        return {
            "total": len(created),
            "ids": [item["id"] for item in created],
            "tickets": created,
        }

    def _due_at(self, value: Any) -> datetime:
        if not isinstance(value, str):
            raise _reject("due_at_required", "dueAt must be an ISO 8601 datetime")
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _reject("invalid_due_at", f"dueAt {value!r} is not ISO 8601") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)  # a datetime without a zone is taken as UTC
        if parsed <= self.clock():
            raise _reject("due_at_in_past", "dueAt must be in the future")
        return parsed

    @staticmethod
    def _buy_in(value: Any) -> Decimal:
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise _reject("invalid_buy_in", "buyIn must be a decimal number or string")
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            raise _reject("invalid_buy_in", f"buyIn {value!r} is not a decimal") from None
        if not amount.is_finite() or amount < 0:
            raise _reject("invalid_buy_in", "buyIn must be a non-negative decimal")
        return amount

    def list(
        self,
        *,
        user_id: str | None = None,
        ids: Iterable[int] | None = None,
        ref: str | None = None,
        limit: int = DEFAULT_LIMIT,
        page: int = 0,
    ) -> dict[str, Any]:
        """Matching tickets sorted by id descending, ``limit`` per 0-based ``page``."""
        wanted = set(ids) if ids is not None else None
        with self._lock:
            matching = [
                ticket
                for ticket in self._tickets.values()
                if (user_id is None or ticket.user_uid == user_id)
                and (wanted is None or ticket.id in wanted)
                and (ref is None or ticket.ref == ref)
            ]
        matching.sort(key=lambda ticket: ticket.id, reverse=True)
        chunk = matching[page * limit : (page + 1) * limit]
        return {"total": len(matching), "tournamentTickets": [t.listed() for t in chunk]}

    def delete(self, ticket_id: int) -> dict[str, Any]:
        """Delete an unused ticket; 403 for a used or unknown one (contract 4.2 and 7.3)."""
        with self._lock:
            ticket = self._tickets.get(ticket_id)
            if ticket is None:
                # "not available for deletion" covers a ticket that does not exist (any more).
                raise TicketProblem(
                    403, "tournament_ticket.not_available", f"ticket {ticket_id} is not available"
                )
            if ticket.fantasy_team_id is not None:
                raise TicketProblem(
                    403,
                    "tournament_ticket.already_used",
                    f"ticket {ticket_id} was used by fantasy team {ticket.fantasy_team_id}",
                )
            del self._tickets[ticket_id]
        return {"ticket": ticket.deleted()}

    # --- the simulator's side --------------------------------------------------------------------

    def get(self, ticket_id: int) -> StoredTicket | None:
        with self._lock:
            return self._tickets.get(ticket_id)

    def token(self, ticket_id: int) -> str:
        """The JWT a Place Bet carries in ``bet.ticket`` for this ticket."""
        ticket = self.get(ticket_id)
        if ticket is None:
            raise KeyError(ticket_id)
        ttl = max(60.0, (ticket.due_at - self.clock()).total_seconds())
        return sign_ticket(
            self.secret,
            ticket_id=ticket.id,
            user=ticket.user_uid,
            currency=ticket.currency,
            buy_in=ticket.buy_in,
            tournament_id=ticket.tournament_id,
            season_id=ticket.season_id,
            ttl=ttl,
        )

    def use(self, ticket_id: int, fantasy_team_id: int) -> None:
        """Mark a ticket used by the entry it paid for; a used ticket carries ``fantasyTeamId``."""
        with self._lock:
            ticket = self._tickets[ticket_id]
            if ticket.fantasy_team_id not in (None, fantasy_team_id):
                raise ValueError(f"ticket {ticket_id} is already used")
            self._tickets[ticket_id] = replace(
                ticket, fantasy_team_id=fantasy_team_id, updated_at=self.clock()
            )
