"""A typed client for the platform's tournament ticket administration (contract section 4.2).

Three operations: :meth:`TicketClient.create`, :meth:`TicketClient.list` and
:meth:`TicketClient.delete`. Every request carries ``authorization: Bearer <client_name>
<admin_jwt>`` (contract 5.3). Failures are raised as :class:`TicketError` subclasses carrying the
platform's ``message`` (a translation key), its descriptive ``error`` and the HTTP status.

The contract does not show the paths; the defaults are ``POST``/``GET
{base_url}/tournament_tickets`` and ``DELETE {base_url}/tournament_tickets/{id}``, overridable with
:class:`TicketPaths`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Final, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import LedgerError
from ..tokens import sign_token
from .platform import loads

__all__ = [
    "TICKET_TYPES",
    "CreatedTicket",
    "CreatedTickets",
    "Ticket",
    "TicketClient",
    "TicketCost",
    "TicketError",
    "TicketForbidden",
    "TicketPage",
    "TicketPaths",
    "TicketRejected",
    "TicketUnauthorized",
    "TicketUnavailable",
    "TicketUser",
]

TicketType = Literal["marketing", "godwill", "satellite", "test", "billable"]

# "godwill" is the API's own spelling (contract 2.6); do not correct it.
TICKET_TYPES: Final[tuple[str, ...]] = ("marketing", "godwill", "satellite", "test", "billable")

DEFAULT_LIMIT: Final = 50


class TicketError(LedgerError):
    """The ticket API refused a request.

    ``message`` is the platform's translation key, ``error`` its descriptive text and ``status``
    the HTTP status it answered.
    """

    key = "tournament_ticket.error"
    status = 500

    def __init__(self, message: str, *, error: str, status: int) -> None:
        super().__init__(message, key=message)
        self.error = error
        self.status = status

    def __str__(self) -> str:
        return f"{self.status} {self.message}: {self.error}"


class TicketRejected(TicketError):
    """422: the creation request was refused (contract 4.2, Create tickets)."""


class TicketForbidden(TicketError):
    """403: a used ticket, one not available for deletion, or a token without the admin role."""


class TicketUnauthorized(TicketError):
    """401: the admin token is missing, malformed, expired or signed with another secret."""


class TicketUnavailable(TicketError):
    """No usable answer: the API could not be reached, timed out, or answered 5xx."""

    retryable = True


class _Model(BaseModel):
    # Unknown fields are ignored, as everywhere in the contract; frozen values are safe to share.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The object as the API spells it, with null fields omitted (contract 2.6)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class TicketCost(_Model):
    amount: Decimal
    currency: str


class TicketUser(_Model):
    id: int | None = None
    uid: str | None = None
    name: str | None = None


class Ticket(_Model):
    """A tournament ticket (contract 2.6). Fields the API left out are ``None``."""

    id: int
    type: str | None = None
    kind: str | None = None
    tournament_id: int | None = Field(default=None, alias="tournamentId")
    season_id: int | None = Field(default=None, alias="seasonId")
    currency: str | None = None
    buy_in: Decimal | None = Field(default=None, alias="buyIn")
    cost: TicketCost | None = None
    due_at: datetime | None = Field(default=None, alias="dueAt")
    created_at: datetime | None = Field(default=None, alias="createdAt")
    updated_at: datetime | None = Field(default=None, alias="updatedAt")
    fantasy_team_id: int | None = Field(default=None, alias="fantasyTeamId")
    comment: str | None = None
    affiliate_id: int | None = Field(default=None, alias="affiliateId")
    user: TicketUser | None = None

    @property
    def used(self) -> bool:
        """A used ticket carries the fantasy team it paid for (contract section 3)."""
        return self.fantasy_team_id is not None


_M = TypeVar("_M", bound=_Model)


class CreatedTicket(_Model):
    id: int
    uid: str


class CreatedTickets(_Model):
    """The answer to a creation: how many, their ids, and which user each belongs to."""

    total: int
    ids: list[int]
    tickets: list[CreatedTicket]


class TicketPage(_Model):
    """One page of a listing: ``total`` counts every matching ticket, not only this page."""

    total: int
    tickets: list[Ticket] = Field(alias="tournamentTickets")


@dataclass(frozen=True, slots=True)
class TicketPaths:
    """Paths under the base URL; ``delete`` is formatted with the ticket ``id``."""

    create: str = "/tournament_tickets"
    list: str = "/tournament_tickets"
    delete: str = "/tournament_tickets/{id}"


def _iso(value: datetime | str) -> str:
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("dueAt must be timezone-aware")
    return value.isoformat()


def _render(value: Decimal | int | str) -> str:
    # Decimal strings keep the amount exact on the wire; a float never gets near it.
    if isinstance(value, float):
        raise TypeError("buyIn must be a Decimal, int or decimal string, not a float")
    return str(value)


class TicketClient:
    """Create, list and delete tournament tickets at ``base_url``.

    Authenticate with a ready ``token`` (the admin JWT) or a ``secret`` from which a short-lived
    admin JWT is signed for each request.
    """

    def __init__(
        self,
        base_url: str,
        *,
        client_name: str,
        token: str | None = None,
        secret: str | None = None,
        sub: str = "ticket-admin",
        paths: TicketPaths | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if (token is None) == (secret is None):
            raise ValueError("give exactly one of token or secret")
        self.base_url = base_url.rstrip("/")
        self.client_name = client_name
        self.paths = paths or TicketPaths()
        self._token: Callable[[], str]
        if token is not None:
            fixed = token
            self._token = lambda: fixed
        else:
            assert secret is not None
            self._token = lambda: sign_token(secret, role="admin", subject=sub, ttl=300)
        self._http = httpx.Client(timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TicketClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the three operations -----------------------------------------------------------------

    def create(
        self,
        *,
        uids: Sequence[str],
        due_at: datetime | str,
        currency: str,
        buy_in: Decimal | int | str,
        type: TicketType | None = None,
        tournament_id: int | None = None,
        season_id: int | None = None,
        comment: str | None = None,
        ref: str | None = None,
    ) -> CreatedTickets:
        """Create one ticket per uid. Raises :class:`TicketRejected` on the API's 422."""
        ticket: dict[str, Any] = {
            "uids": list(uids),
            "dueAt": _iso(due_at),
            "currency": currency,
            "buyIn": _render(buy_in),
        }
        optional = {
            "type": type,
            "tournamentId": tournament_id,
            "seasonId": season_id,
            "comment": comment,
            "ref": ref,
        }
        ticket.update({name: value for name, value in optional.items() if value is not None})
        data = self._send("POST", self.paths.create, json_body={"tournamentTicket": ticket})
        return self._parse(CreatedTickets, data)

    def list(
        self,
        *,
        user_id: str | None = None,
        ids: Sequence[int] | None = None,
        ref: str | None = None,
        limit: int | None = None,
        page: int | None = None,
    ) -> TicketPage:
        """One page of tickets, newest id first; pages are 0-based, the default limit 50."""
        params: list[tuple[str, str]] = []
        if user_id is not None:
            params.append(("user_id", user_id))
        params.extend(("ids", str(ticket_id)) for ticket_id in ids or ())
        if ref is not None:
            params.append(("ref", ref))
        if limit is not None:
            params.append(("limit", str(limit)))
        if page is not None:
            params.append(("page", str(page)))
        data = self._send("GET", self.paths.list, params=params)
        return self._parse(TicketPage, data)

    def iter_all(
        self,
        *,
        user_id: str | None = None,
        ids: Sequence[int] | None = None,
        ref: str | None = None,
        limit: int = DEFAULT_LIMIT,
        max_pages: int = 10_000,
    ) -> Iterator[Ticket]:
        """Every matching ticket, page after page, stopping at an empty page or ``max_pages``."""
        for page in range(max_pages):
            result = self.list(user_id=user_id, ids=ids, ref=ref, limit=limit, page=page)
            yield from result.tickets
            if len(result.tickets) < limit or (page + 1) * limit >= result.total:
                return

    def delete(self, ticket_id: int) -> Ticket:
        """Delete an unused ticket and return it. Raises :class:`TicketForbidden` when used."""
        path = self.paths.delete.format(id=int(ticket_id))
        data = self._send("DELETE", path)
        if not isinstance(data, dict) or not isinstance(data.get("ticket"), dict):
            raise TicketError(
                "tournament_ticket.bad_response", error=f"unexpected answer {data!r}", status=502
            )
        return self._parse(Ticket, data["ticket"])

    # --- plumbing --------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Sequence[tuple[str, str]] | None = None,
    ) -> Any:
        headers = {
            "authorization": f"Bearer {self.client_name} {self._token()}",
            "accept": "application/json",
        }
        try:
            response = self._http.request(
                method,
                self.base_url + path,
                headers=headers,
                json=json_body,
                params=list(params or ()),
            )
        except httpx.TransportError as exc:
            raise TicketUnavailable(
                "tournament_ticket.unavailable", error=repr(exc), status=503
            ) from exc
        # Exact decimals: buyIn and cost.amount must not pass through float.
        data = loads(response.text)
        if response.status_code == 200:
            return data
        message, error = "tournament_ticket.error", response.text[:500]
        if isinstance(data, dict):
            message = str(data.get("message") or message)
            error = str(data.get("error") or error)
        kind: type[TicketError] = {
            401: TicketUnauthorized,
            403: TicketForbidden,
            422: TicketRejected,
        }.get(response.status_code, TicketError)
        if response.status_code >= 500:
            kind = TicketUnavailable
        raise kind(message, error=error, status=response.status_code)

    @staticmethod
    def _parse(model: type[_M], data: Any) -> _M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise TicketError(
                "tournament_ticket.bad_response", error=str(exc), status=502
            ) from None
