"""The writes: money in and out, and the platform's callbacks, each built into a command
(:mod:`ledger.commands`) and applied by the writer. Every request is all-or-nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from decimal import Decimal
from typing import Any

from .. import directory, domain
from .._process import new_reference
from ..commands import (
    Move,
    PlaceBets,
    RefundBets,
    SettleBets,
)
from ..contract import (
    PlaceBetsRequest,
    Pool,
    RefundRequest,
    SettleRequest,
    User,
    check_currency,
    check_text,
    check_user,
    validate,
)
from ..deliveries import Delivery
from ..directory import Seen, TournamentSeen
from ..domain import ClosedBets, Entry, PlacedBets, PlaceRequest
from ..money import parse_decimal
from ..views import (
    Movement,
)
from .core import LedgerCore
from .payloads import run_paused

__all__ = ["Payload", "Writes"]

# What the callbacks accept: a parsed body, or its raw JSON.
Payload = Mapping[str, Any] | bytes | bytearray | str


class Writes(LedgerCore):
    """Deposits, withdrawals, Place Bet, Refund and Settle."""

    def deposit(
        self,
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None = None,
        *,
        request_id: str | None = None,
    ) -> Movement:
        """Credit ``user`` from outside; idempotent by ``reference`` (a fresh one if omitted).
        ``request_id`` (an ``X-Request-Id``) is carried by its event."""
        return self._move(domain.deposit, user, currency, amount, reference, request_id)

    def withdraw(
        self,
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None = None,
        *,
        request_id: str | None = None,
    ) -> Movement:
        """Pay ``user`` out; refused with ``user.insufficient_funds`` when available is short."""
        return self._move(domain.withdrawal, user, currency, amount, reference, request_id)

    def _move(
        self,
        decide: Callable[[str, str, int, str], domain.Transaction],
        user: str,
        currency: str,
        amount: Decimal | int | str,
        reference: str | None,
        request_id: str | None = None,
    ) -> Movement:
        user, currency = check_user(user), check_currency(currency)
        reference = check_text(reference, "reference") if reference is not None else new_reference()
        minor = self._minor(parse_decimal(amount), currency, "amount")
        # Bounded like a delivery's: a hostile header must not become a huge row.
        request_id = None if request_id is None else request_id[:255]
        applied = self.writer.run(
            Move(decide(user, currency, minor, reference), request_id=request_id)
        )
        return Movement(reference, user, currency, self._decimal(minor, currency), applied)

    def place_bets(self, payload: PlaceBetsRequest | Payload) -> PlacedBets:
        """Place Bet: hold ``amount + rake`` for every new entry, all or none.

        Re-sent entries are answered without a second debit; the user's shortfall on any entry
        fails the whole request with ``user.insufficient_funds``.
        """
        return run_paused(self.writer, payload, self._place_command)

    def submit_place_bets(
        self, payload: PlaceBetsRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[PlacedBets]:
        """Place Bet without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._place_command(body, delivery))

    def _place_command(
        self, payload: PlaceBetsRequest | Payload, delivery: Delivery | None = None
    ) -> PlaceBets:
        request = validate(PlaceBetsRequest, payload)
        entries = []
        for item in request.bets:
            currency = item.bet.currency.upper()
            entries.append(
                Entry(
                    bet_uid=item.bet.uid,
                    user=item.user.uid,
                    pool_uid=item.pool.uid,
                    currency=currency,
                    amount=self._minor(item.bet.amount, currency, "bet.amount"),
                    rake=self._minor(item.bet.rake, currency, "bet.rake"),
                    ticket=item.bet.ticket or None,
                    request_uuid=item.bet.uuid,
                )
            )
        seen = _seen([item.pool for item in request.bets], [item.user for item in request.bets])
        return PlaceBets(PlaceRequest(entries, new_reference()), delivery, seen)

    def refund(self, payload: RefundRequest | Payload) -> ClosedBets:
        """Refund Bet and Refund Tournament: reverse each named bet's hold exactly once."""
        return run_paused(self.writer, payload, self._refund_command)

    def submit_refund(
        self, payload: RefundRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[ClosedBets]:
        """Refund without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._refund_command(body, delivery))

    def _refund_command(
        self, payload: RefundRequest | Payload, delivery: Delivery | None = None
    ) -> RefundBets:
        request = validate(RefundRequest, payload)
        return RefundBets(request, *self._close_terms(request, delivery))

    def settle(self, payload: SettleRequest | Payload) -> ClosedBets:
        """Settle Bet: capture each hold and credit positive payouts, each bet exactly once."""
        return run_paused(self.writer, payload, self._settle_command)

    def submit_settle(
        self, payload: SettleRequest | Payload, *, delivery: Delivery | None = None
    ) -> Future[ClosedBets]:
        """Settle without waiting: a future of the result, resolved once it is durable."""
        return self._submit(payload, lambda body: self._settle_command(body, delivery))

    def _settle_command(
        self, payload: SettleRequest | Payload, delivery: Delivery | None = None
    ) -> SettleBets:
        request = validate(SettleRequest, payload)
        return SettleBets(request, *self._close_terms(request, delivery))

    def _close_terms(
        self, request: RefundRequest | SettleRequest, delivery: Delivery | None
    ) -> tuple[str, Callable[[str], int], Delivery | None, Seen]:
        """What a refund or settle command carries besides its request."""
        return new_reference(), self.currencies.scale, delivery, _pools_seen(request)


def _seen(pools: Iterable[Pool], users: Iterable[User]) -> Seen:
    """What a payload said of its tournaments and users, one record per uid, sorted.

    Within one payload the last description of a uid wins whole (a payload describes a
    tournament the same way in each of its entries); across payloads the writer merges field
    by field (:func:`ledger.directory.merge`). Hot: built for every Place Bet, so no merge here.
    """
    # The last description of each user wins whole (``directory.described``); keeping only it
    # before labelling labels each user once, not once per entry of a 1,000-entry Place Bet.
    last_users = {user.uid: user for user in users}
    return Seen(
        _tournaments_seen(pools), directory.described(directory.users_seen(last_users.values()))
    )


def _tournaments_seen(pools: Iterable[Pool]) -> tuple[TournamentSeen, ...]:
    """The tournaments a payload described, one record per uid (the last), sorted."""
    label = directory.label
    last_pools = {pool.uid: pool for pool in pools}
    return tuple(
        TournamentSeen(
            uid=pool.uid,
            name=label(pool.name),
            currency=None if (code := label(pool.currency)) is None else code.upper(),
            category=label(pool.category),
            game_type=label(pool.game_type),
            status=label(pool.status),
            estimated_end=(
                None
                if pool.estimated_end_time is None
                else directory.end_time(pool.estimated_end_time)
            ),
        )
        for _, pool in sorted(last_pools.items())
    )


def _pools_seen(request: RefundRequest | SettleRequest) -> Seen:
    """What a refund or settle said of its tournaments. Its users, one per item, the writer
    reads from the request itself (a huge close records them in SQL from its staged items,
    rather than sorting and upserting a million of them from Python: ``ledger.writer``)."""
    return Seen(_tournaments_seen(pool.pool for pool in request.pools))
