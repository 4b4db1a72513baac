"""The fantasy platform's side of the wire: signed callback deliveries and ticket JWTs.

Everything the conformance kit sends goes through :class:`Platform`, so that every delivery
carries exactly the headers of contract section 5 (``Authorization: Bearer <client> <JWT>``,
``X-Request-Id``, ``X-Callback-Event`` per section 6) and is judged by the pass and fail rules of
section 7.1.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any, Final

import httpx

from .. import contract
from ..tokens import sign_token

__all__ = [
    "DEFAULT_PATHS",
    "CallbackEvent",
    "Delivery",
    "Paths",
    "Platform",
    "dumps",
    "loads",
    "sign_ticket",
]


class CallbackEvent(StrEnum):
    """The four callbacks, named by the ``X-Callback-Event`` value they carry (contract 6)."""

    PLACE_BET = contract.PLACE_BET
    REFUND_BET = contract.REFUND_BET
    REFUND_TOURNAMENT = contract.REFUND_TOURNAMENT
    SETTLE_BET = contract.SETTLE_BET


@dataclass(frozen=True, slots=True)
class Paths:
    """Where each callback is delivered, relative to the wallet's base URL (contract 4.1)."""

    place_bet: str = "/bets"
    refund_bet: str = "/bets/cancel"
    # Refund Tournament goes to the Refund Bet endpoint unless the client registered another.
    refund_tournament: str = "/bets/cancel"
    settle_bet: str = "/winners"

    def of(self, event: CallbackEvent) -> str:
        return {
            CallbackEvent.PLACE_BET: self.place_bet,
            CallbackEvent.REFUND_BET: self.refund_bet,
            CallbackEvent.REFUND_TOURNAMENT: self.refund_tournament,
            CallbackEvent.SETTLE_BET: self.settle_bet,
        }[event]


DEFAULT_PATHS: Final = Paths()


def sign_ticket(
    secret: str,
    *,
    ticket_id: int,
    user: str,
    currency: str,
    buy_in: Decimal,
    tournament_id: int | None = None,
    season_id: int | None = None,
    ttl: float = 86_400.0,
    now: float | None = None,
) -> str:
    """The JWT a Place Bet carries in ``bet.ticket`` for a free entry.

    The contract does not show its claims; ours names the ticket, its owner and scope, and is
    signed with the shared secret so that a wallet that wants to can verify where it came from.
    """
    claims: dict[str, Any] = {
        "typ": "tournament_ticket",
        "ticket_id": ticket_id,
        "uid": user,
        "currency": currency,
        "buyIn": str(buy_in),
    }
    if tournament_id is not None:
        claims["tournamentId"] = tournament_id
    if season_id is not None:
        claims["seasonId"] = season_id
    return sign_token(secret, role="ticket", subject=user, ttl=ttl, claims=claims, now=now)


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        out.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                out.append(",")
            out.append(json.dumps(str(key)))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out)
        out.append("]")
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        # Fixed-point digits exactly as held: "10.00", never "1E+1" nor a float's approximation.
        out.append(format(value, "f"))
    elif isinstance(value, float):
        raise TypeError("floats are not allowed on the money path: use Decimal")
    else:
        out.append(json.dumps(value))


def dumps(payload: Any) -> str:
    """JSON text with ``Decimal`` values written as exact JSON numbers (contract 2.1).

    The standard encoder cannot write a ``Decimal`` as a number without going through ``float``;
    decimal strings (``payout``, ``overdraw``) are simply ``str`` values in the payload.
    """
    out: list[str] = []
    _encode(payload, out)
    return "".join(out)


def loads(text: str) -> Any:
    """An answer's JSON with exact ``Decimal`` numbers; ``None`` for an empty or non-JSON body."""
    try:
        return json.loads(text, parse_float=Decimal) if text.strip() else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One callback delivery and what came back, judged by contract section 7.1."""

    event: CallbackEvent
    request_id: str
    status: int | None
    body: str
    elapsed: float
    error: str | None = None
    data: Any = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        """2xx with an empty body, a non-JSON body, or a JSON object without ``error``."""
        if self.status is None or not 200 <= self.status < 300:
            return False
        return not (isinstance(self.data, dict) and "error" in self.data)

    @property
    def outcome_unknown(self) -> bool:
        """5xx, timeout or no connection: the platform cannot know what the wallet did."""
        return self.status is None or self.status >= 500

    @property
    def error_key(self) -> str | None:
        value = self.data.get("error") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else None

    def describe(self, limit: int = 300) -> str:
        """The endpoint's actual answer, as the hosted validator shows it."""
        if self.status is None:
            return f"no response ({self.error})"
        body = self.body if len(self.body) <= limit else self.body[:limit] + "..."
        return f"{self.status} {body}".rstrip()


_USE_SIGNED: Final = object()


class Platform:
    """Delivers callbacks to one wallet as the platform does (contract sections 4.1, 5, 6).

    Thread-safe: the underlying ``httpx.Client`` may be shared by the threads that send
    concurrent duplicates.
    """

    def __init__(
        self,
        base_url: str,
        *,
        client_name: str,
        secret: str,
        paths: Paths = DEFAULT_PATHS,
        timeouts: Mapping[str, float] | None = None,
        transport: httpx.BaseTransport | None = None,
        verify: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.client_name = client_name
        self.secret = secret
        self.paths = paths
        # By default the platform's own (contract section 8): it gives up after these.
        self.timeouts = dict(contract.PLATFORM_TIMEOUTS if timeouts is None else timeouts)
        self._http = httpx.Client(
            transport=transport,
            verify=verify,
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Platform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorization(self, event: CallbackEvent, *, role: str | None = None) -> str:
        """``Bearer <client_name> <JWT>``; Place Bet uses a user token, the others admin."""
        if role is None:
            role = "user" if event is CallbackEvent.PLACE_BET else "admin"
        return f"Bearer {self.client_name} {sign_token(self.secret, role=role)}"

    def deliver(
        self,
        event: CallbackEvent,
        payload: Any,
        *,
        authorization: str | object | None = _USE_SIGNED,
        role: str | None = None,
        timeout: float | None = None,
        path: str | None = None,
        request_id: str | None = None,
    ) -> Delivery:
        """POST ``payload`` for ``event`` and return the answer; never raises for transport errors.

        ``authorization=None`` sends no Authorization header at all; a string sends that header
        verbatim (the token checks use both).
        """
        request_id = request_id or str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Request-Id": request_id,
            "X-Callback-Event": event.value,
        }
        if authorization is _USE_SIGNED:
            headers["Authorization"] = self.authorization(event, role=role)
        elif isinstance(authorization, str):
            headers["Authorization"] = authorization
        body = payload if isinstance(payload, str | bytes) else dumps(payload)
        url = self.base_url + (path if path is not None else self.paths.of(event))
        started = time.monotonic()
        try:
            response = self._http.post(
                url,
                content=body,
                headers=headers,
                timeout=timeout if timeout is not None else self.timeouts[event],
            )
        except httpx.TimeoutException as exc:
            return Delivery(
                event, request_id, None, "", time.monotonic() - started, f"timeout: {exc}"
            )
        except httpx.TransportError as exc:
            return Delivery(event, request_id, None, "", time.monotonic() - started, repr(exc))
        text = response.text
        data = loads(text)  # a non-JSON body is ignored (contract 7.1)
        return Delivery(
            event, request_id, response.status_code, text, time.monotonic() - started, None, data
        )
