"""Builders of the platform's callback bodies (contract section 4.1), as parsed JSON dicts.

Amounts are passed as the platform sends them: JSON numbers for ``amount`` and ``rake`` (here
``Decimal`` or ``int``, never ``float``) and decimal strings for ``payout``.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

Number = Decimal | int | str


def entry(
    bet: int,
    user: str = "u1",
    pool: int = 7,
    amount: Number = Decimal("10.00"),
    rake: Number = Decimal("1.00"),
    currency: str = "EUR",
    ticket: str | None = None,
) -> dict[str, Any]:
    """One ``{user, pool, bet}`` entry of a Place Bet request, with a few fields we ignore."""
    body: dict[str, Any] = {
        "uid": bet,
        "uuid": f"{pool}|req-{bet}",
        "base_amount": amount,
        "amount": amount,
        "rake": rake,
        "currency": currency,
    }
    if ticket is not None:
        body["ticket"] = ticket
    return {
        "user": {"client": "acme", "uid": user, "name": f"name-{user}", "ip": "10.0.0.1"},
        "pool": {
            "client": "acme",
            "game": "fantasy",
            "uid": pool,
            "name": f"Tournament {pool}",
            "currency": currency,
            "overdraw": "0.00",
            "category": "admin_created",
            "amount": amount,
        },
        "bet": body,
    }


def place(*entries: dict[str, Any]) -> dict[str, Any]:
    """A Place Bet body: ``{bets: [...]}``."""
    return {"bets": list(entries)}


def participant(bet: int, user: str = "u1", currency: str = "EUR", **fields: Any) -> dict[str, Any]:
    """One ``{user, bet}`` of a Refund or Settle request."""
    body: dict[str, Any] = {"uid": bet, "uuid": f"req-{bet}", "currency": currency, "secrets": {}}
    body.update(fields)
    return {"user": {"client": "acme", "uid": user, "name": f"name-{user}"}, "bet": body}


def pool_of(pool: int, participants: Iterable[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """One ``{pool, bets}`` of a Refund or Settle request."""
    header: dict[str, Any] = {
        "client": "acme",
        "game": "fantasy",
        "gameType": "football",
        "uid": pool,
        "currency": "EUR",
        "overdraw": "0.00",
        "category": "admin_created",
    }
    header.update(fields)
    return {"pool": header, "bets": list(participants)}


def refund(pool: int, *bets: tuple[int, str] | int, currency: str = "EUR") -> dict[str, Any]:
    """A Refund Bet body for one pool; each bet is ``uid`` (user ``u1``) or ``(uid, user)``."""
    parts = [participant(*_pair(bet), currency=currency) for bet in bets]
    return {"pools": [pool_of(pool, parts, status="cancelled")]}


def settle(
    pool: int, *bets: tuple[int, str, str] | tuple[int, str], currency: str = "EUR"
) -> dict[str, Any]:
    """A Settle body for one pool; each bet is ``(uid, payout)`` or ``(uid, payout, user)``."""
    parts = []
    for item in bets:
        uid, payout = item[0], item[1]
        user = item[2] if len(item) == 3 else "u1"
        parts.append(participant(uid, user, currency, payout=payout, base_payout=payout, rank=1))
    return {"pools": [pool_of(pool, parts, status="closed")]}


def pools(*parts: dict[str, Any]) -> dict[str, Any]:
    """A Refund or Settle body of several pools built with :func:`pool_of`."""
    return {"pools": list(parts)}


def _pair(bet: tuple[int, str] | int) -> tuple[int, str]:
    return (bet, "u1") if isinstance(bet, int) else bet
