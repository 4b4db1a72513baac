"""Refund and Settle: close each named bet exactly once; a re-send is answered as it was."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple, Protocol, TypeVar

from ..errors import (
    BetAlreadyRefunded,
    BetAlreadySettled,
    BetConflict,
    BetNotFound,
    InvalidAmount,
)
from ..money import render, to_minor
from .accounts import (
    HOUSE_ENTRIES,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
    held_account,
    user_account,
)
from .bets import Bet, BetState, Funding
from .journal import Posting, Replay, Transaction, TxnKind, transfer


class RefundItem(NamedTuple):
    """One bet of a Refund Bet or Refund Tournament request.

    ``amount``, ``rake`` and ``secrets`` are what the payload says of the bet: compared with the
    record and a mismatch noted, never used (a refund returns exactly what was held).
    """

    bet_uid: int
    user: str
    pool_uid: int
    amount: Decimal | None = None
    rake: Decimal | None = None
    secrets: Mapping[str, Any] | None = None


class Closing(NamedTuple):
    """What closing a bet writes: its new state and the legs of the closing transaction."""

    bet: Bet
    legs: tuple[Posting, ...]


def _closed(bet: Bet, state: BetState, payout: int | None, payout_currency: str | None) -> Bet:
    # Spelled out rather than ``bet._replace(...)``, which costs several times more; a settle
    # pays this once per participant.
    uid, user, pool_uid, currency, amount, rake, funding, _, _, _, ticket, uuid, secrets = bet
    return Bet(
        uid, user, pool_uid, currency, amount, rake, funding, state, payout, payout_currency,
        ticket, uuid, secrets,
    )  # fmt: skip


def _check_owner(bet: Bet, user: str, pool_uid: int) -> None:
    # A bet belongs to exactly one user and one tournament; a callback naming others is not
    # about this bet, and acting on it could move someone else's money.
    if bet.user != user or bet.pool_uid != pool_uid:
        raise BetConflict(f"bet {bet.uid} belongs to another user or tournament", bet_uid=bet.uid)


def refund(item: RefundItem, existing: Bet | None) -> Closing | Replay:
    """Decide a refund: the exact reverse of the hold, the replay it is, or an error.

    The reversal uses the amounts recorded at placement, never the refund payload's, so a
    refund can only ever return what was taken.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        return Replay.ALREADY_REFUNDED
    if existing.state == BetState.SETTLED:
        raise BetAlreadySettled(f"bet {item.bet_uid} is already settled", bet_uid=item.bet_uid)
    _check_owner(existing, item.user, item.pool_uid)
    destination = {
        Funding.CASH: user_account(existing.user),
        Funding.TICKET: HOUSE_TICKETS,
        Funding.FREE: "",
    }[existing.funding]
    legs = (
        transfer(
            held_account(existing.user),
            destination,
            existing.currency,
            existing.total,
            existing.uid,
        )
        if existing.funding != Funding.FREE
        else ()
    )
    return Closing(bet=_closed(existing, BetState.REFUNDED, None, None), legs=legs)


class SettleClaim(NamedTuple):
    """One participant of a Settle request as sent: the payout in the currency it names, if any."""

    bet_uid: int
    user: str
    pool_uid: int
    payout: Decimal
    currency: str | None = None
    secrets: Mapping[str, Any] | None = None


class SettleItem(NamedTuple):
    """One participant of a Settle request: payout in minor units of ``payout_currency``."""

    bet_uid: int
    user: str
    pool_uid: int
    payout: int
    payout_currency: str


def _same_payout(bet: Bet, item: SettleItem) -> bool:
    if (bet.payout or 0) == 0 and item.payout == 0:
        return True
    return bet.payout == item.payout and bet.payout_currency == item.payout_currency


def settle(item: SettleItem, existing: Bet | None) -> Closing | Replay:
    """Decide a settle: capture the hold and pay out, the replay it is, or an error.

    Capture moves the held buy-in to ``house:entries`` and the rake to ``house:rake``; a positive
    payout comes from ``house:prizes``. A zero payout is informational and credits nothing.
    """
    if existing is None:
        raise BetNotFound(f"bet {item.bet_uid} is unknown", bet_uid=item.bet_uid)
    if existing.state == BetState.REFUNDED:
        raise BetAlreadyRefunded(f"bet {item.bet_uid} is already refunded", bet_uid=item.bet_uid)
    if existing.state == BetState.SETTLED:
        if _same_payout(existing, item):
            return Replay.ALREADY_SETTLED
        raise BetConflict(
            f"bet {item.bet_uid} was settled with a different payout", bet_uid=item.bet_uid
        )
    _check_owner(existing, item.user, item.pool_uid)
    legs: tuple[Posting, ...] = ()
    if existing.funding != Funding.FREE and existing.total:
        # One leg releases the whole hold; the house legs are summed per request anyway.
        legs = (
            Posting(held_account(existing.user), existing.currency, -existing.total, existing.uid),
            Posting(HOUSE_ENTRIES, existing.currency, existing.amount),
            Posting(HOUSE_RAKE, existing.currency, existing.rake),
        )
    legs += transfer(
        HOUSE_PRIZES, user_account(existing.user), item.payout_currency, item.payout, existing.uid
    )
    closed = _closed(existing, BetState.SETTLED, item.payout, item.payout_currency)
    return Closing(bet=closed, legs=legs)


def _settle_item(claim: SettleClaim, bet: Bet | None, scale: Callable[[str], int]) -> SettleItem:
    # A settle that names no currency pays in the bet's own currency (an unknown bet is refused
    # by settle() whatever its payout).
    currency = claim.currency or (bet.currency if bet is not None else "")
    payout = to_minor(claim.payout, scale(currency), field="bet.payout") if currency else 0
    return SettleItem(claim.bet_uid, claim.user, claim.pool_uid, payout, currency)


@dataclass(frozen=True, slots=True)
class ClosedBets:
    """The answer to a refund or settle: which bets this request closed, which were already."""

    closed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)


class CloseDecision(NamedTuple):
    """What a refund or settle (or one chunk of it) writes, answers and notes."""

    bets: list[Bet]  # with their new state
    transaction: Transaction | None
    answer: ClosedBets
    notes: list[str]  # what the payload said that differs from the record: logged, not used


def refund_many(
    items: Sequence[RefundItem],
    known: Mapping[int, Bet],
    key: str,
    scale: Callable[[str], int],
) -> CloseDecision:
    """Decide the bets of a refund, all or nothing: the first rejection is raised."""

    def decide(item: RefundItem, bet: Bet | None) -> Closing | Replay:
        closing = refund(item, bet)
        if bet is not None and not isinstance(closing, Replay):
            notes.extend(refund_notes(item, bet, scale))
        return closing

    notes: list[str] = []
    return _close_many(items, known, key, TxnKind.REFUND, decide, notes)


def settle_many(
    claims: Sequence[SettleClaim],
    known: Mapping[int, Bet],
    key: str,
    scale: Callable[[str], int],
) -> CloseDecision:
    """Decide the participants of a settle, all or nothing: the first rejection is raised."""

    def decide(claim: SettleClaim, bet: Bet | None) -> Closing | Replay:
        closing = settle(_settle_item(claim, bet, scale), bet)
        if bet is not None and not isinstance(closing, Replay):
            notes.extend(echo_notes(claim.secrets, bet))
        return closing

    notes: list[str] = []
    return _close_many(claims, known, key, TxnKind.SETTLE, decide, notes)


class _Named(Protocol):
    @property
    def bet_uid(self) -> int: ...


Item = TypeVar("Item", bound=_Named)


def _close_many(
    items: Sequence[Item],
    known: Mapping[int, Bet],
    key: str,
    kind: TxnKind,
    decide: Callable[[Item, Bet | None], Closing | Replay],
    notes: list[str],
) -> CloseDecision:
    seen = dict(known)
    bets: list[Bet] = []
    legs: list[Posting] = []
    closed: list[int] = []
    unchanged: list[int] = []
    for item in items:
        uid = item.bet_uid
        closing = decide(item, seen.get(uid))
        if isinstance(closing, Replay):
            unchanged.append(uid)
            continue
        # A bet named twice in one request is closed once: the second sees it closed.
        seen[uid] = closing.bet
        bets.append(closing.bet)
        legs.extend(closing.legs)
        closed.append(uid)
    transaction = Transaction.journal(key, kind, legs) if legs else None
    return CloseDecision(bets, transaction, ClosedBets(closed, unchanged), notes)


def refund_notes(item: RefundItem, bet: Bet, scale: Callable[[str], int]) -> list[str]:
    """What a refund says of its bet that differs from the record: logged, never used."""
    notes = echo_notes(item.secrets, bet)
    for name, sent, recorded in (
        ("amount", item.amount, bet.amount),
        ("rake", item.rake, bet.rake),
    ):
        if sent is None:
            continue
        try:
            claimed: int | None = to_minor(sent, scale(bet.currency), field=name)
        except InvalidAmount:
            claimed = None
        if claimed != recorded:
            notes.append(
                f"bet {bet.uid}: the refund's {name} {str(sent)[:40]} differs from the recorded "
                f"{render(recorded, scale(bet.currency))} {bet.currency}"
            )
    return notes


def echo_notes(echoed: Mapping[str, Any] | None, bet: Bet) -> list[str]:
    """A note when the secrets a callback echoes differ from those returned at placement."""
    # The platform echoes the secrets Place Bet returned. An absent or empty echo is no claim
    # (the platform's own validator always sends {}); a different non-empty one is worth a look.
    if echoed and dict(echoed) != dict(bet.secrets):
        return [f"bet {bet.uid}: the secrets echoed differ from those returned at placement"]
    return []
