"""Full callback payloads, every field of the contract's section 2 tables for each callback.

The builders take plain values and return JSON-ready dicts (``Decimal`` for decimal numbers,
``str`` for decimal strings) to be sent with :func:`ledger.kit.platform.dumps`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

__all__ = [
    "Entry",
    "Player",
    "Result",
    "Tournament",
    "place_bet",
    "refund_bet",
    "refund_tournament",
    "settle_bet",
]

ZERO = Decimal("0.00")


@dataclass(frozen=True, slots=True)
class Player:
    """A platform user; ``currency`` is the user's wallet currency (the bet currency)."""

    uid: str
    name: str
    currency: str
    ip: str = "203.0.113.7"


@dataclass(frozen=True, slots=True)
class Tournament:
    """A fantasy tournament (``pool``); ``buy_in`` and ``rake`` are in its base ``currency``."""

    uid: int
    name: str
    currency: str
    buy_in: Decimal
    rake: Decimal
    game_type: str = "football"
    category: str = "admin_created"
    distribution: str = "normal"
    guaranteed: bool = False
    overdraw: Decimal = ZERO
    end_time: datetime = field(default_factory=lambda: datetime.now(UTC) + timedelta(hours=3))

    @property
    def cost(self) -> Decimal:
        """Entry cost per entry: buy-in plus rake (contract 2.5, item 1)."""
        return self.buy_in + self.rake

    @property
    def free(self) -> bool:
        return self.buy_in == 0 and self.rake == 0


@dataclass(frozen=True, slots=True)
class Entry:
    """One fantasy team: amounts in the bet currency (the user's) and the tournament's."""

    bet_uid: int
    player: Player
    tournament: Tournament
    amount: Decimal
    rake: Decimal
    base_amount: Decimal
    base_rake: Decimal
    uuid: str
    ticket: str | None = None

    @property
    def currency(self) -> str:
        return self.player.currency

    @property
    def total(self) -> Decimal:
        """What the wallet debits: the rake is charged on top of the buy-in (contract 2.5)."""
        return self.amount + self.rake


@dataclass(frozen=True, slots=True)
class Result:
    """A settle line: the entry's payout (user currency) and its base-currency payout."""

    entry: Entry
    payout: Decimal
    base_payout: Decimal
    rank: int
    score: Decimal
    odds: Decimal = Decimal("1.0")
    payout_text: str | None = None
    qualifier_ticket: Mapping[str, Any] | None = None


def _user(client: str, player: Player, *, ip: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"client": client, "uid": player.uid, "name": player.name}
    if ip:  # the IP travels in Place Bet and Settle only (contract 2.2)
        data["ip"] = player.ip
    return data


def _pool_base(client: str, tournament: Tournament) -> dict[str, Any]:
    return {
        "client": client,
        "game": "fantasy",
        "uid": tournament.uid,
        "currency": tournament.currency,
        "overdraw": str(tournament.overdraw),
        "category": tournament.category,
    }


def place_bet(client: str, entries: Sequence[Entry]) -> dict[str, Any]:
    """Place Bet: ``{bets: [{user, pool, bet}]}`` with the Place Bet columns of section 2."""
    bets = []
    for entry in entries:
        pool = _pool_base(client, entry.tournament)
        pool["name"] = entry.tournament.name
        pool["amount"] = entry.tournament.buy_in
        bets.append(
            {"user": _user(client, entry.player, ip=True), "pool": pool, "bet": _bet(entry)}
        )
    return {"bets": bets}


def _bet(entry: Entry) -> dict[str, Any]:
    """The bet columns Place Bet and Refund Bet share (contract section 2)."""
    bet: dict[str, Any] = {
        "uid": entry.bet_uid,
        "uuid": entry.uuid,
        "base_amount": entry.base_amount,
        "amount": entry.amount,
        "rake": entry.rake,
        "currency": entry.currency,
    }
    if entry.ticket is not None:
        bet["ticket"] = entry.ticket
    return bet


def _refund_bet(entry: Entry, secrets: Mapping[str, Any]) -> dict[str, Any]:
    return {**_bet(entry), "base_rake": entry.base_rake, "secrets": dict(secrets)}


def refund_bet(
    client: str,
    groups: Iterable[tuple[Tournament, str, Sequence[Entry]]],
    secrets: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Refund Bet: ``{pools: [{pool, bets: [{user, bet}]}]}``, groups of (pool, status, bets)."""
    secrets = secrets or {}
    pools = []
    for tournament, status, entries in groups:
        pool = _pool_base(client, tournament)
        pool["status"] = status
        pools.append(
            {
                "pool": pool,
                "bets": [
                    {
                        "user": _user(client, entry.player, ip=False),
                        "bet": _refund_bet(entry, secrets.get(entry.bet_uid, {})),
                    }
                    for entry in entries
                ],
            }
        )
    return {"pools": pools}


def refund_tournament(
    client: str,
    tournament: Tournament,
    entries: Sequence[Entry],
    secrets: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Refund Tournament: the Refund Bet wrapper with the richer cancelled-pool fields."""
    payload = refund_bet(client, [(tournament, "cancelled", entries)], secrets)
    pool = payload["pools"][0]["pool"]
    pool["gameType"] = tournament.game_type
    pool["cost"] = tournament.cost
    return payload


def settle_bet(
    client: str,
    tournament: Tournament,
    results: Sequence[Result],
    secrets: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Settle Bet: every participant, winners or not, with the Settle columns of section 2."""
    secrets = secrets or {}
    collected = sum((r.entry.base_amount for r in results), ZERO)
    paid = sum((r.base_payout for r in results), ZERO)
    pool = _pool_base(client, tournament)
    pool.update(
        {
            "gameType": tournament.game_type,
            "name": tournament.name,
            "overdraw": str(paid),  # in Settle, the total prize pool payout
            "amount": tournament.buy_in,
            "status": "closed",
            "cost": tournament.cost,
            "overlay": tournament.guaranteed and tournament.overdraw > collected,
            "guaranteed": tournament.guaranteed,
            "distribution": tournament.distribution,
            "estimatedEndTime": tournament.end_time.isoformat(timespec="seconds"),
            "tags": [],
            "competitions": [
                {"sport": tournament.game_type, "name": "Matchday", "period": 1, "uid": "c-1"}
            ],
        }
    )
    bets = []
    for result in results:
        entry = result.entry
        bet: dict[str, Any] = {
            "uid": entry.bet_uid,
            "uuid": entry.uuid,
            "amount": entry.amount,
            "rake": entry.rake,
            "currency": entry.currency,
            "secrets": dict(secrets.get(entry.bet_uid, {})),
            "odds": result.odds,
            "payout": str(result.payout),
            "base_payout": str(result.base_payout),
            "rank": result.rank,
            "score": result.score,
        }
        if tournament.distribution == "mixed":
            # The contract shows neither type; ours: a display string and a ticket description.
            bet["payout_text"] = result.payout_text or ""
            bet["qualifier_ticket"] = (
                dict(result.qualifier_ticket) if result.qualifier_ticket else None
            )
        bets.append({"user": _user(client, entry.player, ip=True), "bet": bet})
    return {"pools": [{"pool": pool, "bets": bets}]}
