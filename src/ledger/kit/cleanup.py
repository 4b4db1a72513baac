"""The kit's clean-up: what ``ledger validate`` and ``ledger simulate`` leave, taken back out.

Everything the kit writes is test data marked by :data:`ledger.testdata.KIT_PREFIX`: its users'
uids and its tournaments' names. That marking is also what finds an interrupted run's leftovers
through the operator API: the users whose uid has the prefix, the open holds of those users and
of the tournaments whose name has it. Open holds are closed with a Refund Bet (which returns
exactly what was held), then each kit user's available balance is withdrawn to zero, so that the
wallet's user balances are as the kit found them.

A user that is not the kit's (``ledger validate --user alice``) is never emptied: a run restores
its balance to what it was when the run started (:meth:`Cleaner.restore`).

Before writing anything the kit asks ``/health`` which environment the server is
(``LEDGER_ENVIRONMENT``) and refuses production unless told otherwise (:func:`refuse_production`).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx

from ..errors import LedgerError
from ..testdata import KIT_PREFIX, is_kit_data
from . import payloads
from .admin_client import Books, Operator
from .payloads import Entry, Player, Tournament
from .platform import CallbackEvent, Platform

__all__ = [
    "CleanUpError",
    "CleanUpSummary",
    "Cleaner",
    "ProductionRefused",
    "refuse_production",
    "server_environment",
]

PRODUCTION = ("production", "prod")


class CleanUpError(LedgerError):
    """The wallet refused to close a kit hold or to pay a kit balance out."""

    key = "kit.clean_up_failed"


class ProductionRefused(LedgerError):
    """The server says it is production, and the kit was not allowed to write there."""

    key = "kit.production_refused"
    status = 400


def server_environment(url: str, *, verify: bool = True, timeout: float = 10.0) -> str | None:
    """``LEDGER_ENVIRONMENT`` as the server's ``/health`` reports it; ``None`` when it says none
    (another wallet, or ours without the setting)."""
    try:
        response = httpx.get(url.rstrip("/") + "/health", verify=verify, timeout=timeout)
        data = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    value = data.get("environment") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def refuse_production(url: str, *, allow: bool, verify: bool = True) -> None:
    """Raise :class:`ProductionRefused` when the server at ``url`` is production, unless allowed."""
    environment = server_environment(url, verify=verify)
    if not allow and environment is not None and environment.lower() in PRODUCTION:
        raise ProductionRefused(
            f"{url} reports LEDGER_ENVIRONMENT={environment}: the kit writes test data (users, "
            "tournaments, deposits, bets); give --allow-production to run it there anyway"
        )


@dataclass(slots=True)
class CleanUpSummary:
    """What a clean-up did."""

    refunded: int = 0
    withdrawn: dict[str, Decimal] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)

    def add(self, other: CleanUpSummary) -> None:
        self.refunded += other.refunded
        for currency, amount in other.withdrawn.items():
            self.withdrawn[currency] = self.withdrawn.get(currency, Decimal(0)) + amount
        self.users |= other.users

    def render(self) -> str:
        money = ", ".join(f"{amount} {cur}" for cur, amount in sorted(self.withdrawn.items()))
        return (
            f"clean-up: {self.refunded} open hold(s) refunded, "
            f"{money or 'nothing'} withdrawn from {len(self.users)} kit user(s)"
        )


class Cleaner:
    """Closes the kit's open holds through the platform's callbacks and pays its users out
    through the operator API."""

    def __init__(self, platform: Platform, operator: Operator) -> None:
        self.platform = platform
        self.operator = operator

    def sweep(self) -> CleanUpSummary:
        """Every kit leftover: holds of kit users and of kit tournaments, then kit balances."""
        users = [uid for uid in self.operator.users(KIT_PREFIX) if is_kit_data(uid)]
        holds: dict[int, dict[str, Any]] = {}
        for uid in users:
            holds.update((int(hold["uid"]), hold) for hold in self.operator.holds(user=uid))
        for tournament in self.operator.tournaments(KIT_PREFIX):
            if is_kit_data(tournament.get("name")):
                pool = int(tournament["uid"])
                holds.update((int(hold["uid"]), hold) for hold in self.operator.holds(pool=pool))
        summary = self.close(holds.values())
        for uid in users:
            summary.add(self.empty(uid))
        return summary

    def close(self, holds: Iterable[Mapping[str, Any]]) -> CleanUpSummary:
        """Refund every hold given (as ``/admin/holds`` lists it), one Refund Bet per tournament."""
        by_pool: dict[int, list[Entry]] = defaultdict(list)
        for hold in holds:
            by_pool[int(hold["pool_uid"])].append(_entry(hold))
        summary = CleanUpSummary()
        for pool, entries in sorted(by_pool.items()):
            tournament = entries[0].tournament
            payload = payloads.refund_bet(
                self.platform.client_name, [(tournament, "cancelled", entries)]
            )
            self._deliver(payload, f"Refund Bet of tournament {pool}")
            summary.refunded += len(entries)
        return summary

    def empty(self, user: str) -> CleanUpSummary:
        """Withdraw all that a kit user has available, in every currency."""
        if not is_kit_data(user):
            raise CleanUpError(f"{user} is not the kit's: its balance is not the kit's to take")
        return self._withdraw(user, {cur: books.available for cur, books in self._books(user)})

    def restore(self, user: str, start: Mapping[str, Books]) -> CleanUpSummary:
        """Withdraw what ``user`` has available above ``start`` (its balances before the run)."""
        excess = {
            currency: books.available - start.get(currency, Books(Decimal(0), Decimal(0))).available
            for currency, books in self._books(user)
        }
        return self._withdraw(user, excess)

    def _books(self, user: str) -> list[tuple[str, Books]]:
        return sorted(self.operator.balances(user).items())

    def _withdraw(self, user: str, amounts: Mapping[str, Decimal]) -> CleanUpSummary:
        summary = CleanUpSummary(users={user} if is_kit_data(user) else set())
        for currency, amount in amounts.items():
            if amount <= 0:
                continue
            # A fresh reference: the same user may be emptied again after a later run.
            reference = f"{KIT_PREFIX}clean-up-{uuid.uuid4().hex}"
            self.operator.withdraw(user, currency, amount, reference)
            summary.withdrawn[currency] = summary.withdrawn.get(currency, Decimal(0)) + amount
        return summary

    def _deliver(self, payload: Any, what: str, attempts: int = 4) -> None:
        # A 5xx or a lost answer may be re-sent: a refund is idempotent by bet uid.
        delivery = self.platform.deliver(CallbackEvent.REFUND_BET, payload)
        for _ in range(attempts - 1):
            if delivery.passed or (delivery.status is not None and delivery.status < 500):
                break
            delivery = self.platform.deliver(CallbackEvent.REFUND_BET, payload)
        if not delivery.passed:
            raise CleanUpError(f"{what}: {delivery.describe(200)}")


def _entry(hold: Mapping[str, Any]) -> Entry:
    # Refund Bet needs the bet's user and tournament; the wallet refunds what it recorded as held
    # and only notes anything else the payload says.
    currency = str(hold["currency"])
    amount, rake = Decimal(str(hold["amount"])), Decimal(str(hold["rake"]))
    pool = int(hold["pool_uid"])
    user = str(hold["user"])
    return Entry(
        bet_uid=int(hold["uid"]),
        player=Player(user, user, currency),
        tournament=Tournament(pool, f"{KIT_PREFIX}clean-up {pool}", currency, amount, rake),
        amount=amount,
        rake=rake,
        base_amount=amount,
        base_rake=rake,
        uuid=f"{pool}|{uuid.uuid4()}",
    )
